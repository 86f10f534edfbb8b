#pragma once

// The time the remote layer goes by (issue 20): std::chrono::steady_clock in
// production, a ManualClock that a test advances by hand. The pool's and the worker's
// actors read it on their own ticks (every 100–200 ms of real time), so with a manual
// clock nothing expires until the test moves the time past it.
//
// THREADING. Both clocks may be read from any thread; ManualClock may be advanced from
// any thread.

#include <atomic>
#include <chrono>
#include <memory>

#include "transport/remote/remote.h"

namespace brigade::transport::detail {

using TimePoint = std::chrono::steady_clock::time_point;

class SteadyClock final : public RemoteClock {
 public:
  TimePoint now() const override { return std::chrono::steady_clock::now(); }
};

/// `clock`, or the steady clock when it is null (the options' default).
inline std::shared_ptr<const RemoteClock> clock_or_steady(
    std::shared_ptr<const RemoteClock> clock) {
  if (clock) return clock;
  static const auto steady = std::make_shared<const SteadyClock>();
  return steady;
}

/// Starts at an arbitrary fixed point and moves only when advanced.
class ManualClock final : public RemoteClock {
 public:
  TimePoint now() const override { return TimePoint(std::chrono::nanoseconds(ns_.load())); }
  void advance(std::chrono::nanoseconds by) { ns_ += by.count(); }

 private:
  std::atomic<std::int64_t> ns_{std::int64_t{1'000'000'000'000}};  // 1000 s past the epoch
};

}  // namespace brigade::transport::detail
