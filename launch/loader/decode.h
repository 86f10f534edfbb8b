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
// `id` of epoch `e` gets the same pixels wherever and whenever it is decoded. A bad
// transform parameter is a bad spec (std::invalid_argument, naming it).
//
// ERRORS. A sample's failure names its id, its path and the cause, and keeps the typed
// code of a media::MediaError (a std::error_code in media_category()). decode_batch
// never throws for a bad sample; it throws only for a bad spec (std::invalid_argument)
// and lets std::bad_alloc from the allocator through.
//
// THREADING. Plain functions over values; any number of threads may call them.

#include <cstdint>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "launch/loader/job_config.h"
#include "media/tensor.h"
#include "media/transform.h"

namespace brigade::launch {

/// What each sample of a batch becomes. Serializable as plain values (a remote task
/// carries every field, so a remote worker makes the same pixels), so it holds no
/// callables.
struct DecodeSpec {
  MediaKind kind = MediaKind::image;
  Layout layout = Layout::nhwc;
  int side = 224;           // output height = width
  int clip_frames = 8;      // video: frames per clip (eval: evenly spaced over the clip)
  std::uint64_t seed = 0;   // the job's seed (random transforms draw from seed, epoch, id)
  std::uint64_t epoch = 0;  // the epoch the batch belongs to
  // The transform of media/transform.h and its parameters. Clips: eval = clip_frames
  // evenly spaced frames, each frame's shorter side to `side` and a center crop
  // (`resize` unused); train = media::train_clip_frames (clip_frames at clip_stride from
  // a random first frame) and one train_crop for the whole clip, resized to side x side
  // (swscale's bilinear, as eval's clips); none is refused.
  media::TransformKind transform = media::TransformKind::eval;
  int resize = 256;  // eval: the shorter side before the crop
  double scale_min = 0.08, scale_max = 1.0;
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;
  double flip_probability = 0.5;
  bool exif_orientation = false;
  bool roi_decode = true;  // JPEG: region-of-interest decode (media/transform.h)
  int clip_stride = 4;     // video, train: frames between a clip's selected frames
};

/// The media options of `spec`'s image transform (seed and epoch included).
media::TransformOptions transform_options(const DecodeSpec& spec);

/// The spec `brigade run` uses for `config` in `epoch`.
DecodeSpec decode_spec(const RunConfig& config, std::uint64_t epoch);

/// The shape of one sample in the batch tensor (without the batch dimension).
std::vector<std::int64_t> sample_shape(const DecodeSpec& spec);

/// One sample on its way to a batch: its identity, and its bytes once read — or why
/// it failed.
struct EncodedSample {
  std::uint64_t id = 0;
  std::string path{};
  std::vector<std::uint8_t> bytes{};
  std::string error{};  // empty unless the sample failed (the full message)
  std::error_code code{};
  bool failed() const { return !error.empty(); }
};

/// A failed sample of a batch.
struct SampleFailure {
  std::size_t index = 0;  // in the samples given to decode_batch
  std::uint64_t id = 0;
  std::string message{};  // "sample <id> (<path>): <cause> [<code name>]"
  std::error_code code{};
};

/// Reads the sample's file into `sample.bytes`; on failure records it in the sample
/// (not a throw). What is not a regular file (a directory, a FIFO, a device) is
/// rejected without reading, a dangling symlink or a symlink loop fails with a cause
/// that says so (media::read_file).
void read_sample(EncodedSample& sample);

/// The message a sample failure carries: "sample <id> (<path>): <what>", with the
/// MediaError's cause and code name when `error` is one.
std::string describe_sample_failure(std::uint64_t id, const std::string& path,
                                    const std::exception& error);

struct DecodedBatch {
  std::vector<std::uint64_t> ids;  // ids[i] is the sample in data[i]
  media::Tensor data;              // [ids.size(), ...sample_shape] uint8
  std::vector<SampleFailure> failures{};
};

/// Decodes `samples` (their bytes; failed ones are passed through to `failures`) into
/// one batch, see BATCH LAYOUT. Their byte vectors are released as they are decoded.
DecodedBatch decode_batch(const DecodeSpec& spec, std::span<EncodedSample> samples,
                          const media::Allocator& allocator);

}  // namespace brigade::launch
