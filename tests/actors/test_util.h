#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <thread>
#include <utility>
#include <vector>

namespace brigade::actors::testing {

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

inline void sleep_ms(double ms) {
  std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
}

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace brigade::actors::testing
