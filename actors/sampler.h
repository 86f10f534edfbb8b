#pragma once

// Distributed samplers: which dataset indices this rank reads, in which order, in
// each epoch — and the state that lets a run stop and resume exactly, at the same or
// at a different world size.
//
//   DistributedRandomSampler sampler(files.size(), {.rank = rank, .world_size = world,
//                                                   .seed = 42, .epoch = 0});
//   auto pipeline = PipelineBuilder().add_source(std::ref(sampler))...;
//
// THE EPOCH SEQUENCE. Each epoch has one global sequence of sample ids, the same on
// every rank: 0, 1, …, n-1 for the deterministic sampler; for the random sampler a
// permutation of [0, n) drawn from (seed, epoch) — the epoch is mixed into the seed,
// never substituted for it — or, with weights, `num_draws` draws with replacement.
// The tail policy then fixes the epoch's length L' for the world size W at which the
// epoch starts (L = the sequence's length before it):
//   none       L' = L. Every sample exactly once; rank shares differ by at most one
//              (a rank may get nothing when n < W).
//   drop_last  L' = floor(L / W) × W, as PyTorch's DistributedSampler(drop_last=True):
//              every rank gets the same count, the tail is not read this epoch.
//   pad        L' = ceil(L / W) × W, the extra positions repeat the sequence from its
//              start (PyTorch's padding) and are marked `is_padding`.
// The set of global positions [0, L') is fixed when the epoch starts: a tail dropped
// at W stays dropped when the epoch is resumed at W'.
//
// SHARDING AND POSITIONS. At the start of an epoch rank r owns the global positions
// r, r + W, r + 2W, … < L'. What a rank owns is kept as a list of strided runs of
// global positions (PositionRun), which stays compact after elastic re-partitions.
// `next()` walks the owned runs in order and reports each sample with its *local*
// position: its index 0 … size()-1 within this rank's epoch sequence. The pipeline's
// committed state (CommitState: a watermark plus the positions finished above it) is
// over these local positions.
//
// RESUME. `restore(state)` continues an epoch from a SamplerState: it yields exactly
// the owned positions that are not committed, in order, with their original local
// positions, reaching the first one in O(log runs) once the epoch's sequence is
// generated (no replay). `repartition()` turns the states of all W ranks into the
// state of rank r' of W': the not-yet-committed positions, split into contiguous
// slices whose sizes differ by at most one, nothing committed (see STRADDLING SETS
// for ranks in different epochs). With a pipeline:
//   save:    write_checkpoint(dir, sampler.state(pipeline.committed(), step));
//   resume:  sampler.restore(state); pipeline.start(state.committed);
// Always restore a loaded state, also one whose epoch is fully committed
// (remaining() == 0): its planned epochs come with it. The next set_epoch(state.epoch
// + 1), or the next() after the end, then starts the following epoch.
//
// STRADDLING SETS. Ranks stop on their own (a batch count, a signal), so the states of
// one checkpoint set may be in different epochs: rank 0 at the end of epoch 0, rank 1
// a batch into epoch 1. Each state is valid for its rank alone: at the saved world
// size every rank resumes from its own state and goes on from its own epoch. For
// another world size the rule is: a state carries, besides its current epoch, its
// *planned* shares of the epochs after it (`planned`, filled only by a re-partition),
// and a rank starts every epoch after its last planned one fresh at its world size.
// `repartition()` takes each epoch from the oldest current epoch E to the newest epoch
// T that any rank has started or planned and gathers what is left of it, in rank
// order: the uncommitted positions of the ranks in it, the planned (or else fresh)
// shares of the ranks not yet in it; the ranks past it have finished it. It cuts that
// into W' contiguous slices. The new rank's state is epoch E with its slice of E and
// its slices of E+1 … T as planned epochs; epochs after T start fresh at W'. An epoch
// keeps the length (and positions) it got when it first started, so what the ranks
// already in E+1 delivered is exactly what the plan of E+1 leaves out: it is never
// delivered again, and chains of re-partitions (4 → 3 → 5) stay exact.
// Why this rule: ranks do not talk, so they cannot agree to stop at one epoch; and
// why plans rather than lists of delivered positions: a planned epoch is a few runs
// (compact like `owned`), and the next epoch's positions had to be fixed anyway,
// since its length under drop_last or pad was fixed at the world size it started at.
//
// EPOCHS. After `next()` has returned std::nullopt at the end of epoch e, the next
// call starts epoch e + 1 (so a pipeline re-run reads the next epoch); `set_epoch(e)`
// starts epoch e from its beginning at any time: this rank's planned share of it when
// a restored state planned it, else the fresh partition at the sampler's world size.
//
// BLOCKS. DistributedBlockSampler's sequence reads the dataset a few containers (tar
// shards) at a time: for (seed, epoch) it permutes the containers, cuts that order into
// windows of W consecutive containers, and permutes the samples of each window among
// themselves (each its own stream of (seed, epoch)); the sequence is the windows one
// after the other. Everything above holds unchanged — it is one global sequence per
// (seed, epoch), sharded, committed, resumed and re-partitioned like the others; only
// the sequence differs. The trade-off: within an epoch the samples of a window are all
// read before any of the next window, so a batch holds samples of at most W (two at a
// window's edge) containers rather than of the whole dataset: whatever correlates within
// a container (a shard written from one class, one source, one day) correlates within
// the batch and across consecutive batches. Across epochs the windows differ (the
// containers' order is redrawn). W = the number of containers is a full shuffle; W = 1
// reads one container at a time. Write shards from a shuffled sample order and use a W
// that holds several classes to keep batches close to a full shuffle's.
//
// COST. The random sampler generates its sequence lazily, on the first next() or
// at() of an epoch: a bucketed (Rao–Sandelius) Fisher–Yates shuffle with xoshiro256**
// (uint32 ids while n <= 2^32), about 0.1–0.25 s for 10 million ids. A rank holds the
// epoch's sequence (4 or 8 bytes per draw) and its owned runs; the deterministic
// sampler holds no sequence.
//
// THREADING. A sampler is a value type and not thread-safe: one thread (the pipeline's
// source) calls next(). Exception: state(), epoch(), size() and owned() read only what
// is fixed for the epoch, so another thread may call them while next() runs within
// the same epoch — not while next() starts the next one. Copies are independent.

