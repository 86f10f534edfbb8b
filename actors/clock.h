#pragma once

// The one injectable time source of Brigade: what a pipeline's statistics read
// (actors::BuildOptions::clock) and what the remote layer's deadlines, heartbeats,
// reconnects and parole go by (transport::PoolOptions / WorkerOptions::clock).
//
// Contract: `now()` never goes back, is thread-safe (every worker calls it around each
// task, every stage coordinator at each of its messages, the remote actors on their
// ticks) and is cheap. The default everywhere is std::chrono::steady_clock
// (`Clock::steady()`); a test (or a simulation) passes a ManualClock it advances by hand,
// so that a stage's task time or a worker's heartbeat gap is exactly what it made it.
//
// What is NOT read from it: a pipeline's next() timeout, a retry's backoff and the
// `stats_interval` callback go by real time (they wait; a clock that never moves would
// hang them).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

namespace brigade::actors {

class Clock {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  virtual ~Clock() = default;
  virtual time_point now() const = 0;

  /// std::chrono::steady_clock, shared.
  static std::shared_ptr<const Clock> steady();
};

/// A clock that moves only when advanced (from any thread). Starts at an arbitrary fixed
/// point, 1000 s past the steady clock's epoch.
class ManualClock final : public Clock {
 public:
  time_point now() const override { return time_point(std::chrono::nanoseconds(ns_.load())); }
  void advance(std::chrono::nanoseconds by) { ns_.fetch_add(by.count()); }

 private:
  std::atomic<std::int64_t> ns_{std::int64_t{1'000'000'000'000}};
};

}  // namespace brigade::actors
