// The `brigade` command line. `brigade run` with no arguments generates (once) the
// demo dataset and runs the image pipeline on it; see `brigade run --help`.
//
// Exit codes: 0 success (also a resume of a completed job), 1 pipeline failure
// (failure budget exceeded, I/O or checkpoint error), 2 usage or config error,
// 130/143 after SIGINT/SIGTERM (ids flushed, checkpoint written).
#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "actors/errors.h"
#include "actors/stats.h"
#include "launch/config.h"
#include "launch/loader/demo_dataset.h"
#include "launch/loader/job.h"
#include "launch/loader/job_settings.h"
#include "launch/loader/object_reads.h"
#include "launch/loader/remote_ops.h"
#include "launch/loader/sources.h"
#include "launch/loader/stats_report.h"
#include "launch/loader/stats_reporter.h"
#include "launch/process.h"
#include "launch/profile.h"
#include "launch/progress.h"
#include "launch/run_statistics.h"
#include "launch/stats_output.h"
#include "transport/checkpoint/checkpoint.h"
#include "transport/remote/remote.h"
#include "transport/remote/report_link.h"

namespace {

using namespace brigade;

std::atomic<int> g_signal{0};
std::chrono::steady_clock::time_point g_program_start;
std::atomic<std::int64_t> g_signal_ns{0};

std::int64_t monotonic_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);  // async-signal-safe
  return std::int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

// The first SIGINT/SIGTERM asks the run to stop cleanly (ids flushed, checkpoint
// written). Repeats within a second are ignored — launchers such as timeout(1) signal
// both the process and its group — and a later one exits at once.
extern "C" void on_signal(int signal) {
  if (g_signal.load() == 0) {
    g_signal_ns.store(monotonic_ns());
    g_signal.store(signal);
  } else if (monotonic_ns() - g_signal_ns.load() > 1'000'000'000) {
    _exit(128 + signal);
  }
}

void install_signal_handlers() {
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

const char* end_name(launch::JobEnd end) {
  switch (end) {
    case launch::JobEnd::finished:
      return "finished";
    case launch::JobEnd::stopped:
      return "stopped";
    case launch::JobEnd::interrupted:
      return "interrupted";
    case launch::JobEnd::already_complete:
      return "already_complete";
    case launch::JobEnd::failed:
      return "failed";
  }
  return "?";
}

// The --json line. Figures start at the program's start; cpu_seconds and peak_rss_mb
// exclude what happened before the job (the demo dataset's generation).
// `class_counts`: samples delivered per class of a labelled dataset (else empty);
// `source_counts`: per source of a mix (else empty).
std::string summary_json(const launch::JobSummary& s, double cpu0,
                         const std::vector<std::pair<std::string, std::uint64_t>>& class_counts,
                         const std::vector<std::pair<std::string, std::uint64_t>>& source_counts) {
  // The statistics as actors/stats.h describes them (the keys of the Python Loader's).
  const auto object = [](const auto& record, auto figures) {
    nlohmann::json o = nlohmann::json::object();
    actors::for_each_figure(record, figures,
                            [&](std::string_view key, const auto& value) { o[key] = value; });
    return o;
  };
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& st : s.stats.stages) stages.push_back(object(st, actors::stage_figures()));
  nlohmann::json j{{"end", end_name(s.end)},
                   {"samples", s.counts.samples},
                   {"batches", s.counts.batches},
                   {"failed", s.counts.failed},
                   {"filtered", s.counts.filtered},
                   {"startup_s", s.startup_s},
                   {"seconds", s.seconds},
                   {"samples_per_s", s.samples_per_s},
                   {"time_to_first_batch_s", s.time_to_first_batch_s},
                   {"cpu_seconds", launch::cpu_seconds() - cpu0},
                   {"peak_rss_mb", launch::peak_rss_mb()},
                   {"stages", stages},
                   {"sink", object(s.stats.sink, actors::sink_figures())}};
  if (!class_counts.empty()) {
    nlohmann::json classes = nlohmann::json::object();
    for (const auto& [name, count] : class_counts) classes[name] = count;
    j["classes"] = classes;
  }
  if (!source_counts.empty()) {
    nlohmann::json sources = nlohmann::json::object();
    for (const auto& [name, count] : source_counts) sources[name] = count;
    j["sources"] = sources;
  }
  // Object storage (s3://, https:// data): requests, retries and failures per host.
  if (const auto storage = launch::object_read_stats(); storage.requests > 0) {
    nlohmann::json hosts = nlohmann::json::object();
    for (const auto& h : storage.hosts) {
      hosts[h.host] = {{"requests", h.requests},
                       {"retries", h.retries},
                       {"failures", h.failures},
                       {"bytes", h.bytes}};
    }
    j["object_storage"] = {{"requests", storage.requests},
                           {"retries", storage.retries},
                           {"bytes", storage.bytes},
                           {"hosts", hosts}};
    // Shard streams: chunk requests (prefetched ones among them), member reads, and
    // the reads that found their bytes not yet received (what a prefetch did not hide).
    if (const auto streams = launch::object_stream_stats(); streams.reads > 0) {
      j["object_storage"]["streams"] = {{"fetches", streams.fetches},
                                        {"prefetches", streams.prefetches},
                                        {"reads", streams.reads},
                                        {"waits", streams.waits},
                                        {"peak_held_bytes", streams.peak_held_bytes}};
    }
  }
  if (!s.failure.empty()) j["failure"] = s.failure;
  if (!s.checkpoint.empty()) j["checkpoint"] = s.checkpoint;
  if (s.remote) {
    nlohmann::json workers = nlohmann::json::array();
    for (const auto& w : s.remote->pool.workers) {
      workers.push_back({{"worker", w.name},
                         {"live", w.live},
                         {"tasks", w.tasks},
                         {"lost", w.lost},
                         {"bytes", w.bytes},
                         {"p50_ms", w.p50_ms},
                         {"p99_ms", w.p99_ms},
                         {"sessions", w.sessions}});
    }
    j["remote"] = {{"tasks", s.remote->pool.done},
                   {"redispatched", s.remote->attempts_lost},
                   {"late_results_dropped", s.remote->pool.late_dropped},
                   {"decoded_locally", s.remote->decoded_locally},
                   {"decoded_here", s.remote->decoded_here},
                   {"rank_weights", s.remote->weights},
                   {"bytes", s.remote->pool.bytes},
                   {"workers_live", s.remote->pool.live_workers},
                   {"workers", workers}};
  }
  return j.dump();
}

