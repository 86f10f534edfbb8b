#pragma once

// Random number generation behind the samplers. Everything here is a pure function
// of its seeds: the same inputs give the same outputs on every platform and build,
// which is what makes a sampler reproducible from its (seed, epoch) and a checkpoint
// resumable on another machine. The output of these functions is part of the
// checkpoint format (a saved state names positions of a sequence they generate):
// changing them needs a new checkpoint format version.

#include <cstdint>
#include <span>
#include <vector>

namespace brigade::actors::detail {

/// One step of SplitMix64 (Steele, Lea, Flood 2014): advances `state`, returns a
/// well-mixed 64-bit value.
std::uint64_t splitmix64(std::uint64_t& state);

/// The seed of one stream of draws: `seed` with `epoch` and `stream` mixed in (not
/// substituted), so (seed 1, epoch 2) and (seed 2, epoch 1) are unrelated.
std::uint64_t mix_seed(std::uint64_t seed, std::uint64_t epoch, std::uint64_t stream = 0);

/// xoshiro256** (Blackman, Vigna 2018), seeded through SplitMix64.
class Xoshiro256 {
 public:
  explicit Xoshiro256(std::uint64_t seed);
  std::uint64_t operator()();
  /// Uniform in [0, bound), bound > 0, unbiased (Lemire's multiply-and-reject).
  std::uint64_t below(std::uint64_t bound);
  /// Uniform in [0, 1) with 53 random bits.
  double unit();

 private:
  std::uint64_t s_[4];
};

/// The first `count` entries of a uniformly random permutation of [0, n) (count <= n),
/// by a forward Fisher–Yates shuffle that stops after `count` swaps. Index type
/// `I` must hold n - 1 (std::uint32_t while n <= 2^32 halves the memory).
template <class I>
std::vector<I> permutation(std::uint64_t n, std::uint64_t count, std::uint64_t seed);

/// `count` draws with replacement from [0, weights.size()), index i with probability
/// weights[i] / sum (Vose's alias method: O(n) setup, O(1) per draw). Weights must be
/// finite, non-negative, with a positive sum (checked by the caller).
template <class I>
std::vector<I> weighted_draws(std::span<const double> weights, std::uint64_t count,
                              std::uint64_t seed);

/// A 64-bit hash of a byte string (FNV-1a folded through SplitMix64's finalizer);
/// stable across platforms, used for fingerprints, not for security.
std::uint64_t hash_bytes(const void* data, std::size_t size, std::uint64_t seed = 0);

}  // namespace brigade::actors::detail
