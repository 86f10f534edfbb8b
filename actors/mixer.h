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
// The sources must all be rank r of W (the mix's rank and world size); the mix uses
// their sequences (fingerprint, weights) and shards them itself, rank r owning the
// positions r, r + W, … of each source epoch, so a source's own position or restored
// state does not matter.
//
// STOP POLICY. `first_exhausted` ends the mix's epoch at the first pick of a source
// that has no sample left in its epoch e (a source with none at all ends it at once).
// `after_count` ends it after `count` samples of each rank; `total_count` makes the
// epoch `count` draws in all: each rank of the epoch's world size W draws
// ceil(count / W) (every rank the same number, what a synchronous training step needs;
// at another world size the same total is cut anew); `never` does not end it. Under
// these three, sources without samples are never picked (and an epoch where no source
// has any ends at once).
//
// POSITIONS AND RESUME. Rank r's own draw sequence in epoch e is draw 0, 1, … of the
// rules above over its shards; its positions are those draw indices. `restore(state)`
// continues from a MixState (epoch + CommitState over the positions): it re-derives
// how often each source was picked below the watermark — O(watermark) hash
// evaluations, no sample is generated or replayed — then yields every uncommitted
// draw in order. After next() has returned std::nullopt the next call starts epoch
// e + 1. MixStates go into checkpoint files (transport/checkpoint/checkpoint.h).
//
// ELASTIC RESUME. `repartition()` divides what the W ranks of a checkpoint left among
// W' ranks exactly, as actors/sampler.h does for samplers (including STRADDLING SETS:
// ranks in different epochs). A mix epoch's positions are numbered across ranks: mix
// position g is draw g / W of rank g mod W of the world size W at which the epoch
// started (`epoch_world_size`). A re-partitioned state owns runs of such positions
// (`own_sequence` false), in its local order 0, 1, …, and yields draw k of old rank r
// exactly as old rank r would have; epochs after the planned ones start fresh at W'.
// A rank's epoch length comes from its shards (after_count: `count`; total_count:
// ceil(count / W); first_exhausted:
// the draw where a source runs out, O(length) hash evaluations to find); a mix under
// `never` has no end to divide, so its repartition() throws SamplerStateError (resume
// it at its saved world size).
//
// THREADING. A value type, not thread-safe (one source thread calls next()).

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "actors/positions.h"
#include "actors/sampler.h"

namespace brigade::actors {

/// When a WeightedMixSampler's epoch ends. See the header comment. Stored in
/// checkpoints by value: do not renumber.
enum class MixStop : std::uint8_t {
  first_exhausted = 0,
  after_count = 1,
  never = 2,
  total_count = 3
};

/// The draws of one rank in an epoch that started at world size `world_size` under
/// after_count or total_count (`count` or ceil(count / world_size)).
std::uint64_t rank_draw_count(MixStop stop, std::uint64_t count, std::uint32_t world_size);

const char* to_string(MixStop stop);

/// Options of WeightedMixSampler (designated-initializer order).
struct MixOptions {
  std::vector<double> weights{};  // one per source: finite, >= 0, positive sum
  std::uint64_t seed = 0;
  MixStop stop = MixStop::first_exhausted;
  std::uint64_t count = 0;  // draws per rank (after_count) or in all (total_count) an epoch
  std::uint64_t epoch = 0;
};

/// A mixed sample: which source, and that source's sample.
struct MixedSample {
  std::uint32_t source = 0;
  SampleId sample{};
  friend bool operator==(const MixedSample&, const MixedSample&) = default;
};

/// Everything that determines a mix's draws, so that a checkpoint of one mix is never
/// resumed on another.
struct MixFingerprint {
  std::vector<DatasetFingerprint> sources{};
  std::vector<double> weights{};
  std::uint64_t seed = 0;
  MixStop stop = MixStop::first_exhausted;
  std::uint64_t count = 0;
  friend bool operator==(const MixFingerprint&, const MixFingerprint&) = default;
};

/// "" when equal, else the first differing field with both values.
std::string describe_conflict(const MixFingerprint& saved, const MixFingerprint& caller);

/// One rank's resumable mix state. Plain data; transport/checkpoint/checkpoint.h stores it.
struct MixState {
  std::uint64_t generation = 0;  // the saver's counter, as SamplerState::generation
  MixFingerprint fingerprint{};
  std::uint64_t epoch = 0;
  std::uint32_t epoch_world_size = 1;  // W at which the epoch started (ELASTIC RESUME)
  std::uint32_t world_size = 1;
  std::uint32_t rank = 0;
  bool own_sequence = true;             // the rank's own draws of the epoch (owned unused)
  std::vector<PositionRun> owned{};     // else: the mix positions it owns, in local order
  CommitState committed{};              // over local positions (own sequence: draw indices)
  std::vector<PlannedEpoch> planned{};  // shares of epochs epoch+1, … (epoch_world_size)
  friend bool operator==(const MixState&, const MixState&) = default;
};

/// Throws SamplerStateError (naming the field) unless `state` is self-consistent.
void validate(const MixState& state);

/// Elastic re-partition of a mix (ELASTIC RESUME): from the states of all ranks
/// 0 … W-1 of one checkpoint, the state of rank `new_rank` of `new_world_size`.
/// Throws SamplerStateError naming the inconsistency, or for a mix under `never`.
MixState repartition(std::span<const MixState> ranks, std::uint32_t new_rank,
                     std::uint32_t new_world_size);

class WeightedMixSampler {
 public:
  /// Throws SamplerStateError on bad weights (count or values), no sources, or
  /// sources of different ranks or world sizes.
  WeightedMixSampler(std::vector<DistributedSampler> sources, MixOptions options);

