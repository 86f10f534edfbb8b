#pragma once

// Checkpoint files of the samplers and mixes: one file per rank and save, written
// atomically, kept by generation, loaded as a complete set for the same or a
// different world size (elastic resume), and tied to one job.
//
// FILES. A save of rank R of W writes
//     DIR/gen-<G>.job-<J>.run-<U>.rank-<R>-of-<W>.ckpt     (J, U: 16 hex digits)
// holding the rank's SamplerState (actors/sampler.h) or MixState (actors/mixer.h) as
// the Cap'n Proto messages of transport/checkpoint/checkpoint.capnp, with a CRC-32 of the state's
// bytes; the file repeats G, J, U, R and W, and a file whose contents contradict its
// name is refused. The format is stable and versioned (SamplerState::kFormatVersion).
// write_checkpoint() writes `.<name>.tmp-<pid>` in DIR, fsyncs it, renames it to
// <name> and fsyncs DIR (LevelDB's SetCurrentFile): a reader sees the whole file or
// none. A write that fails removes its temporary file; loaders ignore temporary
// files; check_checkpoint_dir() removes this rank's stale ones (from a crash) and
// pruning removes those of pruned generations.
// LEGACY LAYOUT. DIR/rank-<R>-of-<W>.ckpt files, written before generations existed
// (format version 1), are still loaded (migration): they belong to job 0 (run 0) and
// carry their generation inside. A run resumed from them continues job 0 in the new
// layout, and pruning removes the legacy files like any older generation.
//
// GENERATIONS AND SETS. All ranks of one save write the same generation G (the
// caller's counter: RunId::first_generation for a run's first save, + 1 for each
// later one). A set is complete when DIR holds rank 0 … W-1 of W of one generation,
// written by one run. Nothing is overwritten: a new generation is written beside the
// older ones, so a crash of one rank mid-save leaves the previous complete set
// intact, loadable at any world size. load_checkpoint() takes the newest complete
// set of the directory's job. After each write, the writer prunes: when DIR holds at
// least `keep` complete sets, every file (and temporary file) of a generation older
// than the keep-th newest complete set goes; the newest complete set and anything
// newer are never pruned. Each rank removes the files of rank indices ≡ R (mod W),
// and the rank whose file completes a set removes all of them, so that after a
// completed save DIR holds `keep` complete sets and what is newer.
//
// JOBS AND RUNS. A set belongs to one job: a fresh run and every run resumed from it,
// in any directory. Every file carries the job's id J and the id U of the run that
// wrote it; ranks compute both without talking to each other:
//   fresh run    J = U = a hash of the sampling fingerprint, the world size and
//                `launch` (fresh_run());
//   resumed run  J = the loaded set's job, U = a hash of the loaded set's run and
//                generation, the new world size and `launch` (resumed_run()).
// `launch` is whatever all ranks of one launch share and another launch does not —
// the launcher's job id (SLURM_JOB_ID.SLURM_STEP_ID, TORCHELASTIC_RUN_ID) — or empty.
// The same string on every rank, else the ranks' sets never complete.
// check_checkpoint_dir() enforces, before a run writes anything:
//   - a fresh run refuses a DIR holding any checkpoint file other than those of this
//     very run written by other ranks (ranks may run one after the other): another
//     job's, a resumed run's, or this rank's own (then from an earlier run);
//   - a resumed run refuses a DIR holding another job's files, or a complete set of
//     its own job from another run at a generation it would write (a divergent branch
//     that a later resume would take instead of this run's saves).
// load_checkpoint() refuses a DIR holding files of more than one job (it cannot tell
// which one the caller means), so a stale newer generation of another job is never
// taken. Without `launch`, two launches with equal settings are the same run as far
// as the files can tell: a fresh run with this rank's file already in DIR is refused,
// but if an earlier equal run left only other ranks' files (it crashed before this
// rank saved), or an earlier resume of the same set at the same world size crashed
// mid-save, its files count as this run's for the ranks that have not saved yet.
// Each such file is a valid state of its rank within the same job, so a set mixing
// them still resumes every rank from a state of that rank; `launch` rules it out.
//
// THE JOB'S CALLS.
//   start, fresh:    RunId run = fresh_run(sampler.fingerprint(), W, launch);
//                    check_checkpoint_dir(dir, run, R, W);           // io, conflict
//   start, resumed:  auto loaded = load_checkpoint(from, R, W, {.expected = …});
//                    sampler.restore(loaded.state);   // also when remaining() == 0
//                    RunId run = resumed_run(loaded, W, launch);
//                    check_checkpoint_dir(dir, run, R, W);           // io, conflict
//   save (k-th, from 0):
//                    write_checkpoint(dir, sampler.state(committed,
//                                     run.first_generation + k), {.run = run});   // io
//
// ERRORS. Every problem is a CheckpointError with a kind, the file (or DIR) and the
// reason. A file of the chosen set that is not a valid checkpoint (truncated, flipped
// bytes, another format) fails the load — a damaged file is never skipped silently.
//
// THREADING. The functions are thread-safe for different files; concurrent writers of
// one rank's file must be serialized by the caller.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "actors/mixer.h"
#include "actors/sampler.h"

