#include "launch/run_statistics.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>

#include "launch/loader/stats_report.h"
#include "launch/stats_output.h"
#include "transport/remote/remote.h"

namespace brigade::launch {

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

namespace {

RankWeights::Progress progress_of(const RankReport& r) {
  return {double(r.samples_total), r.exposed_wait_total_s, r.at_s};
}

}  // namespace

RunStatistics::RunStatistics(const RunCommand& config) {
  const auto world = static_cast<std::uint32_t>(config.world_size.value_or(1));
  // `stats` at world size 1 works as at any size: rank 0 alone collects (its workers'
  // reports, launch/run_statistics.h THE CLUSTER).
  const bool cluster = !config.stats.empty();
  if (config.stats_out.empty() && config.metrics_port == 0 && !cluster) return;
  if (!config.stats_out.empty()) {
    out_.open(config.stats_out, std::ios::trunc);
    if (!out_) {
      throw ConfigError(fmt::format("stats_out {}: cannot create the file", config.stats_out),
                        "stats_out");
    }
  }
  const auto rank = static_cast<std::uint32_t>(config.rank.value_or(0));
  if (world == 1) analyzer_.emplace(1, ClusterOptions{.hang_after_s = config.hang_after});
  if (cluster) {
    const std::string token =
        !config.token.empty()
            ? config.token
            : read_job_token(config.token_file, [](const char* name) { return std::getenv(name); });
    const bool automatic = config.stats == "auto";
    transport::Endpoint at;
    if (automatic) {
      at = {config.master_addr.empty() ? "127.0.0.1" : config.master_addr,
            static_cast<std::uint16_t>(
                (config.master_port > 0 ? config.master_port : kDefaultMasterPort) +
                kStatsPortOffset)};
    } else {
      try {
        at = transport::parse_endpoint(config.stats, "stats");
      } catch (const transport::EndpointError& e) {
        throw ConfigError(e.what(), "stats");
      }
    }
    if (rank == 0) {
      progress_.resize(world);
      analyzer_.emplace(world, ClusterOptions{.consecutive = config.stats_consecutive,
                                              .hang_after_s = config.hang_after,
                                              .warmup = 2});
      collector_ = std::make_unique<transport::ReportCollector>(
          transport::Endpoint{automatic ? "0.0.0.0" : at.host, at.port},
          transport::ReportCollectorOptions{.token = token, .world_size = world},
          [this](std::uint32_t from, std::uint64_t, std::span<const char> bytes) {
            collected(from, bytes);
          });
      spdlog::info("brigade: statistics of {} rank(s) and their workers collected at {}", world,
                   at.to_string());
    } else {
      sender_ = std::make_unique<transport::ReportSender>(at, token, rank);
    }
  }
  interval_s_ = config.stats_interval;
  grace_s_ = std::min(interval_s_ / 2, 2.0);
  grid_ = wall_clock_grid(interval_s_, *actors::Clock::steady());
  reporter_.emplace([this] { return sample(); }, [this](const RankReport& r) { deliver(r); },
                    StatsReporterOptions{.interval_s = config.stats_interval,
                                         .rank = rank,
                                         .host = host_name(),
                                         .clock = actors::Clock::steady(),
                                         .grid = grid_});
  if (collector_) {
    closer_.start(std::chrono::duration<double>(std::min(grace_s_ / 5, 0.2)), [this] {
      std::lock_guard lock(analyzer_mutex_);
      close_locked(false);
    });
  }
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
  if (job_) {
    s.stats = job_->stats();
    if (const auto remote = job_->remote_summary()) {
      for (const auto& w : remote->pool.workers)
        s.workers.push_back({.name = w.name, .waited_s = w.latency_s, .tasks = w.tasks});
    }
  }
  return s;
}

void RunStatistics::collected(std::uint32_t rank, std::span<const char> bytes) {
  if (rank == transport::kWorkerSender) {
    std::optional<WorkerNodeReport> report;
    try {
      report = read_worker_report(bytes);
    } catch (const transport::RemoteError& e) {
      spdlog::debug("brigade: a worker's statistics refused: {}", e.what());
    }
    std::lock_guard lock(analyzer_mutex_);
    if (!report) {
      ++link_refused_;
      return;
    }
    analyzer_->add_worker(*report);
    return;  // worker nodes are not waited for (cluster_stats.h WORKER NODES)
  }
  std::optional<RankReport> report;
  try {
    report = read_stats_report(bytes);
  } catch (const transport::RemoteError& e) {
    spdlog::debug("brigade: statistics of rank {} refused: {}", rank, e.what());
  }
  std::lock_guard lock(analyzer_mutex_);
  if (!report || report->rank != rank) {
    ++link_refused_;  // malformed, or another rank's figures on this rank's link
    return;
  }
  if (analyzer_->add(*report)) {
    if (report->rank < progress_.size()) progress_[report->rank] = progress_of(*report);
    if (out_.is_open()) {
      out_ << stats_json_line(*report) << '\n';
      out_.flush();
    }
    close_locked(false);  // the last report of the interval closes it
  }
}

void RunStatistics::deliver(const RankReport& report) {
  if (sender_) sender_->send(write_stats_report(report));
  std::unique_lock lock(analyzer_mutex_);
  if (analyzer_) {
    close_locked(true);  // the previous interval, if its grace has not ended yet
    own_ = report;
    own_->rank = 0;  // a single process: the analyzer's world is this process; else rank 0
    analyzer_->add(*own_);
    if (!progress_.empty()) progress_[0] = progress_of(*own_);
    close_locked(false);
    return;
  }
  if (out_.is_open()) {
    out_ << stats_json_line(report) << '\n';
    out_.flush();
  }
  lock.unlock();
  if (server_) {
    auto text = prometheus_text(report);
    std::lock_guard metrics_lock(metrics_mutex_);
    metrics_ = std::move(text);
  }
}

void RunStatistics::close_locked(bool force) {
  if (!own_) return;
  const auto index = own_->interval_index;
  if (!force && !analyzer_->complete(index)) {
    const auto end = grid_->origin + std::chrono::nanoseconds(std::llround(
                                         double(index + 1 - grid_->index) * interval_s_ * 1e9));
    const auto grace = std::chrono::nanoseconds(std::llround(grace_s_ * 1e9));
    if (actors::Clock::steady()->now() < end + grace) return;
  }
  RankReport report = std::move(*own_);
  own_.reset();
  auto events = analyzer_->close_interval(index);
  for (const auto& e : events) spdlog::warn("brigade: {}", event_log_line(e));
  ClusterFigures figures = analyzer_->figures();
  figures.refused_reports += link_refused_;
  if (collector_) {
    const auto c = collector_->counts();
    figures.refused_reports += c.refused_handshakes + c.refused_frames;
  }
  if (out_.is_open()) {
    out_ << stats_json_line(report, &figures, events) << '\n';
    out_.flush();
  }
  if (!progress_.empty()) {  // rank 0 collecting: REBALANCING (launch/loader/job.h)
    auto progress = progress_;
    std::fill(progress_.begin(), progress_.end(), std::nullopt);
    std::lock_guard job_lock(mutex_);
    if (job_) job_->rebalance(progress);
  }
  if (server_) {
    auto text = prometheus_text(report) + prometheus_text(figures);
    std::lock_guard metrics_lock(metrics_mutex_);
    metrics_ = std::move(text);
  }
}

void RunStatistics::stop() {
  closer_.stop();
  if (reporter_) reporter_->stop();
  {
    std::lock_guard lock(analyzer_mutex_);
    if (analyzer_) close_locked(true);  // the last interval, whoever reported it
  }
  if (sender_) {
    sender_->drain(std::chrono::seconds(1));  // the last report, if rank 0 is there
    sender_.reset();
  }
  collector_.reset();
  server_.reset();
  std::lock_guard lock(mutex_);
  job_.reset();
}

}  // namespace brigade::launch