#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "actors/positions.h"

namespace brigade::actors {

/// What happens to the part of an epoch that does not divide evenly among ranks.
/// See the header comment. Stored in checkpoints by value: do not renumber.
enum class TailPolicy : std::uint8_t { none = 0, drop_last = 1, pad = 2 };

/// Which sequence a sampler draws. Stored in checkpoints: do not renumber.
enum class SamplerKind : std::uint8_t { deterministic = 0, random = 1, weighted = 2, blocks = 3 };

const char* to_string(TailPolicy tail);
const char* to_string(SamplerKind kind);

/// What a sampler yields: a dataset index, and whether this entry only pads the epoch
/// so that every rank gets the same count (TailPolicy::pad).
struct SampleId {
  std::uint64_t id = 0;
  bool is_padding = false;
  friend bool operator==(const SampleId&, const SampleId&) = default;
};

/// The global epoch positions start, start + stride, …, (count of them).
struct PositionRun {
  std::uint64_t start = 0;
  std::uint64_t stride = 1;
  std::uint64_t count = 0;
  friend bool operator==(const PositionRun&, const PositionRun&) = default;
};

/// Everything that determines an epoch's sequence, so that a checkpoint taken on one
/// dataset and sampler is never resumed on another.
struct DatasetFingerprint {
  std::uint64_t n = 0;              // dataset size
  std::uint64_t identity_hash = 0;  // the caller's hash of the sample identities
  SamplerKind kind = SamplerKind::deterministic;
  std::uint64_t seed = 0;
  std::uint64_t num_draws = 0;     // L: the sequence's length before the tail policy
  std::uint64_t weights_hash = 0;  // 0 without weights; blocks: the blocks' and window's hash
  TailPolicy tail = TailPolicy::none;
  friend bool operator==(const DatasetFingerprint&, const DatasetFingerprint&) = default;
};

/// "" when equal, else the first differing field with both values, e.g.
/// "seed: checkpoint has 1, caller has 2".
std::string describe_conflict(const DatasetFingerprint& saved, const DatasetFingerprint& caller);

/// A hash of the sample identities (e.g. the file list, in dataset order) for
/// DatasetFingerprint::identity_hash. Stable across platforms and versions.
std::uint64_t hash_sample_identities(std::span<const std::string> identities);

/// hash_sample_identities() one identity at a time (identities held in another form):
/// IdentityHasher(n), add() each of the n identities in order, value().
class IdentityHasher {
 public:
  explicit IdentityHasher(std::uint64_t count);
  void add(std::string_view identity);
  std::uint64_t value() const { return hash_; }