  /// The next mixed sample with its position, or std::nullopt at the epoch's end.
  std::optional<Positioned<MixedSample>> next();
  /// Starts mix epoch `epoch` from its beginning (its planned share, if any).
  void set_epoch(std::uint64_t epoch);
  /// Continues from `state` (see POSITIONS AND RESUME). Throws SamplerStateError if
  /// the state's fingerprint, rank or world size differs from this mix's, or if the
  /// state is inconsistent.
  void restore(const MixState& state);
  MixState state(const CommitState& committed, std::uint64_t generation = 0) const;

  std::uint64_t epoch() const { return epoch_; }
  std::uint32_t rank() const { return rank_; }
  std::uint32_t world_size() const { return world_size_; }
  const MixFingerprint& fingerprint() const { return fingerprint_; }
  const std::vector<DistributedSampler>& sources() const { return sources_; }

 private:
  // How one old rank of the epoch's world size draws: its shard sizes and the
  // cumulative weights of the sources it can pick.
  struct RankDraws {
    std::vector<std::uint64_t> sizes;
    std::vector<double> cumulative;
  };
  // The picks of one set of cumulative weights, with the counts before every
  // kSnapshot-th draw, so that draw k of any rank is found without replaying from 0.
  class PickCounter {
   public:
    PickCounter(std::uint64_t seed, std::vector<double> cumulative);
    // The source of draw k and how many earlier draws picked it.
    std::pair<std::uint32_t, std::uint64_t> at(std::uint64_t k);

   private:
    static constexpr std::uint64_t kSnapshot = 1024;
    std::uint64_t seed_;
    std::vector<double> cumulative_;
    std::vector<std::vector<std::uint64_t>> snapshots_;
    std::uint64_t k_ = 0;
    std::vector<std::uint64_t> counts_;  // of draws before k_
  };

  void start(std::uint64_t epoch, std::uint32_t epoch_world_size, bool own_sequence,
             const std::vector<PositionRun>& owned, const CommitState& committed);
  // Whether draw `draw_` of the own sequence can happen; if so, which source.
  std::optional<std::uint32_t> advance();
  std::optional<Positioned<MixedSample>> next_owned();
  SampleId sample(std::uint32_t old_rank, std::uint32_t source, std::uint64_t c,
                  std::uint64_t size);

  std::vector<DistributedSampler> sources_;
  MixOptions options_;
  MixFingerprint fingerprint_;
  std::uint32_t rank_ = 0;
  std::uint32_t world_size_ = 1;

  std::uint64_t epoch_ = 0;
  std::uint32_t epoch_world_size_ = 1;
  std::uint64_t pick_seed_ = 0;
  bool own_sequence_ = true;
  std::vector<PlannedEpoch> plan_;  // plan_[i] is epoch plan_first_ + i
  std::uint64_t plan_first_ = 0;

  // The own sequence: this rank's draws.
  RankDraws own_;
  std::uint64_t draw_ = 0;            // the next draw index
  std::vector<std::uint64_t> picks_;  // per source, picks so far this epoch

  // Owned mix positions (a re-partitioned epoch).
  std::vector<PositionRun> owned_;
  std::uint64_t share_ = 0;
  std::uint64_t local_ = 0;
  std::size_t run_ = 0;
  std::uint64_t offset_ = 0;
  std::map<std::uint32_t, RankDraws> old_ranks_;  // of the epoch's world size, on first use
  std::map<std::vector<double>, PickCounter> counters_;

  std::vector<std::uint64_t> skip_;  // committed positions above the watermark
  std::size_t skip_index_ = 0;
  bool ended_ = false;
};

}  // namespace brigade::actors
