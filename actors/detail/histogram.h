#pragma once

#include <array>
#include <cstdint>

namespace brigade::actors::detail {

/// Log-linear histogram of durations in nanoseconds: 8 buckets per power of two, so
/// a quantile is reported within ±6% of the true value, in O(1) memory whatever the
/// number of samples (unlike keeping every sample). Not thread-safe: the owner
/// serializes access (StageCounters holds it under its mutex).
class DurationHistogram {
 public:
  void record(std::uint64_t ns);
  std::uint64_t count() const { return count_; }
  double mean_ns() const { return count_ ? static_cast<double>(sum_) / count_ : 0.0; }
  double quantile_ns(double q) const;  // q in [0, 1]; 0 when empty

 private:
  static constexpr int kSubBits = 3;
  static constexpr int kBuckets = 64 << kSubBits;
  static int bucket_of(std::uint64_t ns);
  static double bucket_mid(int bucket);

  std::array<std::uint64_t, kBuckets> buckets_{};
  std::uint64_t count_ = 0;
  std::uint64_t sum_ = 0;
};

}  // namespace brigade::actors::detail
