#pragma once

// The job of `brigade run` (and of the Python Loader): a distributed sampler over a
// file list → "read" (io stage, one sample per task: the file's bytes) → "batch"
// (groups batch_size samples in sampler order) → "decode" (cpu stage, one batch per
// task: every sample decoded straight into its slot of one pooled batch tensor, see
// launch/loader/decode.h) → the consumer. One pipeline shape for both output orders; a
// remote run replaces "read" + "decode" with one stage that hands each batch's
// sample ids and paths to remote decode workers (see REMOTE below).
//
// BATCHES. Batch k of an epoch holds the rank's samples k·n … k·n+n-1 in sampler
// order (n = batch_size; the last batch may be short, or dropped with `drop_last`); a
// sample that fails to read or decode is left out of its batch and listed in
// JobBatch::failed, the good ones compacted to the front. A batch whose every sample
// failed is still delivered, empty (0 samples, the batch's dtype and sample shape, on
// the host also with a device), so that every rank delivers the same number of
// batches whatever fails where (EVEN RANKS).
//
// EVEN RANKS. With `tail` pad (the default) or drop every rank owns the same number of
// samples in an epoch (actors/sampler.h: pad repeats samples from the start of the
// epoch's sequence, as torch's DistributedSampler; drop leaves the tail out), so every
// rank delivers the same number of batches, also with `drop_last`: what a synchronous
// training step (DDP's all-reduce) needs. `tail` none delivers every sample exactly
// once and shares differ by one sample (evaluation, where results are gathered). After
// an elastic resume at another world size the resumed epoch's remaining shares differ
// by at most one sample (actors::repartition); later epochs are even again. The read stage always
// keeps input order, so a batch's contents never depend on timing; `order` applies to the decode
// stage: with `input` batches leave in sampler order, with `completion` as they finish. An epoch's
// batches are deterministic given (seed, epoch, world size, rank), so the same job gives the same
// batches locally, remotely, and after an exact resume.
//
// FAILURES. A sample that fails is reported to the engine (TaskContext::fail) with
// its typed cause: the engine's counts, budget, hooks and statistics see it, and the
// job's budget is the engine's, over the whole job. `max_failures = N%` becomes a
// count when the job starts: floor(N% × the samples this process will consume), so a
// rate is enforced from the first sample on, at any dataset size (20 files with 0%:
// the first failure fails the job). A transient read error (EAGAIN, a timeout) is
// retried with backoff (kReadAttempts, kReadBackoff) before it fails its sample; a
// corrupt or missing file fails at once. A failure budget exceeded ends next() with
// actors::PipelineFailure naming the recent causes.
//
// CHECKPOINTS. state() is this rank's SamplerState for exactly the batches next() has
// returned (and the failures and filtered samples among them); write_checkpoint()
// writes it to `checkpoint_dir` as the next generation of the set this job continues.
// A restored job (resume_from, or JobOptions::resume) continues the restored epoch
// where it stopped; a state whose epoch is complete starts the next epoch.
//
// DEVICE. With `device` set, a last stage ("to_device", io, concurrency 1) copies each
// batch to the device on its own queue (transport/device/device_copy.h): batches are decoded
// straight into page-locked buffers of a pool sized to the pipeline (one host copy)
// while that pool, (3 × max(decode concurrency, remote tasks) + 8) full batches, fits
// `pinned_direct_mib` (default 1 GiB); a bigger job decodes into ordinary memory and the
// copy stage stages each batch through kPinnedStaging pinned buffers (one host memcpy
// more, on the copy stage's thread): pinned memory per rank is at most
// max(pinned_direct_mib, 3 full batches). JobBatch::device holds the batch on the device
// (JobBatch::data is then empty), normalized there when `normalize` is set (the host batch is then
// NHWC uint8, and `layout` is the normalized batch's). The consumer waits for a batch — wait(), or
// use_on(its stream) — and nothing else does; run_job's consumer waits before each
// on_batch. At most kDeviceBatches batches are on the device at once (the one the
// consumer holds included): that bound is the copy stage's backpressure. Batches, on
// the host or the device, may outlive their Job, also one destroyed mid-epoch.
//
// REMOTE. With `workers` or a `directory` (RunConfig::remote()), the pipeline is
// source → batch → "remote_decode" (io, `remote_inflight` batches at once, default 16)
// → [to_device]: each task sends the batch's ids and paths to a worker node through a
// transport::RemotePool (its own actor system) and lands the worker's DecodedBatch in
// a pooled buffer with one copy (launch/loader/remote_ops.h: checks, retries, fallback). The
// samplers, checkpoints, budget and order are those of a local run, and with the same
// seed a remote batch is byte-identical to a local one (the same decode_batch runs on
// the worker). Exactly once: the engine commits a position when its batch is
// delivered, and the pool accepts one result per attempt, so a batch sent again after
// a loss is delivered once. Rank 0 hosts the directory (hosts_directory()). Before the
// first epoch the job waits up to 5 s for a worker. With on_no_workers = local the
// trainer decodes batches itself while no worker is live; with fail, next() throws
// actors::PipelineFailure naming the lost workers once none has been live for
// kNoWorkerGrace (5 s).
//
// HYBRID (decode = hybrid, with remote workers). The remote stage's task decodes its
// batch here when one of this rank's decode_concurrency local slots is free, and sends
// it to the workers only when every slot is busy: the rank decodes at its own pace and
// the workers take what it cannot keep up with (a slow rank sends more). While no
// worker is live a task waits for a local slot, or until one is live (looked at every
// 100 ms): on_no_workers does not apply, and the first epoch does not wait for a worker. A batch
// decoded here is read and decoded as the local pipeline does (the same decode into the same
// buffers, a transient read error retried kReadAttempts times, every failure reported with its own
// cause), so batches are byte-identical whichever side decoded them, and the samplers, checkpoints
// and exact resume are the remote run's. RemoteSummary:: decoded_here counts the samples decoded in
// local slots.
//
// REBALANCING (rebalance = on, on rank 0 hosting the directory, with cluster
// statistics: launch/run_statistics.h). At each closed interval rank 0 turns the
// ranks' figures into per-rank weights (RankWeights below) and the directory sends them
// to every worker, which serves its sessions in proportion to their rank's weight
// (transport/remote/remote.h SESSIONS AND FAIRNESS): the rank that falls behind gets
// its tasks served first, the others share the rest evenly, and no rank has more than
// its credit window on a worker. With hybrid decode, that rank's local share is what
// it decodes itself, and the workers make up the difference.
//
// MIXING. With [[sources]] (RunConfig::sources) the dataset is the sources' joined
// dataset (Dataset::join, open_dataset) and the sampler a weighted mix of them
// (launch/loader/detail/job_sampling.h): an epoch is N draws in all (epoch_samples, else
// the sum of the sources' sizes), each rank drawing ceil(N / W), so every rank delivers
// the same number of batches; a draw picks source i with probability weight_i / Σ
// weights and yields that source's next sample (each source in its own shuffled order,
// starting over when it runs out). JobBatch::sources says which source each sample came
// from; its label is its own source's class index (sources do not share classes).
// Checkpoints hold the mix's state (actors::MixState): exact resume, and elastic resume
// at another world size (the draws left are cut among the new ranks; later epochs are
// N draws again). A remote worker reads a sample by its location as for one dataset.
//
// THREADING. A Job is driven by one thread (next(), begin_epoch(), state()); stop()
// may be called from any thread.

