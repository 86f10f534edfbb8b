#pragma once

// `brigade run`'s statistics (issue 24): the reporter of its job (launch/loader/
// stats_reporter.h) every `stats_interval` seconds, and what each report goes to —
// the JSON lines file (stats_out), the Prometheus endpoint (metrics_port,
// metrics_address; launch/metrics_server.h) and, for a single process (world size 1),
// the analyzer (launch/loader/cluster_stats.h) over its own reports: its figures in
// both outputs and one log line (warning) per event it raises (stats_output.h
// event_log_line). Nothing runs when neither output is asked for.
//
// THE CLUSTER (`stats` = HOST:PORT or "auto", any world size: at size 1 rank 0 alone
// reports to itself and collects its workers' reports). Every rank sends each
// report over the statistics link (transport/remote/report_link.h: authenticated with
// the job token, token_file else BRIGADE_TOKEN, so a job that decodes locally reports
// too) to a collector on rank 0, which listens at that address ("auto": any address at
// MASTER_PORT + kStatsPortOffset; other ranks connect to MASTER_ADDR there). Rank 0
// runs the analyzer over the world: each report that arrives is checked (its codec, its
// rank against the link's authenticated rank), added, and written as its own JSON line.
// Every reporter (ranks and workers) ends its intervals on the wall clock's grid of
// multiples of the interval (stats_reporter.h wall_clock_grid; cluster_stats.h THE
// GRID), so each rank's report of grid interval n covers the same time as rank 0's.
// Rank 0 closes interval n (figures, events, its own report's JSON line with the
// "cluster" key, the metrics, the rebalancing) once its own report of n is in and
// either every rank not yet silent has reported n (ClusterAnalyzer::complete: most
// closes, as the last report arrives, on the collector's thread) or the GRACE passed
// since n's end: min(interval / 2, 2 s), watched by a thread that wakes every
// min(grace / 5, 0.2 s). A rank whose report arrives later than that counts in the next
// interval (cluster_stats.h: one interval without a report keeps its slow count). With
// `rebalance` (launch/loader/job.h REBALANCING), at each close rank 0 hands its job each
// rank's cumulative figures from its latest report before the close. A
// rank's first two reports are never counted as slow (ClusterOptions::warmup: ranks
// start at different times and a first report covers part of an interval). Ranks are
// expected to share one --stats-interval (another's reports are on another grid: each
// close would wait the grace for it). Worker nodes started with
// `brigade worker --stats` send their own reports on the same link (as kWorkerSender):
// rank 0 adds them (ClusterAnalyzer::add_worker), and its cluster figures — JSON line
// and metrics — show each worker. A rank with remote workers puts in its reports each
// worker's tasks and the time its tasks waited on it (its pool's figures), so that a
// straggler is named with the worker it waits on. Refusals by the link, the codec and
// the analyzer are all counted in refused_reports. Other ranks write their own reports
// to their stats_out and serve their own metrics. Sending never blocks: a rank that
// cannot reach rank 0 drops its oldest reports (report_link.h); stop() gives the last
// one at most 1 s to leave.
//
// THREADING. Built and stopped by the thread that runs the job; on_batch() is called
// by it; reports are written on the reporter's thread, the endpoint answers on its own.

#include <atomic>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "launch/config.h"
#include "launch/loader/cluster_stats.h"
#include "launch/loader/job.h"
#include "launch/loader/stats_reporter.h"
#include "launch/metrics_server.h"
#include "transport/remote/report_link.h"

namespace brigade::launch {

/// This machine's host name, as reports name it ("unknown" if it cannot be read).
std::string host_name();

class RunStatistics {
 public:
  /// Opens stats_out (ConfigError if it cannot, or for `stats` without a job token),
  /// the endpoint (std::system_error) and the collector (transport::RemoteError).
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
  void collected(std::uint32_t rank, std::span<const char> bytes);
  // Closes the interval of own_ if it is due (THE CLUSTER), or whatever `force`;
  // analyzer_mutex_ held.
  void close_locked(bool force);

  std::mutex mutex_;  // job_
  std::shared_ptr<const Job> job_;
  std::atomic<std::uint64_t> samples_{0}, batches_{0}, last_id_{0};
  std::ofstream out_;
  std::optional<ClusterAnalyzer> analyzer_;  // a single process
  std::mutex metrics_mutex_;
  std::string metrics_;
  std::optional<StatsReporter> reporter_;
  std::optional<MetricsServer> server_;
  // THE CLUSTER: rank 0's collector, other ranks' sender (never both).
  std::mutex analyzer_mutex_;  // analyzer_, out_, link_refused_, own_, progress_, the closes
  std::uint64_t link_refused_ = 0;
  std::optional<RankReport> own_;  // rank 0's report of the interval not yet closed
  // Rank 0 collecting: each rank's latest cumulative figures since the last close (none
  // where no report arrived), what REBALANCING weighs.
  std::vector<std::optional<RankWeights::Progress>> progress_;
  std::optional<ReportGrid> grid_;
  double interval_s_ = 10, grace_s_ = 2;
  PeriodicPoll closer_;  // rank 0: closes an interval at its end + the grace
  std::unique_ptr<transport::ReportCollector> collector_;
  std::unique_ptr<transport::ReportSender> sender_;
};

}  // namespace brigade::launch
