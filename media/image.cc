// image.h on the core's side: sizes and geometry here; decoding in the FFmpeg plugin
// (detail/plugin.h), which load_image loads on its first call.
#include "media/image.h"

#include <cstring>
#include <optional>
#include <string>

#include "media/detail/geometry.h"
#include "media/detail/plugin.h"
#include "media/errors.h"

namespace brigade::media {
namespace {

// Decodes `source`; `sink(shape)` returns where to write the result.
void decode_image(const Source& source, const ImageOptions& options,
                  const detail::ImageSink& sink) {
  std::optional<std::vector<std::uint8_t>> file_bytes;
  std::span<const std::uint8_t> bytes = source.bytes();
  if (source.is_file()) bytes = file_bytes.emplace(read_file(source.name()));
  const std::string& name = source.name();
  if (bytes.empty()) throw MediaError(ErrorCode::bad_data, name, "empty input");
  detail::ffmpeg_plugin(name).decode_image(bytes, name, options, sink);
}

}  // namespace

ImageOptions imagenet_eval_options() {
  ImageOptions o;
  o.resize = ResizeMode::shorter_side_crop;
  o.width = o.height = 224;
  o.shorter_side = 256;
  return o;
}

std::string make_filter_desc(const ImageOptions& o, int src_width, int src_height) {
  const detail::Geometry g = detail::plan_geometry(o, src_width, src_height, "make_filter_desc");
  const std::string flags = ":flags=bilinear+accurate_rnd+full_chroma_int";
  std::string desc;
  if (g.src.x != 0 || g.src.y != 0 || g.src.w != src_width || g.src.h != src_height) {
    desc = "crop=" + std::to_string(g.src.w) + ":" + std::to_string(g.src.h) + ":" +
           std::to_string(g.src.x) + ":" + std::to_string(g.src.y) + ",";
  }
  desc += "scale=" + std::to_string(g.out_w) + ":" + std::to_string(g.out_h) + flags;
  if (g.flip) desc += ",hflip";
  return desc + ",format=" + std::string(pixel_format_name(o.format));
}

ImageInfo probe_image(const Source& source) {
  std::optional<std::vector<std::uint8_t>> file_bytes;
  std::span<const std::uint8_t> bytes = source.bytes();
  if (source.is_file()) bytes = file_bytes.emplace(read_file(source.name()));
  if (bytes.empty()) throw MediaError(ErrorCode::bad_data, source.name(), "empty input");
  return detail::ffmpeg_plugin(source.name()).probe_image(bytes, source.name());
}

std::vector<std::int64_t> image_output_shape(const ImageOptions& options, int src_width,
                                             int src_height) {
  const detail::Geometry g =
      detail::plan_geometry(options, src_width, src_height, "image_output_shape");
  return image_shape(options.format, g.out_w, g.out_h);
}

Tensor load_image(const Source& source, const ImageOptions& options, const Allocator& allocator) {
  Tensor out;
  decode_image(source, options, [&](const std::vector<std::int64_t>& shape) {
    out = Tensor::empty(DType::uint8, shape, allocator);
    return out.data_as<std::uint8_t>();
  });
  return out;
}

void load_image_into(const Source& source, const ImageOptions& options, const Tensor& out) {
  if (out.dtype() != DType::uint8 || !out.is_contiguous()) {
    throw MediaError(ErrorCode::invalid_argument, source.name(),
                     "output must be a contiguous uint8 tensor");
  }
  decode_image(source, options, [&](const std::vector<std::int64_t>& shape) {
    if (shape != out.shape()) {
      throw MediaError(ErrorCode::invalid_argument, source.name(),
                       "output tensor has the wrong shape");
    }
    return out.data_as<std::uint8_t>();
  });
}

Tensor load_image_batch(std::span<const Source> sources, const ImageOptions& options,
                        const Allocator& allocator) {
  if (!options.filter_desc.empty() ||
      (options.resize != ResizeMode::stretch && options.resize != ResizeMode::shorter_side_crop)) {
    throw MediaError(ErrorCode::invalid_argument, "load_image_batch",
                     "needs a fixed output size (stretch or shorter_side_crop, no filter)");
  }
  std::vector<std::int64_t> shape = image_shape(options.format, options.width, options.height);
  shape.insert(shape.begin(), static_cast<std::int64_t>(sources.size()));
  Tensor batch = Tensor::empty(DType::uint8, shape, allocator);
  for (std::size_t i = 0; i < sources.size(); ++i) {
    load_image_into(sources[i], options, batch[static_cast<std::int64_t>(i)]);
  }
  return batch;
}

}  // namespace brigade::media
