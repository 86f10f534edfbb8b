#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <thread>
#include <utility>
#include <vector>

#include "actors/clock.h"

namespace brigade::actors::testing {

using actors::ManualClock;  // actors/clock.h

/// A gate that stage functions wait on until the test opens it: how a test holds a
/// task "running" for as long as it needs, with no sleep. Opened once, stays open.
class Gate {
 public:
  void open() {
    open_ = true;
    open_.notify_all();
  }
  void wait() const { open_.wait(false); }

 private:
  std::atomic<bool> open_{false};
};

/// Counts events; another thread waits until the count reaches n. No timeout: a
/// count that never comes is a hang, which ctest's --timeout turns into a failure.
class EventCount {
 public:
  void add() {
    ++count_;
    count_.notify_all();
  }
  int value() const { return count_.load(); }
  void wait_for(int n) const {
    for (int c = count_.load(); c < n; c = count_.load()) count_.wait(c);
  }

 private:
  std::atomic<int> count_{0};
};

/// Re-checks `done` (yielding in between) until it holds: for engine states that
/// only a statistics snapshot shows. No timeout, as for EventCount.
template <class F>
void until(F&& done) {
  while (!done()) std::this_thread::yield();
}

/// An item that counts its live payloads (a moved-from shell holds none): the
/// memory-bound tests measure the pipeline with it, not with engine bookkeeping.
class Counted {
 public:
  static inline std::atomic<std::int64_t> live{0};
  static inline std::atomic<std::int64_t> max_live{0};
  static void reset() {
    live = 0;
    max_live = 0;
  }

  explicit Counted(std::int64_t v) : value_(v), owns_(true) { acquire(); }
  Counted(Counted&& o) noexcept : value_(o.value_), owns_(std::exchange(o.owns_, false)) {}
  Counted& operator=(Counted&& o) noexcept {
    release();
    value_ = o.value_;
    owns_ = std::exchange(o.owns_, false);
    return *this;
  }
  Counted(const Counted&) = delete;
  ~Counted() { release(); }
  std::int64_t value() const { return value_; }

 private:
  static void acquire() {
    const auto now = live.fetch_add(1) + 1;
    auto max = max_live.load();
    while (now > max && !max_live.compare_exchange_weak(max, now)) {
    }
  }
  void release() {
    if (owns_) live.fetch_sub(1);
    owns_ = false;
  }
  std::int64_t value_;
  bool owns_;
};

/// 0, 1, …, n − 1: the usual test source.
inline std::vector<int> iota(int n) {
  std::vector<int> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

}  // namespace brigade::actors::testing
