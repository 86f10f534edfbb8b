#include "actors/detail/permutation.h"

#include <numeric>

namespace brigade::actors::detail {
namespace {

constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

__extension__ typedef unsigned __int128 U128;  // GCC/Clang: 64x64->128 multiply

std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

std::uint64_t finalize(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

std::uint64_t splitmix64(std::uint64_t& state) {
  state += kGolden;
  return finalize(state);
}

std::uint64_t mix_seed(std::uint64_t seed, std::uint64_t epoch, std::uint64_t stream) {
  std::uint64_t s = seed;
  std::uint64_t a = splitmix64(s);
  s = a ^ finalize(epoch * kGolden + 0x632be59bd9b4e019ULL);
  std::uint64_t b = splitmix64(s);
  s = b ^ finalize(stream * kGolden + 0x8cb92ba72f3d8dd7ULL);
  return splitmix64(s);
}

Xoshiro256::Xoshiro256(std::uint64_t seed) {
  for (auto& word : s_) word = splitmix64(seed);
}

std::uint64_t Xoshiro256::operator()() {
  const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

std::uint64_t Xoshiro256::below(std::uint64_t bound) {
  U128 m = static_cast<U128>((*this)()) * bound;
  auto low = static_cast<std::uint64_t>(m);
  if (low < bound) {
    const std::uint64_t threshold = -bound % bound;
    while (low < threshold) {
      m = static_cast<U128>((*this)()) * bound;
      low = static_cast<std::uint64_t>(m);
    }
  }
  return static_cast<std::uint64_t>(m >> 64);
}

double Xoshiro256::unit() { return static_cast<double>((*this)() >> 11) * 0x1.0p-53; }

// Fisher–Yates on p[0, size), in place.
template <class I>
void shuffle(I* p, std::uint64_t size, Xoshiro256& rng) {
  for (std::uint64_t i = 0; i + 1 < size; ++i) std::swap(p[i], p[i + rng.below(size - i)]);
}

// Bucket ids for the scatter pass, `bits` at a time from each 64-bit draw.
class BucketDraws {
 public:
  BucketDraws(std::uint64_t seed, int bits) : rng_(seed), bits_(bits) {}
  std::uint64_t next() {
    if (left_ < bits_) {
      word_ = rng_();
      left_ = 64;
    }
    const std::uint64_t b = word_ & ((std::uint64_t{1} << bits_) - 1);
    word_ >>= bits_;
    left_ -= bits_;
    return b;
  }

 private:
  Xoshiro256 rng_;
  int bits_;
  std::uint64_t word_ = 0;
  int left_ = 0;
};

template <class I>
std::vector<I> permutation(std::uint64_t n, std::uint64_t count, std::uint64_t seed) {
  constexpr std::uint64_t kBucketSize = 16384;  // a bucket of uint32 ids fits in L2
  std::uint64_t state = seed;
  const std::uint64_t scatter_seed = splitmix64(state), shuffle_seed = splitmix64(state);
  Xoshiro256 rng(shuffle_seed);
  if (n <= 4 * kBucketSize) {
    std::vector<I> p(n);
    std::iota(p.begin(), p.end(), I{0});
    for (std::uint64_t i = 0; i < count && i + 1 < n; ++i) std::swap(p[i], p[i + rng.below(n - i)]);
    p.resize(count);
    return p;
  }
  // Rao–Sandelius: send each id to a uniformly random bucket, shuffle every bucket,
  // concatenate. The result is a uniform permutation, and each shuffle runs in cache
  // (a plain Fisher–Yates over 10^7 ids is bound by cache misses).
  int bits = 1;
  while (bits < 16 && (n >> bits) > kBucketSize) ++bits;
  const std::size_t buckets = std::size_t{1} << bits;
  std::vector<std::uint64_t> start(buckets + 1, 0);
  {
    BucketDraws draws(scatter_seed, bits);
    for (std::uint64_t i = 0; i < n; ++i) ++start[draws.next() + 1];
  }
  for (std::size_t b = 0; b < buckets; ++b) start[b + 1] += start[b];
  std::vector<I> p(n);
  {
    std::vector<std::uint64_t> fill(start.begin(), start.end() - 1);
    BucketDraws draws(scatter_seed, bits);  // the same draws again
    for (std::uint64_t i = 0; i < n; ++i) p[fill[draws.next()]++] = static_cast<I>(i);
  }
  for (std::size_t b = 0; b < buckets && start[b] < count; ++b) {
    shuffle(p.data() + start[b], start[b + 1] - start[b], rng);
  }
  p.resize(count);
  p.shrink_to_fit();
  return p;
}

template <class I>
std::vector<I> weighted_draws(std::span<const double> weights, std::uint64_t count,
                              std::uint64_t seed) {
  const std::size_t n = weights.size();
  const double sum = std::accumulate(weights.begin(), weights.end(), 0.0);
  // Vose's alias table: column i keeps itself with probability prob[i], else alias[i].
  std::vector<double> prob(n);
  std::vector<I> alias(n, I{0});
  std::vector<I> small, large;
  for (std::size_t i = 0; i < n; ++i) {
    prob[i] = weights[i] * static_cast<double>(n) / sum;
    (prob[i] < 1.0 ? small : large).push_back(static_cast<I>(i));
  }
  while (!small.empty() && !large.empty()) {
    const I s = small.back(), l = large.back();
    small.pop_back();
    alias[s] = l;
    prob[l] = (prob[l] + prob[s]) - 1.0;
    if (prob[l] < 1.0) {
      large.pop_back();
      small.push_back(l);
    }
  }
  for (I i : large) prob[i] = 1.0;
  for (I i : small) prob[i] = 1.0;  // rounding leftovers
  std::vector<I> out(count);
  Xoshiro256 rng(seed);
  for (auto& x : out) {
    const auto column = static_cast<I>(rng.below(n));
    x = rng.unit() < prob[column] ? column : alias[column];
  }
  return out;
}

template std::vector<std::uint32_t> permutation(std::uint64_t, std::uint64_t, std::uint64_t);
template std::vector<std::uint64_t> permutation(std::uint64_t, std::uint64_t, std::uint64_t);
template std::vector<std::uint32_t> weighted_draws(std::span<const double>, std::uint64_t,
                                                   std::uint64_t);
template std::vector<std::uint64_t> weighted_draws(std::span<const double>, std::uint64_t,
                                                   std::uint64_t);

std::uint64_t hash_bytes(const void* data, std::size_t size, std::uint64_t seed) {
  std::uint64_t h = 0xcbf29ce484222325ULL ^ finalize(seed + kGolden);
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i) {
    h ^= bytes[i];
    h *= 0x100000001b3ULL;
  }
  return finalize(h ^ size);
}

}  // namespace brigade::actors::detail
