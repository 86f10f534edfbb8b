#include "actors/detail/histogram.h"

#include <bit>
#include <cmath>

namespace brigade::actors::detail {

int DurationHistogram::bucket_of(std::uint64_t ns) {
  if (ns < (1u << kSubBits)) return static_cast<int>(ns);
  const int exp = std::bit_width(ns) - 1;  // ns in [2^exp, 2^(exp+1))
  const int sub = static_cast<int>((ns >> (exp - kSubBits)) & ((1u << kSubBits) - 1));
  return ((exp - kSubBits + 1) << kSubBits) + sub;
}

double DurationHistogram::bucket_mid(int bucket) {
  if (bucket < (1 << kSubBits)) return bucket;
  const int exp = (bucket >> kSubBits) + kSubBits - 1;
  const int sub = bucket & ((1 << kSubBits) - 1);
  const double width = std::ldexp(1.0, exp - kSubBits);
  return std::ldexp(1.0, exp) + (sub + 0.5) * width;
}

void DurationHistogram::record(std::uint64_t ns) {
  ++buckets_[bucket_of(ns)];
  ++count_;
  sum_ += ns;
}

double DurationHistogram::quantile_ns(double q) const {
  if (count_ == 0) return 0.0;
  const auto rank = static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(count_)));
  std::uint64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += buckets_[b];
    if (seen >= rank && buckets_[b] > 0) return bucket_mid(b);
  }
  return bucket_mid(kBuckets - 1);
}

}  // namespace brigade::actors::detail