namespace brigade::transport {

/// Why a checkpoint could not be written or loaded.
enum class CheckpointErrorKind {
  io,          // the file system refused (errno text in the reason)
  not_found,   // no checkpoint files in the directory
  corrupt,     // not a checkpoint: truncated, bad magic, checksum mismatch, bad message
  version,     // a format version this build does not read
  mismatched,  // files of one set disagree, or a file's contents contradict its name
  incomplete,  // no complete set: a rank file is missing or holds another generation
  conflict,    // the caller's parameters or job differ from the checkpoint's (see JOBS)
};

const char* to_string(CheckpointErrorKind kind);

class CheckpointError : public std::runtime_error {
 public:
  /// what() reads "<file>: <kind>: <reason>".
  CheckpointError(CheckpointErrorKind kind, std::filesystem::path file, const std::string& reason);
  CheckpointErrorKind kind() const { return kind_; }
  const std::filesystem::path& file() const { return file_; }
  const std::string& reason() const { return reason_; }

 private:
  CheckpointErrorKind kind_;
  std::filesystem::path file_;
  std::string reason_;
};

/// Which job and run write a checkpoint (see JOBS AND RUNS). Plain data.
struct RunId {
  std::uint64_t job = 0;
  std::uint64_t run = 0;
  std::uint64_t first_generation = 1;  // of this run's first save
  bool resumed = false;
  friend bool operator==(const RunId&, const RunId&) = default;
};

/// "gen-<G>.job-<J>.run-<U>.rank-<R>-of-<W>.ckpt".
std::string checkpoint_file_name(std::uint64_t generation, const RunId& run, std::uint32_t rank,
                                 std::uint32_t world_size);

/// The bytes of a checkpoint file for `state`, stamped with `run`'s ids.
std::vector<std::byte> encode_checkpoint(const actors::SamplerState& state, const RunId& run = {});
std::vector<std::byte> encode_checkpoint(const actors::MixState& state, const RunId& run = {});

/// A decoded checkpoint file: a sampler's or a mix's state, and who wrote it.
struct DecodedCheckpoint {
  std::optional<actors::SamplerState> sampler{};  // exactly one of the two is set
  std::optional<actors::MixState> mix{};
  std::uint64_t job = 0;
  std::uint64_t run = 0;
  std::uint64_t generation() const;
  std::uint32_t rank() const;
  std::uint32_t world_size() const;
};

/// Parses the bytes of a checkpoint file; `file` names it in errors. Throws
/// CheckpointError (corrupt, version). Robust against arbitrary bytes.
DecodedCheckpoint decode_checkpoint_file(std::span<const std::byte> bytes,
                                         const std::filesystem::path& file);
/// The same for a sampler's file (a mix's file is `corrupt` here).
actors::SamplerState decode_checkpoint(std::span<const std::byte> bytes,
                                       const std::filesystem::path& file);

/// Options of write_checkpoint().
struct WriteOptions {
  /// fsync the file and DIR. Without it the rename is still atomic for readers and
  /// against a crash of the process, not against one of the machine (LevelDB's
  /// WriteOptions::sync); for tests and scratch directories.
  bool sync = true;
  /// The writing run (job 0, run 0 when not given: tests and tools).
  RunId run{};
  /// Complete sets kept by pruning (GENERATIONS AND SETS); 0 keeps every file.
  std::uint32_t keep = 2;
};

/// Writes this rank's file of generation state.generation atomically (see FILES),
/// creating DIR, then prunes. Returns the file's path. Throws CheckpointError (io),
/// leaving no temporary file behind.
std::filesystem::path write_checkpoint(const std::filesystem::path& dir,
                                       const actors::SamplerState& state,
                                       const WriteOptions& options = {});
std::filesystem::path write_checkpoint(const std::filesystem::path& dir,
                                       const actors::MixState& state,
                                       const WriteOptions& options = {});

/// Options of load_checkpoint().
struct LoadOptions {
  /// The caller's sampling parameters (e.g. a new sampler's fingerprint()); a
  /// difference from the checkpoint's is a `conflict` error naming the field.
  std::optional<actors::DatasetFingerprint> expected{};
};

/// A loaded checkpoint, ready for DistributedSampler::restore().
struct LoadedCheckpoint {
  actors::SamplerState state{};                // for the requested rank and world size
  std::uint64_t generation = 0;                // of the set it came from
  std::uint32_t saved_world_size = 0;          // W of that set
  std::vector<std::filesystem::path> files{};  // the set, by rank
  std::uint64_t job = 0;                       // who wrote the set (JOBS AND RUNS)
  std::uint64_t run = 0;
};

/// Loads the newest complete set in DIR for rank `rank` of `world_size`. With the
/// saved W, that rank's own state (exact resume: same positions, same commits, its own
/// epoch); with another W, the elastic re-partition (actors::repartition, also of
/// ranks in different epochs). Throws CheckpointError — `conflict` also for files of
/// two jobs or a mix's set; std::invalid_argument if rank >= world_size.
LoadedCheckpoint load_checkpoint(const std::filesystem::path& dir, std::uint32_t rank,
                                 std::uint32_t world_size, const LoadOptions& options = {});

/// Options of load_mix_checkpoint().
struct MixLoadOptions {
  std::optional<actors::MixFingerprint> expected{};  // e.g. a new mix's fingerprint()
};

/// A loaded mix checkpoint, ready for WeightedMixSampler::restore().
struct LoadedMixCheckpoint {
  actors::MixState state{};
  std::uint64_t generation = 0;
  std::uint32_t saved_world_size = 0;
  std::vector<std::filesystem::path> files{};
  std::uint64_t job = 0;
  std::uint64_t run = 0;
};

/// load_checkpoint() for a weighted mix's set. At another world size the exact
/// re-partition of actors::repartition(std::span<const MixState>, …); a mix under
/// MixStop::never cannot be re-partitioned: `conflict` naming the saved world size.
LoadedMixCheckpoint load_mix_checkpoint(const std::filesystem::path& dir, std::uint32_t rank,
                                        std::uint32_t world_size,
                                        const MixLoadOptions& options = {});

/// The RunId of a fresh run (JOBS AND RUNS): the same on every rank of the launch.
RunId fresh_run(const actors::DatasetFingerprint& sampling, std::uint32_t world_size,
                std::string_view launch = {});
RunId fresh_run(const actors::MixFingerprint& sampling, std::uint32_t world_size,
                std::string_view launch = {});
/// The RunId of a run resumed from `from` at `world_size`; first_generation is the
/// loaded generation + 1.
RunId resumed_run(const LoadedCheckpoint& from, std::uint32_t world_size,
                  std::string_view launch = {});
RunId resumed_run(const LoadedMixCheckpoint& from, std::uint32_t world_size,
                  std::string_view launch = {});

/// Before a run: creates DIR if needed and checks that this rank can write there and
/// that DIR belongs to `run`'s job (JOBS AND RUNS); removes this rank's stale
/// temporary files. Cheap: one probe file and one listing (file names tell job, run
/// and generation; only legacy files are read). Throws CheckpointError: io (not a
/// directory, not writable), conflict (the reason says what DIR holds and what to
/// do), corrupt/version (a legacy file that cannot be read).
void check_checkpoint_dir(const std::filesystem::path& dir, const RunId& run, std::uint32_t rank,
                          std::uint32_t world_size);

}  // namespace brigade::transport