// 64-bit FNV-1a of a batch's bytes (host batches; a device batch's are not read back).
std::uint64_t fnv1a(const media::Tensor& t) {
  std::uint64_t h = 14695981039346656037ull;
  const auto* p = static_cast<const unsigned char*>(t.data());
  for (std::size_t i = 0, n = p ? t.nbytes() : 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// The number of label values of a labelled dataset: its classes, else the largest
// label + 1.
std::size_t label_count(const launch::Dataset& d) {
  if (!d.classes().empty()) return d.classes().size();
  std::int64_t top = -1;
  for (std::size_t i = 0; i < d.size(); ++i) top = std::max(top, d.label(i));
  return static_cast<std::size_t>(top + 1);
}

// ", 10 classes (cat, dog, …)" for the info line (at most 8 names), "" unlabelled.
std::string classes_text(const launch::Dataset& d) {
  if (!d.labelled()) return {};
  if (!d.sources().empty()) return ", labelled (each source's labels are its own classes)";
  const auto& classes = d.classes();
  if (classes.empty()) return fmt::format(", labelled ({} label values)", label_count(d));
  std::string names;
  for (std::size_t i = 0; i < classes.size() && i < 8; ++i) names += (i ? ", " : "") + classes[i];
  if (classes.size() > 8) names += ", …";
  return fmt::format(", {} classes ({})", classes.size(), names);
}

// The classes a run counts samples of: one slot per label value of a labelled dataset;
// in a mix, per label value of each source (its labels are its own classes), named
// "source/class".
struct ClassSlots {
  std::vector<std::size_t> first;  // per source (one for a dataset that is not joined)
  std::vector<std::string> names;
  std::size_t slot(const launch::Dataset& d, std::uint64_t id, std::int64_t label) const {
    return first[d.source_of(id)] + static_cast<std::size_t>(label);
  }
};

ClassSlots class_slots(const launch::Dataset& d) {
  ClassSlots s;
  if (!d.labelled()) return s;
  const auto name = [](const std::vector<std::string>& classes, std::size_t l) {
    return l < classes.size() ? classes[l] : std::to_string(l);
  };
  if (d.sources().empty()) {
    s.first.push_back(0);
    for (std::size_t l = 0; l < label_count(d); ++l) s.names.push_back(name(d.classes(), l));
    return s;
  }
  for (const auto& src : d.sources()) {
    s.first.push_back(s.names.size());
    std::int64_t top = static_cast<std::int64_t>(src.classes.size()) - 1;
    for (std::uint64_t i = src.offset; i < src.offset + src.size; ++i)
      top = std::max(top, d.label(i));
    for (std::size_t l = 0; l < static_cast<std::size_t>(top + 1); ++l)
      s.names.push_back(src.name + "/" + name(src.classes, l));
  }
  return s;
}

// "samples per class: cat 120, dog 80" (up to 20 classes; beyond, the extremes).
std::string counts_text(std::string_view what, const std::vector<std::string>& names,
                        const std::vector<std::uint64_t>& counts) {
  if (counts.size() <= 20) {
    std::string text = fmt::format("samples per {}:", what);
    for (std::size_t l = 0; l < counts.size(); ++l)
      text += fmt::format("{} {} {}", l ? "," : "", names[l], counts[l]);
    return text;
  }
  const auto [lo, hi] = std::minmax_element(counts.begin(), counts.end());
  return fmt::format("samples per {} ({} of them): fewest {} ({}), most {} ({})", what,
                     counts.size(), *lo, names[static_cast<std::size_t>(lo - counts.begin())], *hi,
                     names[static_cast<std::size_t>(hi - counts.begin())]);
}

// ", a mix of 2 sources (photos × 3, web × 1)" for the info line; "" without sources.
std::string sources_text(const launch::RunConfig& c) {
  if (c.sources.empty()) return {};
  std::string names;
  for (const auto& s : c.sources)
    names += fmt::format("{}{} × {}", names.empty() ? "" : ", ", s.name, s.weight);
  return fmt::format(", a mix of {} sources ({})", c.sources.size(), names);
}

// `generation`: the time spent generating the demo dataset (zero when it existed).
launch::Dataset load_dataset(const launch::RunConfig& c,
                             std::chrono::steady_clock::duration& generation) {
  if (c.list.empty() && c.data.empty() && c.manifest.empty() && c.shards.empty() &&
      c.sources.empty()) {
    const auto t0 = std::chrono::steady_clock::now();
    launch::demo_folder(c.kind);
    generation = std::chrono::steady_clock::now() - t0;
  }
  return launch::open_dataset(c);
}

// The first three descriptors must be open before anything else is: with stdout closed
// (`>&-`), the ids file would otherwise become descriptor 1 and receive the JSON line.
void occupy_standard_descriptors() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) != -1) continue;
    const int null = open("/dev/null", O_RDWR);
    if (null >= 0 && null != fd) {
      dup2(null, fd);
      close(null);
    }
  }
}