#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "actors/mixer.h"
#include "actors/sampler.h"
#include "actors/stats.h"
#include "launch/loader/dataset.h"
#include "launch/loader/decode.h"
#include "launch/loader/job_config.h"
#include "media/tensor.h"
#include "transport/checkpoint/checkpoint.h"
#include "transport/device/device_copy.h"
#include "transport/remote/remote.h"

namespace brigade::launch {

/// Batches on the device at once with `device` set (see DEVICE).
inline constexpr std::size_t kDeviceBatches = 4;
/// Pinned staging buffers of a device job over its pinned_direct_mib (see DEVICE).
inline constexpr std::size_t kPinnedStaging = 3;
/// RunConfig::epochs for a job without an epoch limit (the Python Loader's default):
/// finished() is never true, and a rate budget counts over the epochs begun so far.
inline constexpr std::uint64_t kUnlimitedEpochs = ~std::uint64_t{0};

/// The job's sampler for `config` (resolved) over `dataset`: random with the seed when
/// shuffling (over tar shards with shuffle_window W > 0: actors::DistributedBlockSampler,
/// W shards at a time), else deterministic; rank and world size from the config; the dataset's
/// identity hash (identities, and labels when labelled) fingerprints it (checkpoints).
std::unique_ptr<actors::DistributedSampler> make_sampler(const RunConfig& config,
                                                         const Dataset& dataset);

/// A job's checkpoint state: its sampler's, or its mix's (MIXING).
using JobState = std::variant<actors::SamplerState, actors::MixState>;
/// A loaded checkpoint of either kind, to resume a job from (JobOptions::resume).
using JobResume = std::variant<transport::LoadedCheckpoint, transport::LoadedMixCheckpoint>;
/// The epoch a state is in.
std::uint64_t epoch_of(const JobState& state);

/// A delivered batch.
struct JobBatch {
  std::uint64_t epoch = 0;
  std::vector<std::uint64_t> ids;  // ids[i] is the sample in data[i]
  // labels[i] is sample ids[i]'s label (Dataset::label) when the dataset is labelled;
  // else empty
  std::vector<std::int64_t> labels{};
  // sources[i] is the source (index into RunConfig::sources) of sample ids[i] in a mix
  // (MIXING); else empty
  std::vector<std::int32_t> sources{};
  // With `meta` (RunConfig::meta, a manifest's columns): meta[c][i] is sample ids[i]'s
  // text in column config.meta[c] (Dataset::meta), copied; else empty. Only what was
  // asked for travels: no column, no cost.
  std::vector<std::vector<std::string>> meta{};
  // [ids.size(), ...] uint8 (float32 with normalize and no device); empty with a device
  media::Tensor data;
  std::vector<std::uint64_t> failed{};  // samples of this batch that failed (not in data)
  transport::DeviceBatch device{};      // with a device: the batch there (see DEVICE)
  /// With a BatchStage (JobOptions::stage): what it returned for this batch (data and
  /// device are then empty; ids and failed stay).
  std::shared_ptr<void> staged{};
  /// What the BatchStage threw for this batch, on its way to next(), which rethrows it:
  /// a batch next() returns never holds one.
  std::exception_ptr stage_error{};
};

enum class JobStatus { batch, timeout, epoch_end };

struct JobNext {
  JobStatus status = JobStatus::epoch_end;
  std::optional<JobBatch> batch{};
};

/// Totals of the batches next() has returned (committed work), over the whole job.
struct JobCounts {
  std::uint64_t samples = 0;
  std::uint64_t batches = 0;
  std::uint64_t failed = 0;
  std::uint64_t filtered = 0;
};

/// What a remote run's pool did (see REMOTE).
struct RemoteSummary {
  transport::PoolStats pool{};
  std::uint64_t attempts_lost = 0;       // task attempts lost (each sent again, or failed)
  std::uint64_t decoded_locally = 0;     // samples decoded here for want of a worker
  std::uint64_t decoded_here = 0;        // samples decoded in hybrid's local slots
  std::vector<std::uint32_t> weights{};  // the last rank weights sent (REBALANCING)
};

/// REBALANCING's rule, a plain state machine fed one interval at a time with each rank's
/// cumulative figures as its latest report gave them (Progress: samples delivered and
/// exposed wait since its reporter started, at that report's time). A rank's RATE and
/// WAIT SHARE are those of its last kWindow intervals (differences of the cumulative
/// figures over the time between the reports: a report that arrived late or replaced
/// another loses nothing); it is judged once it has kWindow intervals of them (over a
/// half window one interval at a quarter of the others' put a rank 30% behind for as
/// long as it stayed in the window, beyond what intervals in a row guard against). Its
/// PRESSURE is (the median rate of the other ranks judged ÷ its own), and, where the
/// others' median wait share is below kLockstepWait, × ((its wait share + 0.05) ÷ (the
/// others' median + 0.05)): ranks that do not wait for each other differ in rate; ranks
/// in lockstep, as DDP's all-reduce keeps them, deliver alike, the others seldom wait on
/// data and a rank that does holds them back. Where the others wait on data most of the
/// time too, every rank is data-bound and the shares' ratio is noise (4 ranks of
/// bench/rebalance.py: waits 0.6 to 1.0 everywhere, and with the factor the rule weighed
/// ranks that ran at the others' pace). A pressure above 1 + kDeadband is BEHIND.
/// - A rank at kNeutralWeight gains weight only once it has been behind kBehindIntervals
///   intervals in a row (a straggler that persists, as the analyzer's `consecutive`
///   names one: launch/loader/cluster_stats.h).
/// - From then on (its weight above neutral: a straggler being helped) its weight is
///   multiplied each interval by pressure^kGain, behind or ahead: an integral controller
///   that settles on the weight at which the rank keeps pace (the gain, a quarter, is
///   small because the window's rate answers a change of weight only over the window; a
///   half overshot). A rank that recovers (its hog gone) is ahead with the weight it has,
///   so the weight falls back, to exactly kNeutralWeight once within 5% of it; the rank
///   must then be behind kBehindIntervals in a row again to gain any.
/// - The other ranks keep kNeutralWeight exactly: they share the workers evenly, and
///   noise moves nobody. Weights are at most kMaxWeight.
/// Why a window of cumulative figures: per-interval rates are noise on a shared
/// machine. Rank 0's figures of 4 ranks of bench/rebalance.py (1 s intervals, 2 loaded
/// cores, epochs of 500 samples per rank delivered in bursts) went from 0 to 880
/// samples/s interval to interval, ranks whose runs ended within 3.5% of each other were
/// 20% apart in 2 intervals out of 3, and the rule on single intervals (gated by 2 in a
/// row or not) weighed the wrong ranks: spread 1.49 with rebalancing against 1.06
/// without. Replayed through this rule, the same recorded runs weigh nobody where the
/// ranks ran alike, and only the rank slowed by the hogs where one was slower.
/// A rank without a report in the interval keeps its weight, and its count of intervals
/// behind restarts; a rank whose figures went backwards (a restarted reporter) starts
/// its window anew.
class RankWeights {
 public:
  static constexpr std::uint32_t kNeutralWeight = transport::kNeutralRankWeight;
  static constexpr std::uint32_t kMaxWeight = 16 * kNeutralWeight;
  static constexpr int kWindow = 8;
  static constexpr int kBehindIntervals = 2;
  static constexpr double kDeadband = 0.2;
  static constexpr double kGain = 0.25;
  static constexpr double kLockstepWait = 0.5;
  /// A rank's cumulative figures (launch/loader/cluster_stats.h RankReport:
  /// samples_total, exposed_wait_total_s, at_s).
  struct Progress {
    double samples = 0, wait_s = 0, at_s = 0;
  };
  explicit RankWeights(std::uint32_t world_size);
  /// One closed interval: each rank's latest Progress, or nullopt where no report of it
  /// arrived. Returns the weights by rank.
  const std::vector<std::uint32_t>& update(const std::vector<std::optional<Progress>>& ranks);
  const std::vector<std::uint32_t>& weights() const { return rounded_; }

