#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "actors/clock.h"
#include "actors/detail/histogram.h"
#include "actors/hooks.h"
#include "actors/stats.h"

namespace brigade::actors::detail {

/// The live counters behind one StageStats.
///
/// Written by the stage's coordinator (one actor, so one writer at a time), read by
/// any thread through `snapshot`; a mutex guards both (uncontended on the hot path:
/// the coordinator takes it at most once per message, not per item), except the
/// output count, an atomic that only the writer stores. Times are read from `clock`,
/// which must outlive the counters.
class StageCounters {
 public:
  StageCounters(std::string name, std::string kind, int concurrency, int capacity,
                const Clock& clock);

  /// One finished task. `ns` is its run time, `retries` the extra attempts, `failures`
  /// the failures it counts for (1 if it threw, else the samples it reported failed).
  void record_task(std::uint64_t ns, TaskOutcome outcome, int retries, std::uint64_t failures);
  /// A batch of tasks under one lock: each task's time in `ns`, the batch's totals.
  void record_tasks(const std::vector<std::uint64_t>& ns, std::uint64_t filtered,
                    std::uint64_t retries, std::uint64_t failures);
  void record_filtered(std::uint64_t n);  // items dropped without a task (aggregate tail)
  void record_outputs(std::uint64_t n);
  /// Integrates the previous state up to `now`, then remembers the new one; nothing
  /// to do (not even a clock reading) when the state is unchanged, since integrating it
  /// later gives the same sums.
  void advance(int held, bool starved, bool backpressured);

  std::uint64_t tasks() const;
  std::uint64_t failures() const;
  StageStats snapshot() const;

 private:
  mutable std::mutex mutex_;
  StageStats stats_;  // name, kind, counters; times filled in by snapshot()
  DurationHistogram task_ns_;
  const Clock& clock_;
  Clock::time_point start_ = clock_.now();
  Clock::time_point last_ = start_;
  int held_ = 0;
  bool starved_ = false;
  bool backpressured_ = false;
  std::atomic<std::uint64_t> outputs_{0};  // stats_.outputs, stored by the writer only
  double held_integral_ = 0;               // item-seconds
  double starved_s_ = 0;
  double backpressured_s_ = 0;
};

}  // namespace brigade::actors::detail
