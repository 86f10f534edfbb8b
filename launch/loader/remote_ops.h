#pragma once

// The built-in operations of a worker node — what `brigade run` decodes, done remotely —
// and the trainer's side of them: the remote decode stage's task, its checks and its
// retries (launch/loader/job.h REMOTE).
//
// OPERATIONS. kDecodeImages and kDecodeClips take a DecodeTask (launch/loader/decode_task.h:
// the DecodeSpec — transform parameters included — and the batch's sample ids, paths and
// byte ranges, no bytes), read each sample on the worker (shared storage) and return a
// DecodeResult (the same codec, over launch/loader/decode_op.capnp): the batch exactly as
// decode_batch() makes it locally (so a remote batch is byte-identical to a local one)
// with the failed samples (the engine's records: id, path, typed code, cause). A worker
// given a dataset (its own --data, --list or --shards) reads sample `id` at its own
// location (file or byte range) — the trainer's path is then only for messages — and has
// refused trainers of another dataset in the hello.
//
// CHECKS. A result is used only if it matches its task: every sample of the task is
// either in the batch (in task order) or failed, once; the shape is [n, sample_shape]
// and the data n × sample bytes; a failure's index and id agree. A result that does
// not is treated as a lost attempt on that worker (a bug or a lying peer), never used.
//
// RETRIES (remote_decode_batch). One attempt sends the whole batch. An attempt lost
// before its worker started it (CallResult::started: the worker died or froze with it
// queued, or it went to a worker already dead) sends the same batch again and counts
// against no sample (up to 8 × max_attempts such losses per batch). When a started
// attempt is lost (the worker died, froze, passed the deadline, or sent a bad result)
// each of its samples counts the loss; those with two attempts or more to spare are sent
// again together (one task), those left with their last attempt one by one (so a poison
// sample is alone when it fails, and the others never share its last loss), each until
// it has been lost `max_attempts` times in all (with the default of 2, one by one after
// the first loss); a sample lost that often is failed ("lost on N attempts: <last
// reason>") and counted like any failed sample. So a poison file that
// kills every worker it reaches takes at most max_attempts workers down, and the
// others keep serving. With no worker live: `local` decodes the samples here (the same
// decode), `fail` waits (the job fails after kNoWorkerGrace, see job.h).
//
// THREADING. Plain functions; remote_decode_batch blocks on the pool and honours the
// stop token.

#include <chrono>
#include <optional>
#include <span>
#include <stop_token>
#include <vector>

#include "launch/loader/decode.h"
#include "transport/remote/remote.h"

namespace brigade::launch {

// Version 2 of the images operation: the task carries the image transform and its
// parameters (a version 1 worker would ignore them and decode eval pixels, so the hello
// refuses it). Version 2 of the clips operation: clips take eval or train, and the task
// carries clip_stride (a version 1 worker would refuse train tasks). Version 3 of both:
// the task is launch/loader/decode_op.capnp's (capnp enums, the interpolation), which a
// version 2 worker cannot read. Version 4 of both: the result is decode_op.capnp's too
// (a failed sample's code as an enum of its category), no longer the remote layer's.
// Version 5 of both: a task's sample carries a byte range (a tar shard's member), which
// a version 4 worker would ignore, decoding the whole shard.
inline const transport::OperationVersion kDecodeImages{"brigade.decode.images", 5};
inline const transport::OperationVersion kDecodeClips{"brigade.decode.clips", 5};

/// How long `on_no_workers = fail` waits without a live worker before the job fails.
inline constexpr std::chrono::seconds kNoWorkerGrace{5};

/// Registers kDecodeImages and kDecodeClips. `dataset`: the worker's own samples
/// (sample id → location: a file, or a shard's byte range), or empty to read the paths
/// and byte ranges the tasks carry.
void register_decode_operations(transport::OperationRegistry& registry,
                                std::vector<SampleLocation> dataset = {});

/// What the remote stage needs besides the pool.
struct RemoteDecodeOptions {
  int max_attempts = 2;
  bool local_fallback = true;  // on_no_workers = local
  /// The batch's tensor may be a view of the received result (no copy, `allocator`
  /// unused) when one result holds every delivered sample, in order: the common case.
  /// Leave false where the batch must be in the allocator's memory (pinned for a device).
  bool share_result = false;
};

struct RemoteDecodeFigures {
  std::uint64_t attempts_lost = 0;    // lost attempts (each sent again or failed)
  std::uint64_t decoded_locally = 0;  // samples decoded here for want of a worker
};

/// Decodes one batch on the workers (RETRIES), into memory from `allocator` (one copy
/// of the received bytes), or as a view of the received result (share_result). Failed
/// samples are listed in the result's `failures` with their causes. Returns std::nullopt
/// when stopped.
std::optional<DecodedBatch> remote_decode_batch(transport::RemotePool& pool, const DecodeSpec& spec,
                                                std::span<EncodedSample> samples,
                                                const media::Allocator& allocator,
                                                const RemoteDecodeOptions& options,
                                                std::stop_token stop,
                                                RemoteDecodeFigures* figures = nullptr);

}  // namespace brigade::launch
