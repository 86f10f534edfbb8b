#pragma once

// Weighted mixing of several sampled sources into one stream.
//
//   WeightedMixSampler mix({DistributedRandomSampler(n_a, {.rank = r, .world_size = w, .seed = 1}),
//                           DistributedRandomSampler(n_b, {.rank = r, .world_size = w, .seed = 2})},
//                          {.weights = {3, 1}, .seed = 7, .stop = MixStop::never});
//
// Each draw picks source i with probability weights[i] / Σ weights (of the sources
// still active) from a generator seeded with (seed, epoch) — the epoch mixed in, as
// for the samplers — and yields that source's next sample. Every rank uses the same
// seed, so the ranks make the same choices over their own shards.
//
// STOP POLICY. `first_exhausted` ends the mix's epoch when a chosen source has no
// sample left in its epoch. `after_count` ends it after `count` samples and `never`
// does not end it; under both, a source that runs out starts its next epoch (a new
// permutation) and a source that yields nothing at all is dropped from the mix.
//
// EPOCHS AND POSITIONS. Mix epoch e starts every source at its epoch e; positions are
// the draw indices 0, 1, … of the mix's epoch. After next() has returned std::nullopt
// the next call starts epoch e + 1.
//
// RESUME. Not yet checkpointable: a mixed stream's state (each source's progress
// through its own epochs) is not part of SamplerState; restart it with set_epoch().
//
// THREADING. A value type, not thread-safe (one source thread calls next()).

#include <cstdint>
#include <optional>
#include <vector>

#include "actors/detail/permutation.h"
#include "actors/positions.h"
#include "actors/sampler.h"

namespace brigade::actors {

/// When a WeightedMixSampler's epoch ends. See the header comment.
enum class MixStop : std::uint8_t { first_exhausted, after_count, never };

/// Options of WeightedMixSampler (designated-initializer order).
struct MixOptions {
  std::vector<double> weights{};  // one per source: finite, >= 0, positive sum
  std::uint64_t seed = 0;
  MixStop stop = MixStop::first_exhausted;
  std::uint64_t count = 0;        // samples per epoch under after_count
  std::uint64_t epoch = 0;
};

/// A mixed sample: which source, and that source's sample.
struct MixedSample {
  std::uint32_t source = 0;
  SampleId sample{};
  friend bool operator==(const MixedSample&, const MixedSample&) = default;
};

class WeightedMixSampler {
 public:
  /// Throws SamplerStateError on bad weights (count or values) or no sources.
  WeightedMixSampler(std::vector<DistributedSampler> sources, MixOptions options);

  /// The next mixed sample with its draw index, or std::nullopt at the epoch's end.
  std::optional<Positioned<MixedSample>> next();
  /// Starts mix epoch `epoch` (and every source's epoch `epoch`) from its beginning.
  void set_epoch(std::uint64_t epoch);

  std::uint64_t epoch() const { return epoch_; }
  const std::vector<DistributedSampler>& sources() const { return sources_; }

 private:
  std::uint32_t choose();

  std::vector<DistributedSampler> sources_;
  MixOptions options_;
  std::vector<double> active_;  // weights, 0 for a dropped source
  std::uint64_t epoch_ = 0;
  detail::Xoshiro256 rng_{0};
  std::uint64_t drawn_ = 0;
  bool ended_ = false;
};

}  // namespace brigade::actors
