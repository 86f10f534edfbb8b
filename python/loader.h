#pragma once

// The C++ side of brigade.Loader (python/brigade/__init__.py wraps it): a launch::Job
// driven from Python, its batches exported through DLPack without a copy.
//
// SETTINGS. The job description's keys (launch/loader/job_settings.h), nothing else: a config file,
// then the keyword arguments (serialized by the wrapper as one more TOML document, so names, checks
// and messages are the config file's), then resolve() with the given environment (torchrun's
// RANK/WORLD_SIZE, Slurm's, as `brigade run`). Keys that only shape `brigade run`'s output (json,
// progress, ids_out, digests_out, stop_after_batches) are accepted and ignored, so that one file
// serves both: ignored_keys() lists those set. `normalize` without a device gives float32 batches,
// normalized in the decode stage (launch/loader/job_config.h); with one, on the device (DEVICE).
//
// BATCHES. next() returns one batch of the epoch as a dict: the job's pooled uint8
// (float32 with normalize) tensor ("data"), its ids ("ids"), when the dataset is labelled
// their labels ("label", int64, one per id: JobBatch::labels, handed over without a copy),
// with [[sources]] each sample's source ("source", int32: JobBatch::sources, the same way)
// and, when samples of the batch failed, their ids ("failed"). Each is a view holding the
// C++ buffer: the buffer goes back to the job's pool when the last holder
// (the ExportedTensor, or the DLPack capsule a consumer took from it, and the torch or numpy array
// made from that) is gone. Nothing is copied. With `meta` (a manifest's columns),
// "meta" is a dict, column name → list of the batch's values: ints when every value of
// that column in the whole dataset is an integer, floats when every one is a number,
// else str (decided once per column when the Loader is built, so a column's type is the
// same in every batch).
//
// DEVICE. With `device` ("cuda:N", or "cpu": the same path with host memory standing in
// for the GPU), the job copies each batch on its own stream from page-locked buffers
// (launch/loader/job.h, DEVICE) and "data" is exported where it is (python/tensor_export.h,
// STREAMS: torch.from_dlpack orders torch's current stream after the copy, no host
// wait); "ids" and "failed" stay on the host. The job keeps at most
// launch::kDeviceBatches (4) batches on the device, those Python holds included: a
// loop that keeps that many alive (a list of batches, a tensor kept without .clone())
// leaves the copy nothing to copy into, so next() raises std::logic_error (Python's
// RuntimeError) naming the cause instead of waiting for ever. Batches inside the Python
// stage count toward the job's bound too (the engine bounds them), not toward the
// loop's: only the device batches of results handed out are the loop's.
//
// EPOCHS. Each begin() is a new iteration (Python's iter()): it runs the epoch
// set_epoch() asked for, else the job's next one (Job::next_epoch), as
// torch's DataLoader with a DistributedSampler whose epoch the loop advances. An epoch
// left early (a `break`, or stop()) is abandoned by the next begin(), which then runs
// the epoch after it; state_dict() taken in between resumes the left epoch exactly
// where it was left (torchdata's StatefulDataLoader does the same). An iteration that
// has handed out nothing yet is continued, not abandoned (iter() called twice).
// Without `epochs` there is no epoch limit; with it, a begin() after the last epoch
// without set_epoch starts nothing and next() reports the end. A restored loader's
// first begin() continues the restored epoch.
//
// PYTHON STAGE (the slow path; "transform" is the C++ image transform's key). With a
// Python callable, each batch (the dict next() would return, as the converter made it)
// goes through it in the job's pipeline, as a stage of the engine named "python_stage"
// (launch/loader/job.h BatchStage): `stage_threads` calls at once on the engine's io
// threads, which take the GIL only around the call; results are handed out in batch
// order; the stage shows in stats() like any other and its batches are within the
// engine's in-flight bounds. The checkpoint covers exactly the batches handed out (the
// engine records the sampler's state as each batch reaches the consumer). What the
// callable raises is raised by next() in its batch's place.
//
// CHECKPOINTS. checkpoint_bytes() is a checkpoint file's bytes (Job::checkpoint_bytes)
// for the batches handed out. restore() rebuilds the job from one rank's file of the
// same world size (exact resume) or from every rank's files of one save (elastic
// resume at any world size): launch::checkpoint_from_files. Both between epochs or
// mid-epoch; an epoch in progress is stopped first.
//
// THREADING. One Python thread drives a Loader (the wrapper's iterator); every method
// is called with the GIL held and releases it while C++ works or waits. stop() may
// be called from any thread.

#include <pybind11/pybind11.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launch/loader/job.h"