// --pause-after-batches: the consumer stops asking for batches (a hung training step)
// until SIGINT/SIGTERM; the job then stops as it would at any interrupt.
void pause_consumer(const launch::JobBatch& batch) {
  spdlog::warn(
      "brigade: --pause-after-batches: the consumer stops asking for batches after "
      "sample {} until interrupted",
      batch.ids.empty() ? 0 : batch.ids.back());
  while (g_signal.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

int run(const launch::RunCommand& config) {
  install_signal_handlers();  // a signal from here on stops the job at its first check
  // Generating the demo dataset (first run only) is not part of the run: its time is
  // taken out of the run's clock, its CPU and memory out of the figures below.
  std::chrono::steady_clock::duration generation{};
  const auto dataset = load_dataset(config, generation);
  const auto origin = g_program_start + generation;
  const double cpu0 = launch::cpu_seconds();  // the job's own figures from here on
  launch::reset_peak_rss();
  std::ofstream digests;
  if (!config.digests_out.empty()) {
    digests.open(config.digests_out, std::ios::trunc);
    if (!digests)
      throw launch::ConfigError(
          fmt::format("digests_out {}: cannot create the file", config.digests_out));
  }
  std::ofstream ids;
  if (!config.ids_out.empty()) {
    ids.open(config.ids_out, std::ios::trunc);
    if (!ids)
      throw launch::ConfigError(fmt::format("ids_out {}: cannot create the file", config.ids_out));
  }
  spdlog::info("brigade: {} {}s{}{}, rank {} of {}, batch {}, {} epoch(s), {}", dataset.size(),
               launch::to_string(config.kind), sources_text(config), classes_text(dataset),
               *config.rank, *config.world_size, *config.batch_size, config.epochs,
               config.shuffle ? fmt::format("shuffled with seed {}", config.seed) : "in order");
  // Samples delivered per class (a labelled dataset's) and per source (a mix's), for the
  // JSON summary.
  const auto slots = class_slots(dataset);
  std::vector<std::uint64_t> per_label(slots.names.size());
  std::vector<std::uint64_t> per_source(dataset.sources().size());
  std::vector<std::string> source_names;
  for (const auto& s : dataset.sources()) source_names.push_back(s.name);
  launch::ProgressReporter progress(config.progress && isatty(STDERR_FILENO));
  launch::RunStatistics statistics(config);
  std::int64_t delivered_batches = 0;
  const launch::JobHooks hooks{
      .on_batch =
          [&](const launch::JobBatch& batch) {
            statistics.on_batch(batch);
            if (++delivered_batches == config.pause_after_batches) pause_consumer(batch);
            for (std::size_t i = 0; i < batch.labels.size(); ++i)
              ++per_label[slots.slot(dataset, batch.ids[i], batch.labels[i])];
            for (auto source : batch.sources) ++per_source[static_cast<std::size_t>(source)];
            // is_open, not the stream's state: an unopened stream is "good" until its
            // first write fails, so the first batch was hashed for nothing.
            if (digests.is_open()) {
              digests << batch.epoch << ' ' << fmt::format("{:016x}", fnv1a(batch.data));
              for (auto id : batch.ids) digests << ' ' << id;
              if (dataset.labelled()) {
                digests << " labels";
                for (auto label : batch.labels) digests << ' ' << label;
              }
              if (!batch.sources.empty()) {
                digests << " sources";
                for (auto source : batch.sources) digests << ' ' << source;
              }
              digests << '\n';
            }
            if (!ids.is_open()) return;
            for (auto id : batch.ids) ids << id << '\n';
          },
      .on_progress = [&](const launch::Progress& p) { progress.update(p); },
      .interrupt = &g_signal,
      .on_saved =
          [&] {
            progress.finish();
            ids.flush();
            digests.flush();
          },
      .origin = origin,
      .stop_after_batches = config.stop_after_batches,
      .on_job = [&](std::shared_ptr<const launch::Job> job) { statistics.on_job(std::move(job)); }};
  const auto summary = launch::run_job(config, dataset, hooks);
  statistics.stop();
  progress.finish();
  ids.flush();
  if (summary.end != launch::JobEnd::already_complete) {
    if (summary.end == launch::JobEnd::failed) {
      spdlog::error("brigade: {}", summary.failure);
    }
    spdlog::info("brigade: {}\n{}", end_name(summary.end),
                 actors::format_stats_table(summary.stats));
    spdlog::info(
        "brigade: {} samples in {} batches, {:.0f} samples/s after the first batch "
        "(first batch at {:.3f} s), {} failed",
        summary.counts.samples, summary.counts.batches, summary.samples_per_s,
        summary.time_to_first_batch_s, summary.counts.failed);
    if (!per_source.empty())
      spdlog::info("brigade: {}", counts_text("source", source_names, per_source));
    if (!per_label.empty())
      spdlog::info("brigade: {}", counts_text("class", slots.names, per_label));
    if (!summary.checkpoint.empty())
      spdlog::info("brigade: checkpoint written to {}", summary.checkpoint);
    if (summary.remote) {
      const auto& r = *summary.remote;
      spdlog::info(
          "brigade: remote: {} tasks, {} sent again, {} late results dropped, {} samples decoded "
          "here",
          r.pool.done, r.attempts_lost, r.pool.late_dropped, r.decoded_locally);
      for (const auto& w : r.pool.workers) {
        spdlog::info(
            "brigade:   worker {:<22} {:>6} tasks {:>4} lost  p50 {:7.1f} ms  p99 {:7.1f} ms  "
            "{:8.1f} MB{}",
            w.name, w.tasks, w.lost, w.p50_ms, w.p99_ms, double(w.bytes) / 1e6,
            w.live ? "" : "  (lost)");
      }
    }
  }
  if (config.json) {
    std::vector<std::pair<std::string, std::uint64_t>> class_counts, source_counts;
    for (std::size_t l = 0; l < per_label.size(); ++l)
      class_counts.emplace_back(slots.names[l], per_label[l]);
    for (std::size_t s = 0; s < per_source.size(); ++s)
      source_counts.emplace_back(source_names[s], per_source[s]);
    std::printf("%s\n", summary_json(summary, cpu0, class_counts, source_counts).c_str());
  }
  std::fflush(stdout);
  const int code = summary.end == launch::JobEnd::interrupted ? 128 + g_signal.load()
                   : summary.end == launch::JobEnd::failed    ? 1
                                                              : 0;
  if (summary.abandoned) {
    // A stage is blocked in a call that never returns: end without joining it.
    spdlog::default_logger()->flush();
    std::fflush(stderr);
    _exit(code);
  }
  return code;
}

// `brigade stats FILE [-o OUT]`: the HTML page of a --stats-out file (stats_output.h).
int stats(const std::string& file, const std::string& out) {
  try {
    std::ifstream in(file);
    if (!in) throw launch::ConfigError(fmt::format("{}: cannot read the file", file));
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto page = launch::render_stats_html(
        text,
        fmt::format("Brigade statistics: {}", std::filesystem::path(file).filename().string()));
    if (out.empty()) {
      std::fwrite(page.data(), 1, page.size(), stdout);
      return 0;
    }
    std::ofstream o(out, std::ios::trunc);
    o << page;
    if (!o.flush()) throw launch::ConfigError(fmt::format("{}: cannot write the file", out));
    return 0;
  } catch (const launch::ConfigError& e) {
    spdlog::error("brigade stats: {}: {}", file, e.what());
    return 2;
  }
}

// `brigade worker`: serves the built-in decode operations until SIGINT/SIGTERM. The
// first line on stdout is the address it listens on ("127.0.0.1:40123").
struct WorkerArgs {
  std::string listen = "127.0.0.1:0";
  std::string join, advertise, token_file, tls_cert, tls_key, tls_ca, data, list;
  std::vector<std::string> shards;  // WebDataset tar shards (brace ranges expanded)
  std::string image_key, video_key, label_key;
  std::string kind = "image";
  std::string labels = "none";
  std::string config;
  std::string stats;  // HOST:PORT of rank 0's collector, or auto (from --join)
  double stats_interval = 10;
  int threads = 0;
  int window = 0;
};

// `brigade worker --stats`: where its reports go. "auto": the collector of a rank 0
// started with `--directory auto --stats auto`, beside the directory --join names
// (MASTER_PORT + kStatsPortOffset, the directory being at + kDirectoryPortOffset).
transport::Endpoint worker_stats_endpoint(const WorkerArgs& a, const transport::WorkerOptions& o) {
  if (a.stats != "auto") {
    try {
      return transport::parse_endpoint(a.stats, "--stats");
    } catch (const transport::EndpointError& e) {
      throw launch::ConfigError(e.what());
    }
  }
  if (!o.join) {
    throw launch::ConfigError(
        "--stats auto: the collector is found beside the directory, and no --join names it "
        "(give --stats HOST:PORT)");
  }
  const int port = o.join->port - launch::kDirectoryPortOffset + launch::kStatsPortOffset;
  if (port <= 0 || port > 65535)
    throw launch::ConfigError(
        fmt::format("--stats auto: no port beside --join {}", o.join->to_string()));
  return {o.join->host, static_cast<std::uint16_t>(port)};
}

int worker(const WorkerArgs& a) {
  install_signal_handlers();
  const auto getenv = [](const char* name) { return std::getenv(name); };
  transport::WorkerOptions o;
  try {
    o.listen = transport::parse_endpoint(a.listen, "--listen", true);
    if (!a.join.empty()) o.join = transport::parse_endpoint(a.join, "--join");
    if (!a.advertise.empty())
      o.advertise = transport::parse_endpoint(a.advertise, "--advertise", true);
  } catch (const transport::EndpointError& e) {
    throw launch::ConfigError(e.what());
  }
  if (!(a.stats_interval >= 0.2 && a.stats_interval <= 86400))
    throw launch::ConfigError(
        fmt::format("--stats-interval: 0.2 to 86400 seconds, got {}", a.stats_interval));
  if (a.threads < 0 || a.threads > launch::kMaxConcurrency || a.window < 0)
    throw launch::ConfigError("--threads and --window: expected 0 (default) up to 1024");
  if (!a.tls_cert.empty() || !a.tls_key.empty() || !a.tls_ca.empty()) {
    if (a.tls_cert.empty() || a.tls_key.empty() || a.tls_ca.empty())
      throw launch::ConfigError("--tls-cert, --tls-key and --tls-ca go together");
  }
  o.threads = a.threads;
  o.window = static_cast<std::uint32_t>(a.window);
  o.security = {launch::read_job_token(a.token_file, getenv), a.tls_cert, a.tls_key, a.tls_ca};
  std::vector<launch::SampleLocation> files;
  if (int(!a.data.empty()) + int(!a.list.empty()) + int(!a.shards.empty()) +
          int(!a.config.empty()) >
      1)
    throw launch::ConfigError("--config, --data, --list and --shards: give one of them");
  std::optional<launch::RunConfig> listing;
  if (!a.config.empty()) {
    // The trainer's own file: its data keys ([[sources]] too), kind and labels.
    listing.emplace();
    launch::apply_toml_file(*listing, a.config);
    if (listing->sources.empty() && listing->data.empty() && listing->list.empty() &&
        listing->manifest.empty() && listing->shards.empty())
      throw launch::ConfigError(fmt::format(
          "--config {}: names no data (data, list, manifest, shards or [[sources]])", a.config));
  } else if (!a.data.empty() || !a.list.empty() || !a.shards.empty()) {
    if (a.kind != "image" && a.kind != "video") throw launch::ConfigError("--kind: image or video");
    if (a.labels != "none" && a.labels != "folder")
      throw launch::ConfigError("--labels: none or folder");
    listing.emplace();
    listing->data = a.data;
    listing->list = a.list;
    listing->kind = a.kind == "video" ? launch::MediaKind::video : launch::MediaKind::image;
    listing->labels = a.labels == "folder" ? launch::Labels::folder : launch::Labels::none;
    listing->shards = a.shards;
    if (!a.image_key.empty()) listing->image_key = a.image_key;
    if (!a.video_key.empty()) listing->video_key = a.video_key;
    listing->label_key = a.label_key;
  }
  if (listing) {
    // The trainer's listing (open_dataset), so that ids and the fingerprint agree.
    auto d = launch::open_dataset(*listing, false);
    o.fingerprint = d.identity_hash();
    files.reserve(d.size());
    for (std::size_t i = 0; i < d.size(); ++i) files.push_back(d.location(i));
  }
  transport::OperationRegistry registry;
  const auto served = files.size();
  launch::register_decode_operations(registry, std::move(files));
  std::unique_ptr<transport::WorkerNode> node;
  try {
    node = std::make_unique<transport::WorkerNode>(o, std::move(registry));
  } catch (const transport::RemoteError& e) {
    throw launch::ConfigError(e.what());
  }
  // Its statistics (issue 24): one report per interval to rank 0's collector, on the
  // statistics link with the job token (never blocking a task: the sender queues).
  std::unique_ptr<transport::ReportSender> stats_sender;
  std::unique_ptr<launch::WorkerStatsReporter> stats_reporter;
  if (!a.stats.empty()) {
    const auto at = worker_stats_endpoint(a, o);
    const auto advertised = o.advertise.value_or(node->address());
    const std::string name =
        transport::Endpoint{advertised.host,
                            advertised.port ? advertised.port : node->address().port}
            .to_string();
    stats_sender =
        std::make_unique<transport::ReportSender>(at, o.security.token, transport::kWorkerSender);
    stats_reporter = std::make_unique<launch::WorkerStatsReporter>(
        [n = node.get()] { return n->take_served(); },
        [s = stats_sender.get()](const launch::WorkerNodeReport& r) {
          s->send(launch::write_worker_report(r));
        },
        launch::WorkerReporterOptions{
            .interval_s = a.stats_interval,
            .name = name,
            .host = launch::host_name(),
            .cpu_seconds = [] { return launch::cpu_seconds(); },
            .grid = launch::wall_clock_grid(a.stats_interval, *actors::Clock::steady())});
    stats_reporter->start();
    spdlog::info("brigade worker: statistics every {} s to {} as {}", a.stats_interval,
                 at.to_string(), name);
  }
  std::printf("%s\n", node->address().to_string().c_str());
  std::fflush(stdout);
  spdlog::info("brigade worker: listening on {}{}{}", node->address().to_string(),
               o.join ? ", joining the directory at " + o.join->to_string() : "",
               served ? fmt::format(", serving a dataset of {} samples", served) : "");
  while (g_signal.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (stats_reporter) {
    stats_reporter->stop();  // the interval in progress
    stats_sender->drain(std::chrono::seconds(1));
  }
  const auto st = node->stats();
  spdlog::info(
      "brigade worker: stopping: {} sessions opened, {} tasks done, {} failed, {} cancelled, "
      "{} hellos refused, {} messages dropped, {} system messages not obeyed, {} connections "
      "refused by the token's handshake, {:.1f} s busy",
      st.sessions_opened, st.tasks_done, st.tasks_failed, st.tasks_cancelled, st.hellos_refused,
      st.messages_dropped, st.system_messages_dropped, st.connections_refused, st.busy_seconds);
  spdlog::default_logger()->flush();
  // An operation blocked outside the process (a hung file system) cannot be joined.
  std::fflush(stderr);
  _exit(0);
}

}  // namespace

// `brigade profile`: the job's stages one at a time (launch/profile.h).
int profile(const launch::RunCommand& config, launch::ProfileOptions options,
            const std::string& levels) {
  for (std::size_t at = 0; at < levels.size();) {
    const auto comma = std::min(levels.find(',', at), levels.size());
    const auto item = levels.substr(at, comma - at);
    int value = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (ec != std::errc() || end != item.data() + item.size())
      throw launch::ConfigError(
          fmt::format("--concurrency: expected numbers separated by commas, got '{}'", levels));
    options.concurrency.push_back(value);
    at = comma + 1;
  }
  std::chrono::steady_clock::duration generation{};
  const auto dataset = load_dataset(config, generation);
  const auto report = launch::profile_job(config, dataset, options);
  if (config.json) {
    std::printf("%s\n", launch::profile_json(report).c_str());
  } else {
    std::printf("%s", launch::format_profile(report).c_str());
  }
  return 0;
}

int main(int argc, char** argv) {
  g_program_start = std::chrono::steady_clock::now();
  launch::mark_program_start();
  occupy_standard_descriptors();
  spdlog::set_default_logger(spdlog::stderr_color_mt("brigade"));
  spdlog::set_pattern("%H:%M:%S.%e %^%l%$ %v");

  CLI::App app{"brigade: a data loader for machine-learning training"};
  app.require_subcommand(1);
  auto* run_cmd = app.add_subcommand(
      "run",
      "run the image (or video) pipeline; default: the demo dataset. Settings come "
      "from the optional TOML CONFIG (same keys, e.g. batch_size, [stages.decode] "
      "concurrency) and flags, which override it. Exit codes: 0 success, 1 pipeline "
      "failure, 2 usage or config error, 130/143 interrupted.");
  std::string config_file;
  std::vector<std::pair<std::string, std::string>> given;  // flags in the order CLI11 reports them
  // `run` and `profile` take the job's description: a TOML file and the key table's flags.
  const auto add_job_flags = [&config_file, &given](CLI::App* cmd) {
    cmd->add_option("config", config_file, "TOML config file");
    for (const auto& f : launch::run_flags()) {
      const std::string flag(f.flag);
      if (f.takes_value) {
        cmd->add_option_function<std::string>(
               flag, [&given, flag](const std::string& v) { given.emplace_back(flag, v); },
               std::string(f.help))
            ->type_name(f.metavar);
        continue;
      }
      cmd->add_flag_callback(
          flag, [&given, flag] { given.emplace_back(flag, ""); }, std::string(f.help));
      if (f.negatable) {
        const std::string off = "--no-" + flag.substr(2);
        cmd->add_flag_callback(
            off, [&given, off] { given.emplace_back(off, ""); }, "turn " + flag + " off");
      }
    }
  };
  add_job_flags(run_cmd);
  auto* profile_cmd = app.add_subcommand(
      "profile",
      "run the job's local stages (read, decode) one at a time at concurrency 1, 2, 4, ... "
      "on a bounded sample of its data, print each stage's samples/s and CPU per sample, "
      "and the recommended concurrency as TOML lines (JSON with --json). Takes `run`'s "
      "config and flags.");
  add_job_flags(profile_cmd);
  launch::ProfileOptions profile_options;
  std::string profile_levels;
  profile_cmd->add_option("--samples", profile_options.samples,
                          "samples to profile (default: batch size x 8 x the largest "
                          "concurrency, at most 4096)");
  profile_cmd->add_option("--concurrency", profile_levels,
                          "concurrencies to try, e.g. 1,2,4 (default: powers of two up to the "
                          "cores)");
  std::string stats_file, stats_html;
  auto* stats_cmd = app.add_subcommand(
      "stats",
      "render a --stats-out JSON lines file (one rank's, or several concatenated) into one "
      "self-contained HTML page: per-rank samples/s and exposed data wait over time, "
      "per-stage occupancy, the analyzer's events marked");
  stats_cmd->add_option("file", stats_file, "the JSON lines file")->required();
  stats_cmd->add_option("-o,--out", stats_html, "the HTML file to write (default: stdout)");
  WorkerArgs wa;
  auto* worker_cmd = app.add_subcommand(
      "worker",
      "serve the built-in decode operations to trainers (`brigade run --workers` or "
      "`--directory`); prints the address it listens on as the first line of stdout. The "
      "job token comes from --token-file or BRIGADE_TOKEN.");
  worker_cmd->add_option("--listen", wa.listen, "HOST:PORT to listen on (port 0: any free port)")
      ->capture_default_str();
  worker_cmd->add_option("--join", wa.join, "HOST:PORT of the job's directory (rank 0) to join");
  worker_cmd->add_option("--advertise", wa.advertise,
                         "HOST:PORT the directory tells trainers (default: the listen address)");
  worker_cmd->add_option("--threads", wa.threads, "operation threads (default: cores)");
  worker_cmd->add_option("--window", wa.window,
                         "tasks outstanding per trainer (default: 2 × threads)");
  worker_cmd->add_option("--token-file", wa.token_file, "file with the job token (mode 600)");
  worker_cmd->add_option("--tls-cert", wa.tls_cert,
                         "PEM certificate (TLS; with --tls-key, --tls-ca)");
  worker_cmd->add_option("--tls-key", wa.tls_key, "PEM private key");
  worker_cmd->add_option("--tls-ca", wa.tls_ca, "PEM CA that signs every peer's certificate");
  worker_cmd->add_option("--config", wa.config,
                         "the trainer's TOML config as this node sees it (optional): the "
                         "dataset its data keys name ([[sources]] too), its other keys ignored");
  worker_cmd->add_option("--data", wa.data, "the dataset's folder as this node sees it (optional)");
  worker_cmd->add_option("--list", wa.list, "the dataset's list as this node sees it (optional)");
  worker_cmd->add_option("--shards", wa.shards,
                         "the dataset's tar shards as this node sees them (optional; files or "
                         "brace ranges, as `brigade run --shards`)");
  worker_cmd->add_option("--stats", wa.stats,
                         "HOST:PORT of rank 0's statistics collector (`brigade run --stats`), or "
                         "auto: beside the directory --join names (rank 0 with --directory auto "
                         "--stats auto); reports tasks served per rank, task times, queue and "
                         "CPU every --stats-interval seconds, with the job token");
  worker_cmd->add_option("--stats-interval", wa.stats_interval,
                         "seconds between two statistics reports (default 10; at least 0.2)");
  worker_cmd->add_option("--image-key", wa.image_key, "with --shards: as `brigade run`");
  worker_cmd->add_option("--video-key", wa.video_key, "with --shards: as `brigade run`");
  worker_cmd->add_option("--label-key", wa.label_key, "with --shards: as `brigade run`");
  worker_cmd->add_option("--kind", wa.kind, "image|video (with --data or --shards)")
      ->capture_default_str();
  worker_cmd
      ->add_option("--labels", wa.labels,
                   "none|folder: as the trainer's --labels (with --data: the order of "
                   "the samples, and the fingerprint, depend on it)")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (stats_cmd->parsed()) return stats(stats_file, stats_html);
  if (worker_cmd->parsed()) {
    try {
      return worker(wa);
    } catch (const launch::ConfigError& e) {
      spdlog::error("brigade worker: {}", e.what());
      return 2;
    } catch (const std::exception& e) {
      spdlog::error("brigade worker: {}", e.what());
      return 1;
    }
  }
  launch::RunCommand config;
  try {
    if (!config_file.empty()) launch::apply_toml_file(config, config_file);
    for (const auto& [flag, value] : given) launch::apply_flag(config, flag, value);
    launch::resolve(config, [](const char* name) { return std::getenv(name); });
    if (config.rebalance && (config.stats.empty() || config.directory.empty())) {
      throw launch::ConfigError(
          "--rebalance: rank 0 weighs the ranks from their statistics reports and sends the "
          "weights to the workers through its directory: give every rank --stats (auto) and "
          "--directory (auto)",
          "remote.rebalance");
    }
    if (profile_cmd->parsed()) return profile(config, profile_options, profile_levels);
    return run(config);
  } catch (const launch::ConfigError& e) {
    spdlog::error("brigade: {}", e.what());
    return 2;
  } catch (const actors::PipelineFailure& e) {
    spdlog::error("brigade: {}", e.what());
    return 1;
  } catch (const transport::CheckpointError& e) {
    spdlog::error("brigade: checkpoint: {}", e.what());
    using K = transport::CheckpointErrorKind;
    return e.kind() == K::not_found || e.kind() == K::incomplete ? 2 : 1;
  } catch (const std::exception& e) {
    spdlog::error("brigade: {}", e.what());
    return 1;
  }
}