 private:
  struct Rank {
    std::deque<Progress> window;  // at most kWindow + 1 reports, oldest first
    double weight = kNeutralWeight;
    int behind = 0;  // intervals in a row behind
  };
  std::vector<Rank> ranks_;
  std::vector<std::uint32_t> rounded_;
};

/// The read stage's retries of a transient read error (EAGAIN, a timed-out read on a
/// network file system: media::ErrorCode::unavailable, actors::is_transient): at most
/// kReadAttempts reads in all, waiting kReadBackoff, then twice as long, between
/// them; the last failure fails the sample. A corrupt, missing or unreadable file is
/// read once. The stage's statistics count the retries.
inline constexpr int kReadAttempts = 4;
inline constexpr std::chrono::milliseconds kReadBackoff{20};

/// The job's checkpoint error (transport/checkpoint/checkpoint.h): a file that cannot be
/// read, written or decoded, or a set that does not fit the job; kind() says which.
using transport::CheckpointError;
using transport::CheckpointErrorKind;

/// Where a job resumes, read from checkpoint files' bytes (checkpoint_bytes() of each
/// rank, as a Python state_dict keeps them) for rank `rank` of `world_size`: with one
/// save's files at the same world size, the file of `rank` among them (exact resume);
/// at another world size, every rank's file of that save, re-partitioned
/// (actors::repartition: elastic resume). A sampler's files or a mix's (all of one kind). Throws
/// CheckpointError: `mismatched` for no file, files of different saves, or no file of `rank`;
/// `incomplete` for an elastic resume that lacks a rank's file; a decoding error names the file's
/// index.
JobResume checkpoint_from_files(std::span<const std::vector<std::byte>> files, std::uint32_t rank,
                                std::uint32_t world_size);

/// A stage of the consumer's own (the Python Loader's Python stage), run on each batch
/// inside the job's pipeline, after the decode (and to_device): the engine runs it
/// (`concurrency` tasks at once on io threads, one batch queued), counts it (a stage
/// named `name` in stats()), bounds it (its batches are within the pipeline's memory
/// bound and the device's kDeviceBatches) and delivers its results in batch order.
/// The sampler state is recorded as each batch reaches the consumer, so state() and
/// checkpoints cover exactly the batches next() has returned, however many are in the
/// stage.
struct BatchStage {
  /// Takes a delivered batch, returns what next() hands out in JobBatch::staged.
  /// Called concurrently (it must be thread-safe). An exception it throws is rethrown
  /// by next() in its batch's place (the batch counts as delivered); stop() waits for
  /// the calls running.
  std::function<std::shared_ptr<void>(JobBatch)> run{};
  int concurrency = 1;  // 1 to kMaxConcurrency
  std::string name = "batch_stage";
};

struct JobOptions {
  /// Start from this checkpoint instead of `resume_from` (e.g. a Python state_dict:
  /// checkpoint_from_files()); its fingerprint must match the job's sampling.
  std::optional<JobResume> resume{};
  /// Reads a sample's bytes instead of media::read_file (a test's fault injection);
  /// it reports failure by throwing, as media::read_file does (media::MediaError).
  ReadFile read_file{};
  /// A stage of the consumer's own after the decode (none without `run`).
  BatchStage stage{};
};

class Job {
 public:
  /// Builds the sampler, restores `resume_from` (or options.resume), checks that
  /// `checkpoint_dir` is writable and belongs to this job (a fresh run into another
  /// run's folder is refused: see transport/checkpoint/checkpoint.h JOBS AND RUNS), builds the
  /// pipeline; starts nothing. Throws ConfigError (bad settings, a checkpoint or a
  /// checkpoint folder that conflicts with them), transport::CheckpointError.
  Job(RunConfig config, Dataset dataset, JobOptions options = {});
  ~Job();
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  const RunConfig& config() const;
  const Dataset& dataset() const;

