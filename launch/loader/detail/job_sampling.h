#pragma once

// The job's sampling (launch/loader/job.h MIXING), internal to the loader: which sample
// each position of a rank's epoch is, and the state that resumes it.
//
// A dataset that is not joined is sampled by make_sampler() (job.h). A joined one
// (Dataset::join, a config's [[sources]]) by a WeightedMixSampler (actors/mixer.h) over
// one sampler per source — random with a seed of its own when shuffling (the
// shard-block sampler for a source of tar shards with shuffle_window), else
// deterministic; tail pad, so that every rank's share of a source has the same size —
// under MixStop::total_count with N = epoch_samples, else the sum of the sources'
// sizes: each rank draws ceil(N / W) in every epoch it starts at world size W. A draw
// picks source i with probability weight_i / Σ weights and yields that source's next
// sample in its own order (a source whose samples run out starts its next epoch, a new
// permutation); next() gives it as an id of the joined dataset (the source's offset
// plus its id). The mix's picks are drawn from the job's seed also without shuffle.
//
// LOOKAHEAD. When the dataset's containers are remote tar shards whose members are
// streamed (object_reads.h STREAMING) and the dataset is not joined, the first next()
// of an epoch walks this rank's share of it once (at() of every position: the epoch's
// plan) and notes the order in which its shards are first read; then each next() at
// local position p queues for prefetching (prefetch_object_stream) every shard first
// read at a position up to p + D, in that order, where D is two windows' worth of this
// rank's positions (share × 2 × window / containers; two shards' worth when reading in
// order), so the next windows' requests are under way while the current one is read
// (the streams' prefetch bound, kStreamPrefetchBytes, caps the bytes this holds). The
// prefetch queue is cleared when an epoch starts. A rank of several (world size > 1)
// also names, for every shard, the members it reads this epoch (want_object_members):
// its streams fetch those only, not whole shards of which it reads 1/W. Cost: one pass over the
// share per epoch (a few ns a position) and a vector of (position, container) per shard.
//
// THREADING. As the samplers: one thread calls next(); state() may be called from
// another while next() runs within the same epoch.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "actors/mixer.h"
#include "actors/sampler.h"
#include "launch/loader/job.h"

namespace brigade::launch::detail {

class JobSampling {
 public:
  /// Throws ConfigError naming the key for a mix it cannot build (weights).
  JobSampling(const RunConfig& config, const Dataset& dataset);

  bool mixed() const { return mix_ != nullptr; }

  /// The pipeline's source: the next sample of this rank's epoch (a joined dataset's
  /// id), std::nullopt at its end; the call after that starts the next epoch.
  std::optional<actors::Positioned<actors::SampleId>> next();
  void set_epoch(std::uint64_t epoch);
  /// Positions this rank owns in `epoch` (the current one, a planned one, or a fresh one).
  std::uint64_t size_of(std::uint64_t epoch) const;
  /// Positions of `state`'s epoch not committed in it.
  std::uint64_t remaining(const JobState& state) const;

  JobState state(const actors::CommitState& committed, std::uint64_t generation = 0) const;
  /// Throws actors::SamplerStateError: a state of the other kind (a mix's for a plain
  /// job or the reverse), of another fingerprint, rank or world size.
  void restore(const JobState& state);

  /// The newest complete checkpoint set in `dir` for this rank (transport::load_checkpoint
  /// or load_mix_checkpoint, expecting this sampling's fingerprint).
  JobResume load(const std::filesystem::path& dir, std::uint32_t rank,
                 std::uint32_t world_size) const;
  transport::RunId fresh_run(std::uint32_t world_size, std::string_view launch) const;

 private:
  void look_ahead(std::uint64_t position);

  std::unique_ptr<actors::DistributedSampler> sampler_;
  // LOOKAHEAD: the dataset; its shards in order of first read this epoch (position,
  // container); the next one to queue; the distance D; whether the epoch is planned.
  const Dataset* dataset_ = nullptr;
  std::vector<std::pair<std::uint64_t, std::uint32_t>> ahead_;
  std::size_t ahead_next_ = 0;
  std::uint64_t distance_ = 0;
  std::uint64_t window_ = 0;  // 0: in order (a shard at a time)
  bool planned_ = false;
  std::uint64_t planned_epoch_ = 0;
  std::unique_ptr<actors::WeightedMixSampler> mix_;
  std::vector<std::uint64_t> offsets_;  // of each source in the joined dataset
  std::uint64_t epoch_draws_ = 0;       // N
};

}  // namespace brigade::launch::detail
