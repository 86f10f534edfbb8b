#pragma once

// StatsReporter: one rank's statistics report per interval (launch/loader/cluster_stats.h
// RankReport), built from the engine's statistics of the job (actors/stats.h).
//
//   StatsReporter reporter(
//       [&] { return RankSample{job.stats(), samples, last_id}; },  // any thread
//       [&](const RankReport& r) { write(r); },                      // the reporter's thread
//       {.interval_s = 10, .rank = 0, .host = "node1"});
//   reporter.start();  …  reporter.stop();   // stop() reports the interval in progress
//
// WHAT A REPORT SAYS (against the previous sample):
//   - samples, batches: delivered to the consumer in the interval (the consumer's
//     counts, exact across epochs);
//   - exposed_wait_s: the growth of the sink's consumer_wait_s, the time the consumer
//     spent blocked in next() with no batch waiting (actors/detail/handoff_queue.cc
//     times only that wait, not the work a prefetch hides); readiness: the interval's
//     ready ÷ requests (1 where the consumer asked for nothing);
//   - since_last_request_s: grows by the interval while the sink saw no request;
//     pipeline_full: the last stage was backpressured (its finished items waiting for
//     sink credit) for at least half the interval;
//   - stages: the interval's deltas (RankReport); stage_totals: the epoch's figures;
//   - workers: per remote worker, the interval's tasks and waited_s (deltas of the
//     pool's totals; a worker with no task in the interval is left out).
// A new epoch restarts the engine's figures: where a sample's totals are below the
// previous one's, the previous totals count as zero (the end of the last epoch is lost
// to that interval, nothing is counted twice) and the report says so (epoch_restarted).
//
// CLOCK. Intervals are measured on `clock` (actors/clock.h): poll() reports when at
// least interval_s passed on it since the last report. start() runs a thread that calls
// poll() every min(interval_s / 4, 0.5 s) of real time; a test drives poll() itself
// with a ManualClock, step by step.
// THE GRID (options.grid; launch/loader/cluster_stats.h THE GRID): poll() reports once
// the clock passed the end of the grid interval in progress at the last report (or the
// construction), and the report says which grid interval it ends (interval_index: the
// last one ended; interval_s is the time since the last report, so the first covers
// the part of its interval since the construction); start()'s thread wakes at each
// grid boundary (1 ms past it) instead of polling. Every process on one grid reports
// the same spans of time, whatever its start.
//
// NEVER BLOCKS THE PIPELINE. `sample` is called on the reporter's thread; the engine's
// stats() takes its run's lock only to copy a pointer and reads counters (it never waits
// for a stop, and stop() never waits for it). `deliver` runs on the reporter's thread
// too: a slow output delays the next report, not a batch.
//
// THREADING. poll(), flush() and stop() may be called from any thread (one at a time
// runs; the callbacks are never called concurrently).

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "actors/clock.h"
#include "actors/stats.h"
#include "launch/loader/cluster_stats.h"
#include "transport/remote/remote.h"

namespace brigade::launch {

/// What the reporter samples: the engine's statistics and the consumer's totals.
struct RankSample {
  actors::PipelineStats stats{};
  std::uint64_t samples = 0;  // delivered to the consumer since the job started
  std::uint64_t batches = 0;  // … in batches
  std::uint64_t last_sample_id = 0;
  // Remote workers as the rank's pool sees them, totals since the job started (tasks,
  // waited_s: Σ latency; report_between takes the interval's deltas, by name).
  std::vector<WorkerReport> workers{};
};

/// A thread that calls `poll` every `period` of real time until stop() (idempotent;
/// the destructor stops it): the reporters' clock.
class PeriodicPoll {
 public:
  using Wait = std::function<std::chrono::duration<double>()>;
  PeriodicPoll() = default;
  ~PeriodicPoll() { stop(); }
  PeriodicPoll(const PeriodicPoll&) = delete;
  PeriodicPoll& operator=(const PeriodicPoll&) = delete;
  /// Starts the thread (once; not after stop()).
  void start(std::chrono::duration<double> period, std::function<void()> poll);
  /// … waiting, before each call of `poll`, what `wait` says (called on the thread).
  void start(Wait wait, std::function<void()> poll);
  /// Ends it; returns once `poll` no longer runs. Returns false if already stopped.
  bool stop();

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::optional<std::thread> thread_;
};

/// A grid of intervals on a reporter's clock (THE GRID): interval `index` starts at
/// `origin`, interval index + k at origin + k × the interval.
struct ReportGrid {
  actors::Clock::time_point origin{};
  std::uint64_t index = 0;
};

/// The grid of multiples of `interval_s` since the Unix epoch on the wall clock
/// (std::chrono::system_clock), placed on `clock` as it reads now: the same grid in
/// every process whose wall clock agrees (one host; hosts synchronized by NTP, to its
/// error). Index 0 is never an interval of it (the reports' "none").
ReportGrid wall_clock_grid(double interval_s, const actors::Clock& clock);

struct StatsReporterOptions {
  double interval_s = 10;  // ≥ 0.2 (launch/config.h checks the key)
  std::uint32_t rank = 0;
  std::string host{};
  std::shared_ptr<const actors::Clock> clock = actors::Clock::steady();
  std::optional<ReportGrid> grid{};  // THE GRID; none: intervals from the construction
};

/// The report of the interval between `before` and `after` (RankReport's `rank`, `host`,
/// `sequence` and `at_s` left to the caller; see WHAT A REPORT SAYS).
RankReport report_between(const RankSample& before, const RankSample& after, double interval_s,
                          double since_last_request_s);

class StatsReporter {
 public:
  using Sample = std::function<RankSample()>;
  using Deliver = std::function<void(const RankReport&)>;

