#include "launch/run_statistics.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include "launch/stats_output.h"

namespace brigade::launch {
namespace {

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

}  // namespace

RunStatistics::RunStatistics(const RunCommand& config) {
  if (config.stats_out.empty() && config.metrics_port == 0) return;
  if (!config.stats_out.empty()) {
    out_.open(config.stats_out, std::ios::trunc);
    if (!out_) {
      throw ConfigError(fmt::format("stats_out {}: cannot create the file", config.stats_out),
                        "stats_out");
    }
  }
  const auto rank = static_cast<std::uint32_t>(config.rank.value_or(0));
  if (config.world_size.value_or(1) == 1) analyzer_.emplace(1);
  reporter_.emplace([this] { return sample(); }, [this](const RankReport& r) { deliver(r); },
                    StatsReporterOptions{.interval_s = config.stats_interval,
                                         .rank = rank,
                                         .host = host_name(),
                                         .clock = actors::Clock::steady()});
  if (config.metrics_port > 0) {
    server_.emplace(config.metrics_address, static_cast<std::uint16_t>(config.metrics_port),
                    [this] {
                      std::lock_guard lock(metrics_mutex_);
                      return metrics_;
                    });
    spdlog::info("brigade: metrics at http://{}:{}/metrics", config.metrics_address,
                 server_->port());
  }
  reporter_->start();
}

RunStatistics::~RunStatistics() { stop(); }

void RunStatistics::on_job(std::shared_ptr<const Job> job) {
  std::lock_guard lock(mutex_);
  job_ = std::move(job);
}

void RunStatistics::on_batch(const JobBatch& batch) {
  samples_.fetch_add(batch.ids.size(), std::memory_order_relaxed);
  batches_.fetch_add(1, std::memory_order_relaxed);
  if (!batch.ids.empty()) last_id_.store(batch.ids.back(), std::memory_order_relaxed);
}

RankSample RunStatistics::sample() {
  RankSample s{
      .samples = samples_.load(), .batches = batches_.load(), .last_sample_id = last_id_.load()};
  std::lock_guard lock(mutex_);
  if (job_) s.stats = job_->stats();
  return s;
}

void RunStatistics::deliver(const RankReport& report) {
  std::vector<ClusterEvent> events;
  if (analyzer_) {
    auto own = report;
    own.rank = 0;  // the analyzer's world is this process
    analyzer_->add(own);
    events = analyzer_->close_interval();
    for (const auto& e : events) spdlog::warn("brigade: {}", event_log_line(e));
  }
  const ClusterFigures* figures = analyzer_ ? &analyzer_->figures() : nullptr;
  if (out_.is_open()) {
    out_ << stats_json_line(report, figures, events) << '\n';
    out_.flush();
  }
  if (server_ || !out_.is_open()) {
    auto text = prometheus_text(report);
    if (figures) text += prometheus_text(*figures);
    std::lock_guard lock(metrics_mutex_);
    metrics_ = std::move(text);
  }
}

void RunStatistics::stop() {
  if (reporter_) reporter_->stop();
  server_.reset();
  std::lock_guard lock(mutex_);
  job_.reset();
}

}  // namespace brigade::launch
