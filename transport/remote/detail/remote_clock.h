#pragma once

// The remote layer's reading of the one clock (actors/clock.h): the options' clock, or
// std::chrono::steady_clock when they leave it null. The pool's and the worker's actors
// read it on their own ticks (every 100-200 ms of real time), so with an
// actors::ManualClock nothing expires until the test moves the time past it.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>

#include "actors/clock.h"

namespace brigade::transport::detail {

using TimePoint = std::chrono::steady_clock::time_point;

/// `clock`, or the steady clock when it is null (the options' default).
inline std::shared_ptr<const actors::Clock> clock_or_steady(
    std::shared_ptr<const actors::Clock> clock) {
  return clock ? clock : actors::Clock::steady();
}

/// The first retry of a connection that failed comes this soon; each further failure in
/// a row doubles the wait.
inline constexpr std::chrono::milliseconds kFirstRetry{50};

/// When to try again after `failures` (>= 1) failed attempts in a row, the last at
/// `now`: kFirstRetry after the first, doubling with each more, never more than `cap`
/// after `now`. Pure: the caller reads `now` from its clock.
inline TimePoint next_retry(TimePoint now, std::uint32_t failures, std::chrono::milliseconds cap) {
  auto wait = kFirstRetry;
  for (std::uint32_t i = 1; i < failures && wait < cap; ++i) wait *= 2;
  return now + std::min(wait, cap);
}

}  // namespace brigade::transport::detail