  StatsReporter(Sample sample, Deliver deliver, StatsReporterOptions options);
  ~StatsReporter();  // stop()
  StatsReporter(const StatsReporter&) = delete;
  StatsReporter& operator=(const StatsReporter&) = delete;

  /// Reports if at least interval_s passed on the clock since the last report (or the
  /// construction). Returns whether it did.
  bool poll();
  /// Reports the interval in progress now, if any time passed on the clock.
  bool flush();
  /// Starts the thread that polls (CLOCK).
  void start();
  /// Ends the thread, then flush(). Idempotent.
  void stop();

 private:
  bool report_locked(bool force);
  std::chrono::duration<double> next_wait();  // start()'s thread

  Sample sample_;
  Deliver deliver_;
  StatsReporterOptions options_;
  std::mutex mutex_;  // held while reporting
  actors::Clock::time_point origin_, last_at_;
  std::uint64_t in_progress_ = 0;  // THE GRID: the interval in progress at the last report
  RankSample last_{};
  std::uint64_t sequence_ = 0;
  double since_last_request_s_ = 0;
  std::uint64_t first_samples_ = 0;
  double first_wait_s_ = 0, wait_total_s_ = 0;

  PeriodicPoll thread_;
};

/// A worker node's statistics report per interval (`brigade worker --stats`,
/// cluster_stats.h WorkerNodeReport): `take` hands what the worker served since its
/// last call (transport::WorkerNode::take_served), `cpu_seconds` the process's CPU time
/// so far; name and host as the options say, incarnation random per reporter. CLOCK
/// and THREADING as StatsReporter's; `deliver` runs on the reporter's thread (a slow
/// output delays the next report, never a task).
struct WorkerReporterOptions {
  double interval_s = 10;  // ≥ 0.2
  std::string name{};      // HOST:PORT the worker serves at
  std::string host{};
  std::shared_ptr<const actors::Clock> clock = actors::Clock::steady();
  std::function<double()> cpu_seconds{};  // null: CPU reported as 0
  std::optional<ReportGrid> grid{};       // THE GRID, as StatsReporter's
};

class WorkerStatsReporter {
 public:
  using Take = std::function<transport::WorkerServed()>;
  using Deliver = std::function<void(const WorkerNodeReport&)>;

  WorkerStatsReporter(Take take, Deliver deliver, WorkerReporterOptions options);
  ~WorkerStatsReporter();  // stop()
  WorkerStatsReporter(const WorkerStatsReporter&) = delete;
  WorkerStatsReporter& operator=(const WorkerStatsReporter&) = delete;

  /// Reports if at least interval_s passed on the clock since the last report.
  bool poll();
  void start();
  /// Ends the thread, then reports the interval in progress. Idempotent.
  void stop();

 private:
  bool report_locked(bool force);
  std::chrono::duration<double> next_wait();

  Take take_;
  Deliver deliver_;
  WorkerReporterOptions options_;
  std::mutex mutex_;
  actors::Clock::time_point origin_, last_at_;
  std::uint64_t in_progress_ = 0;
  double last_cpu_s_ = 0;
  std::uint64_t incarnation_ = 0, sequence_ = 0;
  PeriodicPoll thread_;
};

}  // namespace brigade::launch
