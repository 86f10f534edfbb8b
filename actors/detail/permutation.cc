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

template <class I>
std::vector<I> permutation(std::uint64_t n, std::uint64_t count, std::uint64_t seed) {
  std::vector<I> p(n);
  std::iota(p.begin(), p.end(), I{0});
  Xoshiro256 rng(seed);
  for (std::uint64_t i = 0; i < count && i + 1 < n; ++i) {
    std::swap(p[i], p[i + rng.below(n - i)]);
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
