#pragma once

// Reading and decoding samples into one batch: the work of `brigade run`'s "read" and
// "decode" stages, and of the built-in operations a remote decode worker runs for a
// trainer (so a batch decoded remotely is byte-identical to one decoded locally).
//
// BATCH LAYOUT. decode_batch() decodes the samples it is given, in order, into one
// contiguous uint8 tensor [n, ...sample_shape(spec)]: images [n, 224, 224, 3] (NHWC)
// or [n, 3, 224, 224] (NCHW); clips [n, 8, 224, 224, 3] or [n, 8, 3, 224, 224]. A
// sample that failed (to read earlier, or to decode here) is left out: the good
// samples are compacted to the front in their input order, `ids[i]` is the sample in
// data[i], and the failed ones are listed with their cause. The tensor's memory comes
// from the caller's allocator, sized for the samples that can still succeed (never
// for a batch size larger than the samples given): n × sample_bytes.
//
// TRANSFORMS. Images go through media/transform.h with the spec's transform: sample
// `id` of epoch `e` gets the same pixels wherever and whenever it is decoded. A spec
// that validate() refuses is a bad spec (std::invalid_argument, naming the field).
//
// ERRORS. A sample's failure is the engine's record (actors::SampleFailure): its id, its
// path, the cause and the typed code of a media::MediaError (a std::error_code in
// media_category()); its message() reads "sample <id> (<path>): <cause> [<code name>]".
// decode_batch never throws for a bad sample; it throws only for a bad spec (std::invalid_argument)
// and lets std::bad_alloc from the allocator through.
//
// THREADING. Plain functions over values; any number of threads may call them.

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "actors/errors.h"
#include "launch/loader/dataset.h"
#include "launch/loader/job_config.h"
#include "media/tensor.h"
#include "media/transform.h"

namespace brigade::launch {

/// What each sample of a batch becomes: the one description of a decode, from the key
/// table to a remote worker and back (launch/loader/decode_task.h is its codec,
/// launch/loader/decode_op.capnp its schema). Plain values, no callables. A new decode
/// parameter is a field here (or in media::TransformOptions), its line in the schema and
/// the codec, and its use.
struct DecodeSpec {
  MediaKind kind = MediaKind::image;
  Layout layout = Layout::nhwc;
  // The transform of media/transform.h with its parameters, its seed (the job's) and
  // epoch (the batch's): random transforms draw from seed, epoch and sample id.
  // transform.size is the output height = width of images and clip frames. Clips: eval
  // = clip_frames evenly spaced frames, each frame's shorter side to `size` and a center
  // crop (`resize` unused); train = media::train_clip_frames (clip_frames at clip_stride
  // from a random first frame) and one train_crop for the whole clip, resized to size x
  // size; both with swscale's bilinear, so none and bicubic are refused for clips.
  media::TransformOptions transform{};
  int clip_frames = 8;  // video: frames per clip
  int clip_stride = 4;  // video, train: frames between a clip's selected frames
};

/// The clips' bounds validate() enforces (the key table's clip_stride check uses it too).
inline constexpr int kMaxClipFrames = 1024;
inline constexpr int kMaxClipStride = 1024;

/// A spec validate() refuses. what() says why, naming the field and its value first
/// ("resize 200: eval's shorter side must be at least size 224 …"); field() is the
/// field's name as the key table spells it (size, resize, scale, ratio,
/// flip_probability, transform, interpolation, clip_frames, clip_stride).
class SpecError : public std::invalid_argument {
 public:
  SpecError(std::string field, const std::string& message)
      : std::invalid_argument(message), field_(std::move(field)) {}
  const std::string& field() const noexcept { return field_; }

 private:
  std::string field_;
};

/// The range checks of a spec, made once here for every caller (decode_batch, a worker
/// reading a task, the key table's resolve()): media::check_transform_options; clips:
/// clip_frames and clip_stride 1-1024, the eval or train transform, bilinear. Throws
/// SpecError for the first bad field.
void validate(const DecodeSpec& spec);

/// The spec `brigade run` uses for `config` in `epoch`.
DecodeSpec decode_spec(const RunConfig& config, std::uint64_t epoch);

/// The shape of one sample in the batch tensor (without the batch dimension).
std::vector<std::int64_t> sample_shape(const DecodeSpec& spec);

/// One sample on its way to a batch: its identity and location (a file, or a byte
/// range of one: a tar shard's member), and its bytes once read — or why it failed.
struct EncodedSample {
  std::uint64_t id = 0;
  std::string path{};
  std::uint64_t offset = 0;         // of the sample's bytes in `path`
  std::uint64_t size = kWholeFile;  // kWholeFile: the whole file
  std::vector<std::uint8_t> bytes{};
  std::optional<actors::SampleFailure> failure{};  // set when the sample failed
  bool failed() const { return failure.has_value(); }
};

/// A failed sample of a batch: the engine's record (id, path, code, cause; the engine
/// sets its stage and positions when the failure is reported) and its place in the
/// samples given to decode_batch.
struct BatchFailure : actors::SampleFailure {
  std::size_t index = 0;
};

/// Reads a sample's bytes: media::read_file, or a test's stand-in.
using ReadFile = std::function<std::vector<std::uint8_t>(const std::string& path)>;

/// The sample `id` at `location` (bytes not read).
EncodedSample encoded_sample(std::uint64_t id, const SampleLocation& location);

/// Reads the sample's file into `sample.bytes` with `read` (default media::read_file,
/// or media::read_file_range for a byte range: exactly its bytes, with pread; a test's
/// `read` reads the whole file and the range is cut from it); on failure records it in
/// the sample (not a throw). What is not a regular file (a
/// directory, a FIFO, a device) is rejected without reading, a dangling symlink or a
/// symlink loop fails with a cause that says so (media::read_file). `stop` (the read
/// stage's token): an object read waiting on a shard's stream gives up when it is
/// requested (launch/loader/object_reads.h STREAMING), the sample failing `cancelled`.
void read_sample(EncodedSample& sample, const ReadFile& read = {}, std::stop_token stop = {});

/// The record of sample `id` at `path` failing with `error`: the MediaError's cause
/// and code name ("<cause> [<code name>]"), else what(); its std::error_code.
actors::SampleFailure sample_failure(std::uint64_t id, const std::string& path,
                                     const std::exception& error);

/// A name for `code` that scripts can compare: the code's name in its category for
/// media ("bad_data"), remote ("lost_on_attempts") and device ("peer_lost") codes, the
/// std::errc name for generic ones ("timed_out"), else "<category>:<value>"; "" for
/// no code.
std::string error_code_name(const std::error_code& code);

struct DecodedBatch {
  std::vector<std::uint64_t> ids;  // ids[i] is the sample in data[i]
  media::Tensor data;              // [ids.size(), ...sample_shape] uint8
  std::vector<BatchFailure> failures{};
};

/// Decodes `samples` (their bytes; failed ones are passed through to `failures`) into
/// one batch, see BATCH LAYOUT. Their byte vectors are released as they are decoded.
DecodedBatch decode_batch(const DecodeSpec& spec, std::span<EncodedSample> samples,
                          const media::Allocator& allocator);

}  // namespace brigade::launch