 private:
  std::uint64_t hash_;
};

/// A rank's share of an epoch it has not started, planned by an elastic re-partition
/// (see STRADDLING SETS). Nothing of it is committed yet.
struct PlannedEpoch {
  std::uint64_t epoch_length = 0;      // samplers: L' of that epoch
  std::uint32_t epoch_world_size = 0;  // mixes: the world size the epoch started at
  std::vector<PositionRun> owned{};    // global positions, in the rank's local order
  friend bool operator==(const PlannedEpoch&, const PlannedEpoch&) = default;
};

/// One rank's resumable state within an epoch. Plain data; the checkpoint files of
/// transport/checkpoint/checkpoint.h store exactly these fields.
struct SamplerState {
  /// 2: adds `planned` (and the mix and run identity of the checkpoint files). A
  /// version-1 state is a version-2 state without planned epochs.
  static constexpr std::uint32_t kFormatVersion = 2;
  static constexpr std::uint32_t kOldestFormatVersion = 1;

  std::uint32_t format_version = kFormatVersion;
  std::uint64_t generation = 0;  // the saver's counter (e.g. the training step)
  DatasetFingerprint fingerprint{};
  std::uint64_t epoch = 0;
  std::uint64_t epoch_length = 0;  // L', fixed when the epoch started
  std::uint32_t world_size = 1;
  std::uint32_t rank = 0;
  std::vector<PositionRun> owned{};     // this rank's global positions, in its local order
  CommitState committed{};              // over local positions 0 … share()-1
  std::vector<PlannedEpoch> planned{};  // this rank's shares of epochs epoch+1, epoch+2, …

  /// How many positions this rank owns this epoch.
  std::uint64_t share() const;
  /// How many owned positions are not committed.
  std::uint64_t remaining() const;
  friend bool operator==(const SamplerState&, const SamplerState&) = default;
};

/// Inconsistent or unusable sampler state or parameters; the message names the field.
class SamplerStateError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// Throws SamplerStateError (naming the field) unless `state` is self-consistent:
/// supported format version, rank < world_size, owned and planned runs inside their
/// epoch's length, committed positions sorted. Does not compare it with any sampler.
void validate(const SamplerState& state);

/// L' for a sequence of `length` draws at world size W under `tail`.
std::uint64_t epoch_length(std::uint64_t length, TailPolicy tail, std::uint32_t world_size);

/// The owned runs of rank r at the start of an epoch: r, r + W, … < epoch_length.
std::vector<PositionRun> initial_partition(std::uint64_t epoch_length, std::uint32_t rank,
                                           std::uint32_t world_size);

/// Elastic re-partition. From the states of all ranks 0 … W-1 of one checkpoint (same
/// generation and fingerprint, any epochs; any order), the state of rank `new_rank` of
/// `new_world_size`: per epoch, the positions the old ranks left, in rank order, cut
/// into W' contiguous slices whose sizes differ by at most one; nothing committed
/// (STRADDLING SETS). Throws SamplerStateError naming the inconsistency.
SamplerState repartition(std::span<const SamplerState> ranks, std::uint32_t new_rank,
                         std::uint32_t new_world_size);

/// Options of DistributedDeterministicSampler (designated-initializer order).
struct DeterministicOptions {
  std::uint32_t rank = 0;
  std::uint32_t world_size = 1;
  TailPolicy tail = TailPolicy::none;
  std::uint64_t epoch = 0;
  std::uint64_t identity_hash = 0;  // see hash_sample_identities()
};

/// Options of DistributedRandomSampler (designated-initializer order).
struct RandomOptions {
  std::uint32_t rank = 0;
  std::uint32_t world_size = 1;
  std::uint64_t seed = 0;
  std::uint64_t epoch = 0;
  std::uint64_t num_draws = 0;    // 0: n. Without weights, more than n concatenates
                                  // independent permutations (as torch's RandomSampler)
  std::vector<double> weights{};  // empty: a permutation; else n weights, draws with
                                  // replacement (finite, >= 0, positive sum)
  TailPolicy tail = TailPolicy::none;
  std::uint64_t identity_hash = 0;  // see hash_sample_identities()
};

/// Options of DistributedBlockSampler (designated-initializer order).
struct BlockOptions {
  std::uint32_t rank = 0;
  std::uint32_t world_size = 1;
  std::uint64_t seed = 0;
  std::uint64_t epoch = 0;
  // The containers' sample id ranges: container c holds ids [boundaries[c],
  // boundaries[c + 1]); boundaries[0] == 0, non-decreasing, boundaries.back() == n.
  std::vector<std::uint64_t> boundaries{};
  std::uint64_t window = 1;  // W: containers read together (>= 1)
  TailPolicy tail = TailPolicy::none;
  std::uint64_t identity_hash = 0;  // see hash_sample_identities()
};

/// The common sampler; construct one of the three below. A positioned source for
/// PipelineBuilder::add_source (pass std::ref(sampler) to keep calling set_epoch()).
class DistributedSampler {
 public:
  /// The next sample of this rank's epoch with its local position, or std::nullopt at
  /// the end of the epoch (and the call after that starts the next epoch).
  std::optional<Positioned<SampleId>> next();