  /// The epoch begin_epoch() starts by default: the restored one, then each next.
  std::uint64_t next_epoch() const;
  /// Whether every epoch of the job (config.epochs) has been delivered.
  bool finished() const;
  /// Starts an epoch: `epoch`, or next_epoch(). A restored job's first call continues
  /// the restored epoch (unless another epoch is given: set_epoch semantics).
  void begin_epoch(std::optional<std::uint64_t> epoch = std::nullopt);
  bool in_epoch() const;

  /// The next batch of the epoch, a timeout, or the epoch's end. A batch whose every
  /// sample failed is returned empty (see BATCHES). Throws actors::PipelineFailure once
  /// the failure budget is exceeded, and what a BatchStage threw at its batch's place.
  JobNext next(std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  /// Stops the epoch in progress: queued work is dropped, running tasks see the stop
  /// token and are joined. Any thread.
  void stop();
  /// Leaves the epoch in progress (a consumer that stopped iterating it early): stops
  /// the pipeline; the next begin_epoch() starts the epoch after it. Take state() first
  /// to resume the left epoch where it was left. No-op between epochs.
  void abandon_epoch();
  /// Batches the next begin_epoch() delivers (or the epoch in progress delivers in
  /// all), at most: its samples for this rank (a restored epoch's: those not yet
  /// committed) in batches of batch_size, without a partial one with drop_last.
  std::uint64_t batches_in_epoch(std::optional<std::uint64_t> epoch = std::nullopt) const;

  /// This rank's checkpoint state for what next() has returned (see CHECKPOINTS).
  JobState state() const;
  /// Writes state() (or `state`, one of this job's earlier states) into
  /// config.checkpoint_dir as the next generation of this run's set
  /// (transport/checkpoint/checkpoint.h), pruning to keep_checkpoints sets. Returns the file.
  /// Throws transport::CheckpointError.
  std::filesystem::path write_checkpoint(const std::optional<JobState>& state = std::nullopt);
  /// state() (or `state`, one of this job's earlier states) as the bytes of a checkpoint
  /// file of this run (the next generation), for callers that store it themselves (a
  /// Python state_dict; checkpoint_from_files() reads it back).
  std::vector<std::byte> checkpoint_bytes(const std::optional<JobState>& state = std::nullopt);

  JobCounts counts() const;
  /// The samples this process consumes over the job (delivered or failed), as planned.
  std::uint64_t expected_samples() const;
  actors::PipelineStats stats() const;  // of the epoch in progress (or the last)
  /// With remote workers: the pool's figures so far. Any thread.
  std::optional<RemoteSummary> remote_summary() const;
  /// REBALANCING: the ranks' figures at the close of one interval on rank 0 (by rank;
  /// launch/run_statistics.h). With rebalance on, on the rank hosting the directory,
  /// updates the weights and has the directory send them to the workers; does nothing
  /// otherwise. Thread-safe (the statistics' thread calls it).
  void rebalance(const std::vector<std::optional<RankWeights::Progress>>& ranks) const;
  /// Rank 0 hosting the directory: waits at most `timeout` until every rank
  /// (world_size trainers, this one included) has subscribed to it; true once they have,
  /// and at once for a job that hosts none. A rank that finishes before another has
  /// started keeps the directory up this way (run_job: at most kDirectoryHold).
  bool wait_for_ranks(std::chrono::milliseconds timeout) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// -- `brigade run`: the job driven to its end ------------------------------------

/// Figures of one progress report (after each batch, and while waiting).
struct Progress {
  std::uint64_t samples = 0;   // delivered by this process so far
  std::uint64_t expected = 0;  // samples the whole job consumes (delivered or failed)
  std::uint64_t failed = 0;
  double seconds = 0;  // since the job started
};

struct JobHooks {
  /// Each delivered batch (valid during the call; copy the Tensor, a reference-counted
  /// view, to keep it).
  std::function<void(const JobBatch&)> on_batch{};
  std::function<void(const Progress&)> on_progress{};  // at most every 100 ms
  const std::atomic<int>* interrupt = nullptr;         // a signal number once set
  /// Called once the job has stopped and its state is saved but before the pipeline
  /// is joined: a blocked stage cannot delay what the consumer has to write (ids).
  std::function<void()> on_saved{};
  /// Where the run's clock starts (the program's start); default: run_job's entry.
  std::optional<std::chrono::steady_clock::time_point> origin{};
  /// Stop once this process delivered this many batches (across epochs); < 0: run to
  /// the end (`brigade run --stop-after-batches`).
  std::int64_t stop_after_batches = -1;
  /// Called once with the job before its first epoch, for a reader of its figures on
  /// another thread (stats() and remote_summary() may be called from any thread; the
  /// pointer keeps the job alive): `brigade run`'s statistics reporter.
  std::function<void(std::shared_ptr<const Job>)> on_job{};
};

/// How long run_job keeps a finished rank 0's directory for ranks yet to subscribe
/// (an interrupt ends the wait).
inline constexpr std::chrono::seconds kDirectoryHold{10};

enum class JobEnd { finished, stopped, interrupted, already_complete, failed };

struct JobSummary {
  JobEnd end = JobEnd::finished;
  JobCounts counts{};
  double startup_s = 0;                   // from the origin to the first epoch's start
  double seconds = 0;                     // from the origin to the last batch
  double time_to_first_batch_s = 0;       // from the origin to the first batch
  double samples_per_s = 0;               // after the first batch
  std::string checkpoint{};               // the file written, if any
  std::string failure{};                  // why the job failed (JobEnd::failed)
  actors::PipelineStats stats{};          // of the last epoch run
  std::optional<RemoteSummary> remote{};  // a remote run's pool figures
  /// A stage stayed blocked after the stop (a read that never returns): it was left
  /// running, and the caller must end the process without joining it (_exit).
  bool abandoned = false;
};

/// Runs the job over its epochs until the end, hooks.stop_after_batches, an interrupt or
/// a failure; writes the checkpoint (also after a failure) when checkpoint_dir is set.
/// A failure budget exceeded ends with JobEnd::failed and the cause (not a throw).
/// Throws ConfigError, transport::CheckpointError.
JobSummary run_job(const RunConfig& config, const Dataset& dataset, const JobHooks& hooks);

}  // namespace brigade::launch
