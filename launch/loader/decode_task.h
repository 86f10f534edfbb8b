#pragma once

// The messages of the built-in decode operations (launch/loader/remote_ops.h) as bytes, in
// the loader's own schema (launch/loader/decode_op.capnp): the one codec of both.
// - The task: a DecodeSpec and the batch's samples (ids, paths and byte ranges, no
//   bytes); the trainer writes it, the worker reads it. Every field of the spec crosses here and
//   nowhere else, enums as Cap'n Proto enums.
// - The result: the decoded batch and its failed samples (the engine's record, its
//   code as a Cap'n Proto enum of its category and the value); the worker writes it, the
//   trainer reads it (and remote_ops.cc checks it against its task).
//
// TRUST. read_decode_task() and read_decode_result() read bytes a peer sent: they
// return a value or throw transport::RemoteError saying why (a malformed message, an
// unknown enum value, a field out of range) — never anything else, never a crash,
// whatever the bytes (tests/launch/loader/decode_task_test.cc feeds them mutations under
// AddressSanitizer). A task's spec passed validate() (launch/loader/decode.h).
// write_decode_task() writes any spec, valid or not: the reader judges.
//
// THREADING. Plain functions over values.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "launch/loader/decode.h"
#include "transport/remote/remote.h"

namespace brigade::launch {

struct DecodeTask {
  DecodeSpec spec;
  std::vector<EncodedSample> samples;  // id, path, offset and size; no bytes
};

/// The task of one batch: `spec` and the samples' ids and paths.
std::vector<char> write_decode_task(const DecodeSpec& spec, std::span<const EncodedSample> samples);

/// At most `max_samples` samples, paths of at most 4,096 bytes (TRUST above).
DecodeTask read_decode_task(std::span<const char> bytes, std::size_t max_samples);

/// The worker's result of one task: runs `decode` with an allocator whose memory is the
/// result message's own data (decode_batch() decodes into the message: no copy), then
/// writes the batch it returns and its failures.
std::vector<char> write_decode_result(
    const std::function<DecodedBatch(const media::Allocator&)>& decode);

/// A worker's result as read, not yet checked against its task (remote_ops.h CHECKS).
struct DecodeResult {
  std::vector<std::uint64_t> ids;      // ids[i] is the sample in data's row i
  std::vector<std::int64_t> shape;     // [ids.size(), ...sample shape], at most 8 dimensions
  std::span<const std::uint8_t> data;  // uint8, C order; valid while `keep` lives
  /// Failed samples: id, path, code (of a category this build knows, else none), cause;
  /// index in the task's samples. Stage and positions unset.
  std::vector<BatchFailure> failures;
  std::shared_ptr<const void> keep;  // the bytes read (or their aligned copy)
};

/// Reads a worker's result (TRUST above): at most ids + 2^20 failures, texts of at most
/// 4,096 bytes, error categories this build knows. Reads `bytes` where they are (the
/// result keeps them alive; copied only if they are not 8-byte aligned).
DecodeResult read_decode_result(transport::SharedBytes bytes);

}  // namespace brigade::launch