  /// Starts epoch `epoch` from its beginning: the planned share of it when a restored
  /// state planned it, else the partition at the current world size (see EPOCHS).
  void set_epoch(std::uint64_t epoch);

  /// Continues from `state` (see RESUME). Throws SamplerStateError if the state's
  /// fingerprint, rank or world size differs from this sampler's (message names the
  /// conflict), or if the state is inconsistent. Adopts the state's epoch and plan.
  void restore(const SamplerState& state);

  /// This rank's state with `committed` (over local positions, from the pipeline).
  SamplerState state(const CommitState& committed, std::uint64_t generation = 0) const;

  /// The sample at local position `position` of this epoch (< size()).
  SampleId at(std::uint64_t position) const;
  /// The sample at global position `global` of this epoch's sequence, owned by any
  /// rank (positions past the sequence's length repeat it as padding).
  SampleId at_global(std::uint64_t global) const;
  /// How many positions this rank owns in `epoch`: size() for the current one, the
  /// planned share, else the fresh partition's (e.g. to count what a job has left).
  std::uint64_t size_of(std::uint64_t epoch) const;

  std::uint64_t epoch() const { return epoch_; }
  std::uint64_t size() const { return share_; }  // positions owned this epoch
  std::uint32_t rank() const { return rank_; }
  std::uint32_t world_size() const { return world_size_; }
  const DatasetFingerprint& fingerprint() const { return fingerprint_; }
  const std::vector<PositionRun>& owned() const { return owned_; }

 protected:
  DistributedSampler(DatasetFingerprint fingerprint, std::uint32_t rank, std::uint32_t world_size,
                     std::uint64_t epoch, std::vector<double> weights);
  /// SamplerKind::blocks: the containers' boundaries and the window (BLOCKS).
  void use_blocks(std::vector<std::uint64_t> boundaries, std::uint64_t window);

 private:
  void start_epoch(std::uint64_t epoch, std::uint64_t epoch_length, std::vector<PositionRun> owned,
                   const CommitState& committed);
  void ensure_sequence() const;
  SampleId sequence_at(std::uint64_t global) const;  // the sequence must be ready

  DatasetFingerprint fingerprint_;
  std::uint32_t rank_;
  std::uint32_t world_size_;
  std::vector<double> weights_;
  std::vector<std::uint64_t> blocks_;  // SamplerKind::blocks: the containers' boundaries
  std::uint64_t window_ = 0;

  std::uint64_t epoch_ = 0;
  std::uint64_t epoch_length_ = 0;
  std::vector<PositionRun> owned_;
  std::vector<std::uint64_t> run_offsets_;  // local position of each run's first entry
  std::uint64_t share_ = 0;
  // The planned epochs of the last restored state: plan_[i] is epoch plan_first_ + i.
  std::vector<PlannedEpoch> plan_;
  std::uint64_t plan_first_ = 0;

  // The epoch's global sequence, generated on first use (one of the two is filled).
  mutable bool sequence_ready_ = false;
  mutable std::vector<std::uint32_t> sequence32_;
  mutable std::vector<std::uint64_t> sequence64_;

  // Cursor: the next local position, its run and offset, the committed ones to skip.
  std::uint64_t local_ = 0;
  std::size_t run_ = 0;
  std::uint64_t offset_ = 0;
  std::vector<std::uint64_t> skip_;
  std::size_t skip_index_ = 0;
  bool ended_ = false;
};

/// Rank r of W reads 0 … n-1 sharded as r, r + W, … (DESIGN §3).
class DistributedDeterministicSampler : public DistributedSampler {
 public:
  DistributedDeterministicSampler(std::uint64_t n, const DeterministicOptions& options = {});
};

/// One global permutation (or weighted draw) per (seed, epoch), sharded as above.
/// Throws SamplerStateError on bad weights or rank >= world_size.
class DistributedRandomSampler : public DistributedSampler {
 public:
  DistributedRandomSampler(std::uint64_t n, const RandomOptions& options = {});
};

/// One permutation per (seed, epoch) that reads `window` containers at a time (BLOCKS),
/// sharded as above. Throws SamplerStateError on bad boundaries, a window of 0 or rank >=
/// world_size.
class DistributedBlockSampler : public DistributedSampler {
 public:
  DistributedBlockSampler(std::uint64_t n, const BlockOptions& options);
};

}  // namespace brigade::actors
