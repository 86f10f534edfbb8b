#include "launch/loader/decode.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "actors/task.h"
#include "launch/loader/detail/batch.h"
#include "media/errors.h"
#include "media/image.h"
#include "media/source.h"
#include "media/video.h"

namespace brigade::launch {
namespace {

media::ImageOptions image_options(const DecodeSpec& spec) {
  media::ImageOptions image = media::imagenet_eval_options();
  if (spec.kind == MediaKind::video) {
    image.width = image.height = image.shorter_side = spec.side;  // shorter side, then crop
  } else {
    image.width = image.height = spec.side;
  }
  return image;
}

// What load_video decodes of clip `id`: eval's evenly spaced frames and center crop, or
// the train transform's frames and crop (decode.h DecodeSpec).
media::VideoOptions clip_options(const DecodeSpec& spec, const media::ImageOptions& image,
                                 const media::TransformOptions& transform,
                                 const media::Source& source, std::uint64_t id) {
  media::VideoOptions clip{.frames = media::FrameSelection::evenly_spaced(spec.clip_frames),
                           .image = image};
  if (spec.transform != media::TransformKind::train) return clip;
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
  clip.image.width = clip.image.height = spec.side;
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
                 const media::TransformOptions& transform, const EncodedSample& sample,
                 const media::Tensor& out) {
  const auto source = media::Source::memory(sample.bytes, sample.path);
  const bool video = spec.kind == MediaKind::video;
  const media::VideoOptions clip =
      video ? clip_options(spec, image, transform, source, sample.id) : media::VideoOptions{};
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
  const std::size_t frame = std::size_t(spec.side) * spec.side * 3;
  for (std::size_t off = 0; off < hwc.nbytes(); off += frame) {
    detail::hwc_to_chw(in + off, to + off, spec.side, spec.side, 3);
  }
}

media::TransformKind transform_kind(const std::string& name) {
  if (name == "train") return media::TransformKind::train;
  if (name == "none") return media::TransformKind::none;
  return media::TransformKind::eval;
}

}  // namespace

DecodeSpec decode_spec(const RunConfig& config, std::uint64_t epoch) {
  return {.kind = config.kind,
          .layout = config.layout,
          .side = config.size,
          .seed = config.seed,
          .epoch = epoch,
          .transform = transform_kind(config.transform),
          .resize = config.resize.value_or(config.size * 256 / 224),
          .scale_min = config.scale[0],
          .scale_max = config.scale[1],
          .ratio_min = config.ratio[0],
          .ratio_max = config.ratio[1],
          .flip_probability = config.flip_probability,
          .exif_orientation = config.exif_orientation,
          .roi_decode = config.roi_decode,
          .clip_stride = config.clip_stride};
}

media::TransformOptions transform_options(const DecodeSpec& spec) {
  return {.kind = spec.transform,
          .size = spec.side,
          .resize = spec.resize,
          .scale_min = spec.scale_min,
          .scale_max = spec.scale_max,
          .ratio_min = spec.ratio_min,
          .ratio_max = spec.ratio_max,
          .flip_probability = spec.flip_probability,
          .exif_orientation = spec.exif_orientation,
          .roi_decode = spec.roi_decode,
          .seed = spec.seed,
          .epoch = spec.epoch};
}

std::vector<std::int64_t> sample_shape(const DecodeSpec& spec) {
  const std::int64_t side = spec.side;
  std::vector<std::int64_t> shape{side, side, 3};
  if (spec.layout == Layout::nchw) shape = {3, side, side};
  if (spec.kind == MediaKind::video) shape.insert(shape.begin(), spec.clip_frames);
  return shape;
}

std::string describe_sample_failure(std::uint64_t id, const std::string& path,
                                    const std::exception& error) {
  if (const auto* m = dynamic_cast<const media::MediaError*>(&error)) {
    return fmt::format("sample {} ({}): {} [{}]", id, path, m->cause(),
                       media::error_code_name(m->code()));
  }
  return fmt::format("sample {} ({}): {}", id, path, error.what());
}

void read_sample(EncodedSample& sample) {
  try {
    sample.bytes = media::read_file(sample.path);
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
    sample.error = describe_sample_failure(sample.id, sample.path, error);
    sample.code = error.error_code();
  } catch (const std::exception& e) {  // std::bad_alloc
    sample.bytes = {};
    sample.error = describe_sample_failure(sample.id, sample.path, e);
    sample.code = actors::error_code_of(e);
  }
}

DecodedBatch decode_batch(const DecodeSpec& spec, std::span<EncodedSample> samples,
                          const media::Allocator& allocator) {
  if (spec.side <= 0 || (spec.kind == MediaKind::video && spec.clip_frames <= 0)) {
    throw std::invalid_argument("decode_batch: the spec's side and clip_frames must be positive");
  }
  if (spec.kind == MediaKind::video && spec.transform == media::TransformKind::none) {
    throw std::invalid_argument("decode_batch: clips take the eval or train transform, not none");
  }
  if (spec.kind == MediaKind::video && (spec.clip_stride < 1 || spec.clip_stride > 1024)) {
    throw std::invalid_argument("decode_batch: the spec's clip_stride must be 1-1024");
  }
  const auto transform = transform_options(spec);
  try {
    if (spec.kind == MediaKind::image) media::check_transform_options(transform);
  } catch (const media::MediaError& e) {
    throw std::invalid_argument("decode_batch: transform " + e.cause());
  }
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
      batch.failures.push_back({index, sample.id, std::move(sample.error), sample.code});
      continue;
    }
    try {
      decode_into(spec, image, transform, sample,
                  full[static_cast<std::int64_t>(batch.ids.size())]);
      batch.ids.push_back(sample.id);
    } catch (const std::exception& e) {
      batch.failures.push_back({index, sample.id,
                                describe_sample_failure(sample.id, sample.path, e),
                                actors::error_code_of(e)});
    }
    sample.bytes = {};
  }
  shape[0] = static_cast<std::int64_t>(batch.ids.size());
  batch.data = media::Tensor(media::DType::uint8, shape, full.owner(), full.data());
  return batch;
}

}  // namespace brigade::launch
