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
  std::unique_ptr<actors::DistributedSampler> sampler_;
  std::unique_ptr<actors::WeightedMixSampler> mix_;
  std::vector<std::uint64_t> offsets_;  // of each source in the joined dataset
  std::uint64_t epoch_draws_ = 0;       // N
};

}  // namespace brigade::launch::detail
