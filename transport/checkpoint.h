#pragma once

// Checkpoint files of the samplers: one file per rank, written atomically, loaded as
// a complete set for the same or a different world size (elastic resume).
//
// FILES. DIR/rank-<R>-of-<W>.ckpt holds rank R's SamplerState (actors/sampler.h) as
// the Cap'n Proto messages of transport/checkpoint.capnp, with a CRC-32 of the state's
// bytes. The format is stable and versioned (SamplerState::kFormatVersion).
// write_checkpoint() writes a temporary file in DIR, fsyncs it, renames it over the
// final name and fsyncs DIR (LevelDB's SetCurrentFile), so a reader sees a rank's old
// file or its new one, never a torn one.
//
// SETS. All ranks of one save write the same `generation` (the caller's counter, e.g.
// the training step; it must grow from save to save, across elastic resumes too). A
// set is complete when DIR holds rank-0 … rank-(W-1) of W, all of one generation.
// load_checkpoint() takes the newest complete set. Files of another world size left
// over from before an elastic resume are superseded by newer generations and ignored.
//
// ERRORS. Every problem is a CheckpointError with a kind, the file (or DIR) and the
// reason: a file that is not a valid checkpoint (truncated, flipped bytes, another
// format) fails the whole load — a damaged file is never skipped silently.
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
#include <vector>

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
  conflict,    // the caller's sampling parameters differ from the checkpoint's
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

/// "rank-<R>-of-<W>.ckpt".
std::string checkpoint_file_name(std::uint32_t rank, std::uint32_t world_size);

/// The bytes of a checkpoint file for `state`.
std::vector<std::byte> encode_checkpoint(const actors::SamplerState& state);

/// Parses the bytes of a checkpoint file; `file` names it in errors. Throws
/// CheckpointError (corrupt, version). Robust against arbitrary bytes.
actors::SamplerState decode_checkpoint(std::span<const std::byte> bytes,
                                       const std::filesystem::path& file);

/// Options of write_checkpoint().
struct WriteOptions {
  /// fsync the file and DIR. Without it the rename is still atomic for readers and
  /// against a crash of the process, not against one of the machine (LevelDB's
  /// WriteOptions::sync); for tests and scratch directories.
  bool sync = true;
};

/// Writes DIR/rank-<R>-of-<W>.ckpt for `state` atomically (see FILES); creates DIR.
/// Returns the file's path. Throws CheckpointError (io).
std::filesystem::path write_checkpoint(const std::filesystem::path& dir,
                                       const actors::SamplerState& state,
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
};

/// Loads the newest complete set in DIR for rank `rank` of `world_size`. With the
/// saved W, that rank's own state (exact resume: same positions, same commits); with
/// another W, the elastic re-partition of the epoch's uncommitted positions
/// (actors::repartition). Throws CheckpointError; std::invalid_argument if
/// rank >= world_size.
LoadedCheckpoint load_checkpoint(const std::filesystem::path& dir, std::uint32_t rank,
                                 std::uint32_t world_size, const LoadOptions& options = {});

}  // namespace brigade::transport
