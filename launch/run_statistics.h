#pragma once

// `brigade run`'s statistics (issue 24): the reporter of its job (launch/loader/
// stats_reporter.h) every `stats_interval` seconds, and what each report goes to —
// the JSON lines file (stats_out), the Prometheus endpoint (metrics_port,
// metrics_address; launch/metrics_server.h) and, for a single process (world size 1),
// the analyzer (launch/loader/cluster_stats.h) over its own reports: its figures in
// both outputs and one log line (warning) per event it raises (stats_output.h
// event_log_line). Nothing runs when neither output is asked for.
//
// THREADING. Built and stopped by the thread that runs the job; on_batch() is called
// by it; reports are written on the reporter's thread, the endpoint answers on its own.

#include <atomic>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "launch/config.h"
#include "launch/loader/cluster_stats.h"
#include "launch/loader/job.h"
#include "launch/loader/stats_reporter.h"
#include "launch/metrics_server.h"

namespace brigade::launch {

class RunStatistics {
 public:
  /// Opens stats_out (ConfigError if it cannot) and the endpoint (std::system_error).
  explicit RunStatistics(const RunCommand& config);
  ~RunStatistics();  // stop()

  bool active() const { return reporter_.has_value(); }
  void on_job(std::shared_ptr<const Job> job);
  void on_batch(const JobBatch& batch);
  /// Reports the interval in progress and closes the endpoint. Idempotent.
  void stop();
  /// The endpoint's port (0 without one).
  std::uint16_t metrics_port() const { return server_ ? server_->port() : 0; }

 private:
  RankSample sample();
  void deliver(const RankReport& report);

  std::mutex mutex_;  // job_
  std::shared_ptr<const Job> job_;
  std::atomic<std::uint64_t> samples_{0}, batches_{0}, last_id_{0};
  std::ofstream out_;
  std::optional<ClusterAnalyzer> analyzer_;  // a single process
  std::mutex metrics_mutex_;
  std::string metrics_;
  std::optional<StatsReporter> reporter_;
  std::optional<MetricsServer> server_;
};

}  // namespace brigade::launch