namespace brigade::python {

/// What the settings are built from (see SETTINGS).
struct LoaderSettings {
  std::string config_file{};    // a TOML file, or empty
  std::string keywords_toml{};  // the keyword arguments as a TOML document
  std::string keywords_name{};  // how errors name that document ("brigade.Loader")
  bool demo = false;            // without data or list: the synthetic demo set (else a ConfigError)
  std::vector<std::pair<std::string, std::string>> environment{};  // launch variables
};

class Loader {
 public:
  /// Reads the settings and the dataset and builds the job. Throws launch::ConfigError.
  /// `converter(ExportedTensor) -> object` makes what batches hold (None: the
  /// ExportedTensor itself); `stage(batch) -> object` (None: none), see PYTHON STAGE.
  Loader(const LoaderSettings& settings, pybind11::object converter, pybind11::object stage,
         int stage_threads);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  const launch::RunConfig& config() const { return job_->config(); }
  const std::vector<std::string>& ignored_keys() const { return ignored_; }
  const launch::Dataset& dataset() const { return job_->dataset(); }

  /// The epoch the next begin() runs (see EPOCHS). Any time: an epoch in progress is
  /// abandoned by that begin().
  void set_epoch(std::uint64_t epoch);
  /// The epoch the next begin() runs (or the one in progress).
  std::uint64_t epoch() const;
  /// A new iteration (see EPOCHS). Returns whether an epoch is in progress afterwards.
  bool begin();
  /// The next batch (a dict, or the Python stage's result), or None at the epoch's end.
  /// Throws actors::PipelineFailure once the failure budget is exceeded; rethrows what
  /// the Python stage raised.
  pybind11::object next();
  /// Ends the iteration in progress as a `break` would (any thread, no GIL needed): the
  /// driving thread's next() sees it within 100 ms (or at its next call) and reports
  /// the end; batches in the Python stage are dropped. state_dict() then covers exactly
  /// the batches handed out; the next begin() runs the next epoch (EPOCHS).
  void stop();

  /// Batches of the epoch in progress in all, else of the one the next begin() runs
  /// (a restored epoch: those left), at most (see __len__).
  std::uint64_t batches_in_epoch() const;

  std::vector<std::byte> checkpoint_bytes();
  /// Rebuilds the job from checkpoint files (see CHECKPOINTS). Throws
  /// launch::CheckpointError, launch::ConfigError.
  void restore(const std::vector<std::vector<std::byte>>& files);

  launch::JobCounts counts() const { return job_->counts(); }
  actors::PipelineStats stats() const { return job_->stats(); }

  /// Writes state into checkpoint_dir (Job::write_checkpoint), as `brigade run` does.
  std::string write_checkpoint();

 private:
  using Held = std::vector<std::weak_ptr<void>>;  // one token per device batch exported
  /// The batch as Python sees it (a dict); the tokens of its device batches go to `held`.
  pybind11::object to_python(launch::JobBatch batch, Held& held);
  std::shared_ptr<void> run_stage(launch::JobBatch batch);  // on the engine's threads
  std::size_t held_device_batches();  // device batches the loop keeps alive (DEVICE)
  std::optional<launch::JobBatch> next_job_batch();
  void abandon();  // leaves the epoch in progress (EPOCHS)
  /// After the job's last epoch, rank 0 hosting the directory keeps it until every
  /// rank has subscribed, at most launch::kDirectoryHold (run_job's rule: a rank that
  /// starts after this one's loop ended, and its process with it, would find none).
  /// Once per job; Ctrl-C ends the wait (KeyboardInterrupt).
  void hold_directory();

  enum class MetaType : char { text, integer, real };
  launch::RunConfig config_{};
  std::vector<MetaType> meta_types_{};  // per metadata column (BATCHES)
  std::vector<std::string> ignored_{};
  launch::BatchStage stage_{};  // the Python stage (none without a callable)
  // Whether batches carry labels: read by to_python() on the engine's threads too,
  // which must not touch job_ (replaced by restore(), reset by the destructor).
  bool labelled_ = false;
  bool mixed_ = false;  // a mix of sources: batches carry "source" (JobBatch::sources)
  std::unique_ptr<launch::Job> job_;
  std::uint64_t handed_in_epoch_ = 0;  // batches handed out of the epoch in progress
  pybind11::object converter_, stage_fn_;
  std::atomic<bool> stop_requested_{false};
  bool held_directory_ = false;  // hold_directory() ran for this job
  bool epoch_ended_ = false;     // the job's epoch ended, or stop() ended this iteration
  std::optional<std::uint64_t> requested_epoch_{};
  Held held_{};  // of the batches handed out
};

}  // namespace brigade::python
