#include "launch/loader/decode.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "actors/task.h"
#include "launch/loader/detail/batch.h"
#include "launch/loader/object_reads.h"
#include "media/errors.h"
#include "media/image.h"
#include "media/source.h"
#include "media/video.h"
#include "transport/device/device.h"
#include "transport/remote/remote.h"

namespace brigade::launch {
namespace {

media::ImageOptions image_options(const DecodeSpec& spec) {
  media::ImageOptions image = media::imagenet_eval_options();
  const int side = spec.transform.size;
  if (spec.kind == MediaKind::video) {
    image.width = image.height = image.shorter_side = side;  // shorter side, then crop
  } else {
    image.width = image.height = side;
  }
  return image;
}

// What load_video decodes of clip `id`: eval's evenly spaced frames and center crop, or
// the train transform's frames and crop (decode.h DecodeSpec).
media::VideoOptions clip_options(const DecodeSpec& spec, const media::ImageOptions& image,
                                 const media::Source& source, std::uint64_t id) {
  const media::TransformOptions& transform = spec.transform;
  media::VideoOptions clip{.frames = media::FrameSelection::evenly_spaced(spec.clip_frames),
                           .image = image};
  if (transform.kind != media::TransformKind::train) return clip;
  const media::VideoInfo info = media::probe_video(source);
  if (info.fps <= 0) {
    throw media::MediaError(media::ErrorCode::unsupported, source.name(),
                            "the train transform needs the clip's frame rate");
  }
  // Frame i is displayed from i / fps: ask for the middle of its interval, never past
  // the last frame the duration holds.
  const double last = info.duration > 0 ? info.duration - 0.5 / info.fps : 0;
  std::vector<double> at;
  for (const std::int64_t i :
       media::train_clip_frames(transform, info.frames, spec.clip_frames, spec.clip_stride, id)) {
    const double t = (double(i) + 0.5) / info.fps;
    at.push_back(info.duration > 0 ? std::max(0.0, std::min(t, last)) : t);
  }
  clip.frames = media::FrameSelection::at(std::move(at));
  const media::CropWindow crop = media::train_crop(transform, info.width, info.height, id);
  clip.image = {};
  clip.image.resize = media::ResizeMode::stretch;
  clip.image.width = clip.image.height = transform.size;
  clip.image.crop_x = crop.x;
  clip.image.crop_y = crop.y;
  clip.image.crop_width = crop.width;
  clip.image.crop_height = crop.height;
  clip.image.flip = crop.flip;
  return clip;
}

// Decodes one sample into `out` (its slot of the batch, a contiguous uint8 tensor of
// sample_shape(spec)).
void decode_into(const DecodeSpec& spec, const media::ImageOptions& image,
                 const EncodedSample& sample, const media::Tensor& out) {
  const auto source = media::Source::memory(sample.bytes, sample.path);
  const bool video = spec.kind == MediaKind::video;
  const media::TransformOptions& transform = spec.transform;
  const media::VideoOptions clip =
      video ? clip_options(spec, image, source, sample.id) : media::VideoOptions{};
  if (spec.layout == Layout::nhwc) {
    if (!video) return media::load_transformed_into(source, transform, sample.id, out);
    // The clip's frames go straight into the slot through the allocator hook.
    auto into_slot = [&out](std::size_t nbytes) {
      if (nbytes != out.nbytes()) {
        throw std::runtime_error(
            fmt::format("decoded {} bytes, expected {}", nbytes, out.nbytes()));
      }
      return std::shared_ptr<void>(out.owner(), out.data());
    };
    media::load_video(source, clip, into_slot);
    return;
  }
  const media::Tensor hwc = video ? media::load_video(source, clip)
                                  : media::load_transformed(source, transform, sample.id);
  if (hwc.nbytes() != out.nbytes()) {
    throw std::runtime_error(
        fmt::format("decoded {} bytes, expected {}", hwc.nbytes(), out.nbytes()));
  }
  const auto* in = static_cast<const std::uint8_t*>(hwc.data());
  auto* to = static_cast<std::uint8_t*>(out.data());
  const int side = transform.size;
  const std::size_t frame = std::size_t(side) * side * 3;
  for (std::size_t off = 0; off < hwc.nbytes(); off += frame) {
    detail::hwc_to_chw(in + off, to + off, side, side, 3);
  }
}

}  // namespace

DecodeSpec decode_spec(const RunConfig& config, std::uint64_t epoch) {
  DecodeSpec spec{.kind = config.kind,
                  .layout = config.layout,
                  .transform = config.transform,
                  .clip_stride = config.clip_stride};
  spec.transform.seed = config.seed;
  spec.transform.epoch = epoch;
  if (spec.transform.resize == 0)  // not resolved: resolve()'s default
    spec.transform.resize = static_cast<int>(std::int64_t(spec.transform.size) * 256 / 224);
  return spec;
}

void validate(const DecodeSpec& spec) {
  try {
    media::check_transform_options(spec.transform);
  } catch (const media::MediaError& e) {
    // Its cause begins with the field's name (media/transform.h).
    throw SpecError(e.cause().substr(0, e.cause().find_first_of(" :")), e.cause());
  }
  if (spec.kind != MediaKind::video) return;
  if (spec.clip_frames < 1 || spec.clip_frames > kMaxClipFrames) {
    throw SpecError("clip_frames",
                    fmt::format("clip_frames {} must be 1-{}", spec.clip_frames, kMaxClipFrames));
  }
  if (spec.clip_stride < 1 || spec.clip_stride > kMaxClipStride) {
    throw SpecError("clip_stride",
                    fmt::format("clip_stride {} must be 1-{}", spec.clip_stride, kMaxClipStride));
  }
  if (spec.transform.kind == media::TransformKind::none) {
    throw SpecError("transform",
                    "transform none: clips (kind video) take eval (evenly spaced frames, center "
                    "crop) or train (frames at clip_stride from a random first frame, a random "
                    "crop and flip)");
  }
  if (spec.transform.interpolation != media::Interpolation::bilinear) {
    throw SpecError("interpolation",
                    fmt::format("interpolation {}: clips are resized with swscale's bilinear; {} "
                                "is for images",
                                media::to_string(spec.transform.interpolation),
                                media::to_string(spec.transform.interpolation)));
  }
}

std::vector<std::int64_t> sample_shape(const DecodeSpec& spec) {
  const std::int64_t side = spec.transform.size;
  std::vector<std::int64_t> shape{side, side, 3};
  if (spec.layout == Layout::nchw) shape = {3, side, side};
  if (spec.kind == MediaKind::video) shape.insert(shape.begin(), spec.clip_frames);
  return shape;
}

actors::SampleFailure sample_failure(std::uint64_t id, const std::string& path,
                                     const std::exception& error) {
  actors::SampleFailure failure{.id = id, .path = path, .code = actors::error_code_of(error)};
  if (const auto* m = dynamic_cast<const media::MediaError*>(&error)) {
    failure.cause = fmt::format("{} [{}]", m->cause(), media::error_code_name(m->code()));
  } else {
    failure.cause = error.what();
  }
  return failure;
}

namespace {

// The std::errc values Brigade's own code produces or maps to, by name.
std::string_view generic_code_name(int value) {
  switch (static_cast<std::errc>(value)) {
    case std::errc::resource_unavailable_try_again:
      return "resource_unavailable_try_again";
    case std::errc::timed_out:
      return "timed_out";
    case std::errc::connection_reset:
      return "connection_reset";
    case std::errc::connection_aborted:
      return "connection_aborted";
    case std::errc::connection_refused:
      return "connection_refused";
    case std::errc::host_unreachable:
      return "host_unreachable";
    case std::errc::network_unreachable:
      return "network_unreachable";
    case std::errc::network_down:
      return "network_down";
    case std::errc::interrupted:
      return "interrupted";
    case std::errc::not_enough_memory:
      return "not_enough_memory";
    case std::errc::protocol_error:
      return "protocol_error";
    case std::errc::illegal_byte_sequence:
      return "illegal_byte_sequence";
    case std::errc::bad_message:
      return "bad_message";
    case std::errc::no_such_file_or_directory:
      return "no_such_file_or_directory";
    case std::errc::permission_denied:
      return "permission_denied";
    case std::errc::io_error:
      return "io_error";
    case std::errc::invalid_argument:
      return "invalid_argument";
    case std::errc::not_supported:
      return "not_supported";
    case std::errc::operation_canceled:
      return "operation_canceled";
    default:
      return {};
  }
}

}  // namespace

std::string error_code_name(const std::error_code& code) {
  if (!code) return {};
  const auto& category = code.category();
  const int value = code.value();
  std::string_view name;
  if (category == media::media_category()) {
    name = media::error_code_name(static_cast<media::ErrorCode>(value));
  } else if (category == transport::remote_category()) {
    name = transport::remote_code_name(static_cast<transport::RemoteErrc>(value));
  } else if (category == transport::device_category()) {
    name = transport::device_code_name(static_cast<transport::DeviceErrc>(value));
  } else if (category == std::generic_category() || category == std::system_category()) {
    name = generic_code_name(value);  // errno values: the same numbers on POSIX
  }
  if (!name.empty() && name != "unknown") return std::string(name);
  return fmt::format("{}:{}", category.name(), value);
}

EncodedSample encoded_sample(std::uint64_t id, const SampleLocation& location) {
  return {.id = id, .path = location.path, .offset = location.offset, .size = location.size};
}

namespace {

std::vector<std::uint8_t> read_bytes(const EncodedSample& s, const ReadFile& read,
                                     const std::stop_token& stop) {
  if (!read && is_object_url(s.path)) return read_object(s.path, s.offset, s.size, stop);
  if (s.size == kWholeFile) return read ? read(s.path) : media::read_file(s.path);
  if (!read) return media::read_file_range(s.path, s.offset, s.size);
  auto whole = read(s.path);
  if (s.offset > whole.size() || s.size > whole.size() - s.offset) {
    throw media::MediaError(media::ErrorCode::io, s.path,
                            fmt::format("file of {} bytes ends within bytes {}-{}", whole.size(),
                                        s.offset, s.offset + s.size));
  }
  return {whole.begin() + static_cast<std::ptrdiff_t>(s.offset),
          whole.begin() + static_cast<std::ptrdiff_t>(s.offset + s.size)};
}

}  // namespace

void read_sample(EncodedSample& sample, const ReadFile& read, std::stop_token stop) {
  try {
    sample.bytes = read_bytes(sample, read, stop);
  } catch (const media::MediaError& e) {
    // A missing target of a symbolic link is a dangling link: say so.
    std::error_code ec;
    const bool dangling =
        e.code() == media::ErrorCode::not_found &&
        std::filesystem::is_symlink(std::filesystem::symlink_status(sample.path, ec));
    const auto& error = dangling ? media::MediaError(media::ErrorCode::not_found, sample.path,
                                                     "dangling symbolic link")
                                 : e;
    sample.bytes = {};
    sample.failure = sample_failure(sample.id, sample.path, error);
  } catch (const std::exception& e) {  // std::bad_alloc
    sample.bytes = {};
    sample.failure = sample_failure(sample.id, sample.path, e);
  }
}

DecodedBatch decode_batch(const DecodeSpec& spec, std::span<EncodedSample> samples,
                          const media::Allocator& allocator) {
  validate(spec);
  DecodedBatch batch;
  std::int64_t possible = 0;
  for (const auto& s : samples) possible += s.failed() ? 0 : 1;
  auto shape = sample_shape(spec);
  shape.insert(shape.begin(), possible);
  const auto full = media::Tensor::empty(media::DType::uint8, shape, allocator);
  const auto image = image_options(spec);
  batch.ids.reserve(static_cast<std::size_t>(possible));
  for (std::size_t index = 0; index < samples.size(); ++index) {
    auto& sample = samples[index];
    if (sample.failed()) {
      batch.failures.push_back(BatchFailure{std::move(*sample.failure), index});
      continue;
    }
    try {
      decode_into(spec, image, sample, full[static_cast<std::int64_t>(batch.ids.size())]);
      batch.ids.push_back(sample.id);
    } catch (const std::exception& e) {
      batch.failures.push_back(BatchFailure{sample_failure(sample.id, sample.path, e), index});
    }
    sample.bytes = {};
  }
  shape[0] = static_cast<std::int64_t>(batch.ids.size());
  batch.data = media::Tensor(media::DType::uint8, shape, full.owner(), full.data());
  return batch;
}

}  // namespace brigade::launch
