#pragma once

// The task of the built-in decode operations (launch/remote_ops.h) as bytes: a
// DecodeSpec and the batch's samples (ids and paths, no bytes), in the schema of
// launch/loader/decode_op.capnp. The one codec of the decode spec: every field crosses here
// and nowhere else, enums as Cap'n Proto enums.
//
// TRUST. read_decode_task() reads bytes a peer sent: it returns a task whose spec
// passed validate() (launch/decode.h) or throws transport::RemoteError saying why (a
// malformed message, an unknown enum value, a field out of range) — never anything
// else, never a crash, whatever the bytes (tests/launch/decode_task_test.cc feeds it
// mutations). write_decode_task() writes any spec, valid or not: the reader judges.
//
// THREADING. Plain functions over values.

#include <cstddef>
#include <span>
#include <vector>

#include "launch/loader/decode.h"

namespace brigade::launch {

struct DecodeTask {
  DecodeSpec spec;
  std::vector<EncodedSample> samples;  // id and path; no bytes
};

/// The task of one batch: `spec` and the samples' ids and paths.
std::vector<char> write_decode_task(const DecodeSpec& spec, std::span<const EncodedSample> samples);

/// At most `max_samples` samples, paths of at most 4,096 bytes (TRUST above).
DecodeTask read_decode_task(std::span<const char> bytes, std::size_t max_samples);

}  // namespace brigade::launch
