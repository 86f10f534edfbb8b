#include "launch/profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <thread>

#include "actors/pipeline.h"
#include "launch/loader/decode.h"
#include "launch/process.h"

namespace brigade::launch {

namespace {

using Clock = std::chrono::steady_clock;

std::vector<int> default_levels() {
  const int cores = static_cast<int>(std::max(2u, std::thread::hardware_concurrency()));
  std::vector<int> levels;
  for (int c = 1; c < cores; c *= 2) levels.push_back(c);
  levels.push_back(cores);
  return levels;
}

// Runs tasks 0 … tasks-1 of `fn` (which returns its failed samples) `rounds` times
// through a one-stage pipeline: `samples` samples per round.
template <class Fn>
ProfileRun measure(int concurrency, actors::Executor executor, std::size_t tasks,
                   std::size_t samples, std::size_t rounds, Fn fn) {
  std::vector<std::uint64_t> source(tasks * rounds);
  for (std::size_t i = 0; i < source.size(); ++i) source[i] = i % tasks;
  samples *= rounds;
  auto pipeline = actors::PipelineBuilder()
                      .add_source(std::move(source))
                      .pipe(fn, {.concurrency = concurrency,
                                 .output_order = actors::Order::completion,
                                 .executor = executor,
                                 .name = "profiled"})
                      .add_sink(4)
                      .build({.num_threads = concurrency, .log_stats_at_end = false});
  const double cpu0 = cpu_seconds();
  const auto t0 = Clock::now();
  std::uint64_t failed = 0;
  for (auto& f : pipeline) failed += f;
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const double cpu = cpu_seconds() - cpu0;
  const auto n = static_cast<double>(samples);
  return {.concurrency = concurrency,
          .samples_per_s = seconds > 0 ? n / seconds : 0,
          .cpu_ms_per_sample = n > 0 ? cpu * 1000 / n : 0,
          .failed = failed / rounds};
}

// Rounds of a stage's tasks that make a run last about kMinRunSeconds, judged from one
// round at the lowest concurrency (short runs measure the pipeline's start, not the stage).
constexpr double kMinRunSeconds = 0.5;
constexpr std::size_t kMaxRounds = 64;

std::size_t rounds_for(const ProfileRun& one_round, std::size_t samples) {
  if (one_round.samples_per_s <= 0) return 1;
  const double seconds = static_cast<double>(samples) / one_round.samples_per_s;
  return std::clamp<std::size_t>(static_cast<std::size_t>(std::ceil(kMinRunSeconds / seconds)), 1,
                                 kMaxRounds);
}

int recommend(const std::vector<ProfileRun>& runs) {
  double best = 0;
  for (const auto& r : runs) best = std::max(best, r.samples_per_s);
  for (const auto& r : runs) {
    if (r.samples_per_s >= kProfileEnough * best) return r.concurrency;
  }
  return runs.empty() ? 1 : runs.back().concurrency;
}

}  // namespace

ProfileReport profile_job(const RunConfig& c, const Dataset& dataset,
                          const ProfileOptions& options) {
  if (c.remote())
    throw ConfigError(
        "profile: the stages of a remote job run on its workers: profile a worker's node with "
        "its data (a local job)",
        "remote.workers");
  auto levels = options.concurrency.empty() ? default_levels() : options.concurrency;
  for (const int l : levels) {
    if (l < 1 || l > kMaxConcurrency)
      throw ConfigError(
          fmt::format("profile: concurrency {}: expected 1 to {}", l, kMaxConcurrency));
  }
  std::sort(levels.begin(), levels.end());
  levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
  const auto batch = static_cast<std::size_t>(*c.batch_size);
  std::size_t samples = options.samples;
  if (samples == 0)
    samples = std::min<std::size_t>(batch * 8 * static_cast<std::size_t>(levels.back()), 4096);
  samples = std::min(samples, dataset.size());
  if (samples == 0) throw ConfigError("profile: the dataset has no samples", "data");

  // A first pass: the samples' bytes, in memory for the decode runs, and in the page
  // cache for the read runs.
  std::vector<EncodedSample> read(samples);
  for (std::size_t i = 0; i < samples; ++i) {
    read[i] = encoded_sample(i, dataset.location(i));
    read_sample(read[i]);
  }

  ProfileReport report{.samples = samples};
  const auto read_one = [&dataset](std::uint64_t id) -> std::uint64_t {
    EncodedSample e = encoded_sample(id, dataset.location(id));
    read_sample(e);
    return e.failed() ? 1 : 0;
  };
  const auto read_rounds = rounds_for(
      measure(levels.front(), actors::Executor::io, samples, samples, 1, read_one), samples);
  StageProfile reads{.name = "read"};
  for (const int l : levels) {
    reads.runs.push_back(measure(l, actors::Executor::io, samples, samples, read_rounds, read_one));
  }
  reads.recommended = recommend(reads.runs);

  const auto spec = decode_spec(c, 0);
  const std::size_t tasks = (samples + batch - 1) / batch;
  const auto decode_one = [&read, &spec, batch](std::uint64_t task) -> std::uint64_t {
    const std::size_t begin = task * batch;
    const std::size_t end = std::min(read.size(), begin + batch);
    std::vector<EncodedSample> group(read.begin() + static_cast<std::ptrdiff_t>(begin),
                                     read.begin() + static_cast<std::ptrdiff_t>(end));
    return decode_batch(spec, group, {}).failures.size();
  };
  const auto decode_rounds = rounds_for(
      measure(levels.front(), actors::Executor::cpu, tasks, samples, 1, decode_one), samples);
  StageProfile decodes{.name = "decode"};
  for (const int l : levels) {
    decodes.runs.push_back(
        measure(l, actors::Executor::cpu, tasks, samples, decode_rounds, decode_one));
  }
  decodes.recommended = recommend(decodes.runs);

  report.toml =
      fmt::format("[stages.read]\nconcurrency = {}\n\n[stages.decode]\nconcurrency = {}\n",
                  reads.recommended, decodes.recommended);
  if (decodes.recommended > *c.threads)
    report.toml = fmt::format("threads = {}\n\n", decodes.recommended) + report.toml;
  report.stages = {std::move(reads), std::move(decodes)};
  return report;
}

std::string format_profile(const ProfileReport& r) {
  std::string out = fmt::format("brigade profile: {} samples\n", r.samples);
  out += fmt::format("{:<8} {:>11} {:>12} {:>14} {:>7}\n", "stage", "concurrency", "samples/s",
                     "CPU ms/sample", "failed");
  for (const auto& s : r.stages) {
    for (const auto& run : s.runs) {
      out += fmt::format("{:<8} {:>11} {:>12.0f} {:>14.3f} {:>7}{}\n", s.name, run.concurrency,
                         run.samples_per_s, run.cpu_ms_per_sample, run.failed,
                         run.concurrency == s.recommended ? "  <- recommended" : "");
    }
  }
  out += "\n# paste into the job's TOML:\n" + r.toml;
  return out;
}

std::string profile_json(const ProfileReport& r) {
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : r.stages) {
    nlohmann::json runs = nlohmann::json::array();
    for (const auto& run : s.runs) {
      runs.push_back({{"concurrency", run.concurrency},
                      {"samples_per_s", run.samples_per_s},
                      {"cpu_ms_per_sample", run.cpu_ms_per_sample},
                      {"failed", run.failed}});
    }
    stages.push_back({{"name", s.name}, {"runs", runs}, {"recommended", s.recommended}});
  }
  return nlohmann::json{{"profile", {{"samples", r.samples}, {"stages", stages}, {"toml", r.toml}}}}
      .dump();
}

}  // namespace brigade::launch
