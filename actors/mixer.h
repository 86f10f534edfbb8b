#pragma once

// Weighted mixing of several sampled sources into one stream.
//
//   WeightedMixSampler mix({DistributedRandomSampler(n_a, {.rank = r, .world_size = w, .seed = 1}),
//                           DistributedRandomSampler(n_b, {.rank = r, .world_size = w, .seed =
//                           2})},
//                          {.weights = {3, 1}, .seed = 7, .stop = MixStop::never});
//
// Draw k of epoch e picks source i with probability weights[i] / Σ weights over the
// sources that have samples this epoch; the pick is a pure function of (seed, e, k)
// — the epoch mixed into the seed, as for the samplers — so every rank makes the same
// picks over its own shards, and a resume needs no generator state. The c-th pick of
// source i yields sample c of its sequence: position c mod size of its epoch
// e + c / size (a source that runs out starts its next epoch, a new permutation).
//
// STOP POLICY. `first_exhausted` ends the mix's epoch at the first pick of a source
// that has no sample left in its epoch e (a source with none at all ends it at once).
// `after_count` ends it after `count` samples and `never` does not end it; under both,
// sources without samples are never picked (and an epoch where no source has any
// ends at once).
//
// POSITIONS AND RESUME. Positions are the draw indices 0, 1, … of the mix's epoch.
// `restore(state)` continues from a MixState (epoch + CommitState over those
// positions): it re-derives how often each source was picked below the watermark —
// O(watermark) hash evaluations, no sample is generated or replayed — then yields
// every uncommitted draw in order. After next() has returned std::nullopt the next
// call starts epoch e + 1. Mixed state is in-memory only: checkpoint files
// (transport/checkpoint.h) hold a DistributedSampler's state, and a mix cannot be
// re-partitioned to another world size.
//
// THREADING. A value type, not thread-safe (one source thread calls next()).

#include <cstdint>
#include <optional>
#include <vector>

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
  std::uint64_t count = 0;  // samples per epoch under after_count
  std::uint64_t epoch = 0;
};

/// A mixed sample: which source, and that source's sample.
struct MixedSample {
  std::uint32_t source = 0;
  SampleId sample{};
  friend bool operator==(const MixedSample&, const MixedSample&) = default;
};

/// A mix's resumable state: its epoch and the committed draw positions.
struct MixState {
  std::uint64_t epoch = 0;
  CommitState committed{};
  friend bool operator==(const MixState&, const MixState&) = default;
};

class WeightedMixSampler {
 public:
  /// Throws SamplerStateError on bad weights (count or values) or no sources.
  WeightedMixSampler(std::vector<DistributedSampler> sources, MixOptions options);

  /// The next mixed sample with its draw index, or std::nullopt at the epoch's end.
  std::optional<Positioned<MixedSample>> next();
  /// Starts mix epoch `epoch` from its beginning.
  void set_epoch(std::uint64_t epoch);
  /// Continues from `state` (see POSITIONS AND RESUME).
  void restore(const MixState& state);
  MixState state(const CommitState& committed) const { return {epoch_, committed}; }

  std::uint64_t epoch() const { return epoch_; }
  const std::vector<DistributedSampler>& sources() const { return sources_; }

 private:
  std::uint32_t pick(std::uint64_t draw) const;
  // Whether draw `draw_` can happen; if so, which source and that source's count.
  std::optional<std::uint32_t> advance();

  std::vector<DistributedSampler> sources_;
  MixOptions options_;
  std::vector<std::uint64_t> sizes_;  // each source's samples per epoch
  std::vector<double> cumulative_;    // of the weights of sources that can be picked
  std::uint64_t epoch_ = 0;
  std::uint64_t pick_seed_ = 0;
  std::uint64_t draw_ = 0;            // the next draw index
  std::vector<std::uint64_t> picks_;  // per source, picks so far this epoch
  std::vector<std::uint64_t> skip_;   // committed draws above the watermark
  std::size_t skip_index_ = 0;
  bool ended_ = false;
};

}  // namespace brigade::actors
