// The `brigade` command line. `brigade run` with no arguments generates (once) the
// demo dataset and runs the image pipeline on it; see `brigade run --help`.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <fstream>
#include <thread>

#include "actors/errors.h"
#include "launch/demo_dataset.h"
#include "launch/image_job.h"
#include "launch/process.h"
#include "media/errors.h"

namespace {

using namespace brigade;

actors::FailureBudget parse_budget(const std::string& text) {
  if (text.empty() || text == "unlimited") return {};
  if (text.back() == '%') {
    return actors::FailureBudget::rate(std::stod(text.substr(0, text.size() - 1)) / 100.0, 100);
  }
  return actors::FailureBudget(std::stoll(text));
}

std::string summary_json(const launch::JobSummary& s) {
  std::string stages;
  for (const auto& st : s.stats.stages) {
    stages += fmt::format(
        R"({}{{"name":"{}","tasks":{},"failures":{},"p50_ms":{:.3f},"p99_ms":{:.3f},"occupancy":{:.3f}}})",
        stages.empty() ? "" : ",", st.name, st.tasks, st.failures, st.p50_ms, st.p99_ms,
        st.occupancy);
  }
  return fmt::format(
      R"({{"samples":{},"batches":{},"failed":{},"filtered":{},"seconds":{:.3f},"samples_per_s":{:.1f},"time_to_first_batch_s":{:.3f},"cpu_seconds":{:.3f},"peak_rss_mb":{:.1f},"stages":[{}]}})",
      s.samples, s.batches, s.failed, s.filtered, s.seconds, s.samples_per_s,
      s.time_to_first_batch_s, launch::cpu_seconds(), launch::peak_rss_mb(), stages);
}

int run(const std::string& data, launch::JobOptions job, const std::string& max_failures,
        const std::string& ids_out, bool json) {
  try {
    job.max_failures = parse_budget(max_failures);
  } catch (const std::exception&) {
    spdlog::error("--max-failures: expected a count N or a rate N%, got '{}'", max_failures);
    return 2;
  }
  std::string dir = data;
  if (dir.empty()) dir = launch::ensure_demo_dataset(launch::default_demo_dir()).string() + "/images";
  try {
    job.files = launch::list_image_files(dir);
  } catch (const std::exception& e) {
    spdlog::error("--data {}: {}", dir, e.what());
    return 2;
  }
  if (job.files.empty()) {
    spdlog::error("--data {}: no image files (.jpg .jpeg .png .webp .bmp) found", dir);
    return 2;
  }
  std::ofstream ids;
  if (!ids_out.empty()) {
    ids.open(ids_out, std::ios::trunc);
    if (!ids) {
      spdlog::error("--ids-out {}: cannot create the file", ids_out);
      return 2;
    }
  }
  spdlog::info("brigade: {} images from {}, batch {}", job.files.size(), dir, job.batch_size);
  launch::JobSummary summary;
  try {
    summary = launch::run_image_job(job, [&](const std::vector<std::uint64_t>& batch_ids) {
      if (ids) {
        for (auto id : batch_ids) ids << id << '\n';
      }
    });
  } catch (const actors::PipelineFailure& e) {
    ids.flush();
    spdlog::error("brigade: {}", e.what());
    return 1;
  }
  ids.flush();
  spdlog::info("brigade: finished\n{}", actors::format_stats_table(summary.stats));
  spdlog::info("brigade: {} samples in {} batches, {:.0f} samples/s after the first batch "
               "(first batch at {:.3f} s), {} failed", summary.samples, summary.batches,
               summary.samples_per_s, summary.time_to_first_batch_s, summary.failed);
  if (json) std::printf("%s\n", summary_json(summary).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  launch::process_seconds();  // anchor the process clock
  spdlog::set_default_logger(spdlog::stderr_color_mt("brigade"));
  spdlog::set_pattern("%H:%M:%S.%e %^%l%$ %v");

  CLI::App app{"brigade: a data loader for machine-learning training"};
  app.require_subcommand(1);
  auto* run_cmd = app.add_subcommand("run", "run the image pipeline (default: the demo dataset)");
  std::string data, max_failures = "unlimited", ids_out, order = "input";
  bool json = false;
  launch::JobOptions job;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  job.threads = cores;
  run_cmd->add_option("--data", data, "folder of images, searched recursively, sorted by path "
                                      "(default: the demo dataset, generated once)");
  run_cmd->add_option("--batch-size", job.batch_size, "samples per batch")->default_val(32)
      ->check(CLI::PositiveNumber);
  run_cmd->add_option("--threads", job.threads, "cpu threads (default: number of cores)")
      ->check(CLI::PositiveNumber);
  run_cmd->add_option("--read-concurrency", job.read_concurrency, "io threads reading files")
      ->default_val(8)->check(CLI::PositiveNumber);
  run_cmd->add_option("--decode-concurrency", job.decode_concurrency,
                      "decode tasks at once (default: --threads)");
  run_cmd->add_option("--order", order, "output order: input or completion")
      ->default_val("input")->check(CLI::IsMember({"input", "completion"}));
  run_cmd->add_option("--max-failures", max_failures, "failures tolerated: a count N or a rate N%");
  run_cmd->add_option("--stop-after-batches", job.stop_after_batches, "stop after N batches");
  run_cmd->add_option("--ids-out", ids_out, "write delivered sample ids, one per line");
  run_cmd->add_flag("--json", json, "print a JSON summary as the last line on stdout");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  job.order = order == "completion" ? actors::Order::completion : actors::Order::input;
  try {
    return run(data, job, max_failures, ids_out, json);
  } catch (const std::exception& e) {
    spdlog::error("brigade: {}", e.what());
    return 1;
  }
}
