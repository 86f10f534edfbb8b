#pragma once

// The remote layer's reading of the one clock (actors/clock.h): the options' clock, or
// std::chrono::steady_clock when they leave it null. The pool's and the worker's actors
// read it on their own ticks (every 100-200 ms of real time), so with an
// actors::ManualClock nothing expires until the test moves the time past it.

#include <chrono>
#include <memory>

#include "actors/clock.h"

namespace brigade::transport::detail {

using TimePoint = std::chrono::steady_clock::time_point;

/// `clock`, or the steady clock when it is null (the options' default).
inline std::shared_ptr<const actors::Clock> clock_or_steady(
    std::shared_ptr<const actors::Clock> clock) {
  return clock ? clock : actors::Clock::steady();
}

}  // namespace brigade::transport::detail
