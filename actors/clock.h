#pragma once

#include <chrono>
#include <memory>

namespace brigade::actors {

/// Where a pipeline's statistics read the time (BuildOptions::clock): each task's run
/// time, the stages' starved, backpressured and occupancy integrals, elapsed times and
/// the consumer's wait in next(). Nothing else reads it: next()'s timeout, a retry's
/// backoff and the `stats_interval` callback go by real time.
///
/// Contract: `now()` never goes back, is thread-safe (every worker calls it around each
/// task, every stage coordinator at each of its messages) and is cheap. The default is
/// std::chrono::steady_clock (`steady()`); tests pass a clock they advance by hand, so
/// that a stage's task time or starved time is exactly what they made it.
class StatsClock {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  virtual ~StatsClock() = default;
  virtual time_point now() const = 0;

  /// std::chrono::steady_clock, shared.
  static std::shared_ptr<const StatsClock> steady();
};

}  // namespace brigade::actors
