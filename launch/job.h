#pragma once

// The job of `brigade run`, for `epochs` epochs: a distributed sampler over the file
// list → "slots" (each sample gets its slot in a batch buffer) → "read" (io stage:
// the file's bytes) → "decode" (cpu stage, straight into its slot of the batch tensor:
// images with the ImageNet eval transform, shorter side 256 + center crop 224; clips
// as 8 evenly spaced 224×224 frames) → "collate" (gathers a batch's slots) → the
// consumer. The batch is one contiguous uint8 tensor, NHWC or NCHW (clips N×T×H×W×C
// or N×T×C×H×W); batch buffers are recycled once the consumer drops a batch.
//
// BATCHES. Batch k holds the run's samples k·n … k·n+n-1 in sampler order; a sample
// that fails is reported and its slot dropped, so that batch is delivered short (the
// good samples compacted to the front). With `--order completion` the job decodes
// each sample into its own tensor and copies them into the batch ("read", "decode",
// "batch", "collate"), and batches are filled from the next samples instead.
//
// SAMPLING. `shuffle`: DistributedRandomSampler(seed), else the deterministic one;
// tail policy none (every sample once per epoch, the last partial batch delivered).
// A sample's id is its index in `files`.
//
// CHECKPOINTS. With `checkpoint_dir`, this rank's SamplerState (transport/checkpoint.h)
// is written when the run stops (stop_after_batches), is interrupted, or ends (then
// fully committed: a resume of it delivers nothing). With `resume_from`, the newest
// complete set there is restored at the current rank and world size.
//
// FAILURES. A file that cannot be read or decoded fails its task with a message naming
// the sample id, the path and the cause; the pipeline logs it and counts it against
// `failure_budget`, and run_job throws actors::PipelineFailure once it is exceeded.
//
// THREADING. run_job runs the consumer on the calling thread; the callbacks are
// called on it. `interrupt` may be set from a signal handler.

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "actors/stats.h"
#include "launch/config.h"
#include "media/tensor.h"

namespace brigade::launch {

/// The dataset of a job: files[i] is sample i; `identities` (same length) are what
/// checkpoints fingerprint (paths relative to the data folder, or the list's lines).
struct Dataset {
  std::vector<std::string> files;
  std::vector<std::string> identities;
};

/// Files under `dir` (recursively) with an extension of `kind`, sorted by path.
/// Throws ConfigError if `dir` cannot be read or holds no such file.
Dataset list_folder(const std::string& dir, MediaKind kind);
/// The non-blank lines of `list_file`; relative paths resolve against its folder.
/// Throws ConfigError if it cannot be read or has no entry.
Dataset read_list(const std::string& list_file);

/// Figures of one progress report (after each batch, and while waiting).
struct Progress {
  std::uint64_t samples = 0;   // delivered by this process so far
  std::uint64_t expected = 0;  // samples the whole job consumes (delivered or failed)
  std::uint64_t failed = 0;
  double seconds = 0;  // since the job started
};

struct JobHooks {
  /// Each delivered batch: its sample ids and its tensor ([n, ...] uint8, valid during
  /// the call; copy the Tensor, a reference-counted view, to keep it).
  std::function<void(std::span<const std::uint64_t> ids, const media::Tensor& batch)> on_batch{};
  std::function<void(const Progress&)> on_progress{};  // at most every 100 ms
  const std::atomic<int>* interrupt = nullptr;         // a signal number once set
};

enum class JobEnd { finished, stopped, interrupted, already_complete };

struct JobSummary {
  JobEnd end = JobEnd::finished;
  std::uint64_t samples = 0;
  std::uint64_t batches = 0;
  std::uint64_t failed = 0;
  std::uint64_t filtered = 0;
  double seconds = 0;                // process start to the last batch
  double time_to_first_batch_s = 0;  // process start to the first batch
  double samples_per_s = 0;          // after the first batch
  std::string checkpoint{};          // the file written, if any
  actors::PipelineStats stats{};     // of the last epoch run
};

/// Runs the job. Throws actors::PipelineFailure (budget exceeded),
/// transport::CheckpointError (resume or save), ConfigError (a checkpoint that
/// conflicts with the sampling flags).
JobSummary run_job(const RunConfig& config, const Dataset& dataset, const JobHooks& hooks);

}  // namespace brigade::launch
