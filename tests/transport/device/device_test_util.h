#pragma once
// Helpers shared by the device room's tests.

#include <chrono>
#include <future>

namespace brigade::transport::test {

/// True if `f` is still not ready after a grace period in which it could have become so
/// (a check that something waits; it can only pass wrongly on a very slow machine, never
/// fail wrongly).
template <class F>
bool still_waiting(const std::future<F>& f) {
  return f.wait_for(std::chrono::milliseconds(50)) == std::future_status::timeout;
}

}  // namespace brigade::transport::test
