#include "media/image.h"

#include <cstring>
#include <optional>
#include <string>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavutil/imgutils.h>
}

#include "media/detail/ffmpeg/error.h"
#include "media/detail/ffmpeg/filter_graph.h"
#include "media/detail/ffmpeg/input.h"
#include "media/detail/ffmpeg/scale.h"
#include "media/detail/geometry.h"
#include "media/detail/jpeg.h"
#include "media/errors.h"

namespace brigade::media {
namespace {

using detail::FramePtr;

// Codecs whose decoder takes a whole file as one packet (no demuxer needed).
AVCodecID sniff_codec(std::span<const std::uint8_t> b) {
  if (b.size() >= 8 && std::memcmp(b.data(), "\x89PNG\r\n\x1a\n", 8) == 0) return AV_CODEC_ID_PNG;
  if (b.size() >= 12 && std::memcmp(b.data(), "RIFF", 4) == 0 &&
      std::memcmp(b.data() + 8, "WEBP", 4) == 0) {
    return AV_CODEC_ID_WEBP;
  }
  if (b.size() >= 2 && b[0] == 'B' && b[1] == 'M') return AV_CODEC_ID_BMP;
  return AV_CODEC_ID_NONE;
}

// Receives the first frame after `pkt` was sent (flushing if the decoder needs more).
FramePtr receive_first(AVCodecContext* ctx, const std::string& name, bool flushed) {
  FramePtr frame = detail::make_frame();
  int ret = avcodec_receive_frame(ctx, frame.get());
  if (ret == AVERROR(EAGAIN) && !flushed) {
    detail::check_averror(avcodec_send_packet(ctx, nullptr), name, "while decoding");
    ret = avcodec_receive_frame(ctx, frame.get());
  }
  if (ret == AVERROR(EAGAIN) || ret == AVERROR_EOF) return nullptr;
  detail::check_averror(ret, name, "while decoding");
  return frame;
}

FramePtr decode_whole(AVCodecID id, std::span<const std::uint8_t> bytes, const std::string& name) {
  detail::CodecContextPtr ctx = detail::open_decoder(id, name, 1);
  detail::PacketPtr pkt = detail::make_packet();
  pkt->data = const_cast<std::uint8_t*>(bytes.data());  // not ref-counted: the decoder copies it
  pkt->size = static_cast<int>(bytes.size());
  detail::check_averror(avcodec_send_packet(ctx.get(), pkt.get()), name, "while decoding");
  FramePtr frame = receive_first(ctx.get(), name, false);
  if (!frame) throw MediaError(ErrorCode::bad_data, name, "the decoder produced no image");
  return frame;
}

FramePtr decode_demuxed(const Source& source, const std::string& name) {
  detail::Input input(source, true);
  const int index = input.find_stream(AVMEDIA_TYPE_VIDEO);
  detail::CodecContextPtr ctx = detail::open_decoder(input, index, 1);
  detail::PacketPtr pkt = detail::make_packet();
  while (true) {
    int ret = av_read_frame(input.get(), pkt.get());
    if (ret == AVERROR_EOF) break;
    detail::check_averror(ret, name, "while reading");
    if (pkt->stream_index != index) {
      av_packet_unref(pkt.get());
      continue;
    }
    ret = avcodec_send_packet(ctx.get(), pkt.get());
    av_packet_unref(pkt.get());
    detail::check_averror(ret, name, "while decoding");
    FramePtr frame = detail::make_frame();
    ret = avcodec_receive_frame(ctx.get(), frame.get());
    if (ret == AVERROR(EAGAIN)) continue;
    detail::check_averror(ret, name, "while decoding");
    return frame;
  }
  detail::check_averror(avcodec_send_packet(ctx.get(), nullptr), name, "while decoding");
  FramePtr frame = receive_first(ctx.get(), name, true);
  if (!frame) throw MediaError(ErrorCode::bad_data, name, "no image in the input");
  return frame;
}

FramePtr decode_ffmpeg(std::span<const std::uint8_t> bytes, const std::string& name) {
  const AVCodecID id = detail::is_jpeg(bytes) ? AV_CODEC_ID_MJPEG : sniff_codec(bytes);
  if (id != AV_CODEC_ID_NONE) return decode_whole(id, bytes, name);
  return decode_demuxed(Source::memory(bytes, name), name);
}

void check_frame(const AVFrame* f, const std::string& name) {
  if (f->width <= 0 || f->height <= 0) {
    throw MediaError(ErrorCode::bad_data, name, "zero image dimensions");
  }
}

// Decodes `source`; `sink(shape)` returns where to write the result.
template <typename Sink>
void decode_image(const Source& source, const ImageOptions& options, Sink&& sink) {
  std::optional<std::vector<std::uint8_t>> file_bytes;
  std::span<const std::uint8_t> bytes = source.bytes();
  if (source.is_file()) bytes = file_bytes.emplace(read_file(source.name()));
  const std::string& name = source.name();
  if (bytes.empty()) throw MediaError(ErrorCode::bad_data, name, "empty input");
  if (detail::is_jpeg(bytes) && options.filter_desc.empty()) {
    const detail::JpegHeader h = detail::read_jpeg_header(bytes, name);
    if (!h.cmyk) {
      const detail::Geometry g = detail::plan_geometry(options, h.width, h.height, name);
      std::uint8_t* dst = sink(image_shape(options.format, g.out_w, g.out_h));
      detail::decode_jpeg(bytes, options, g, dst, name);
      return;
    }
  }
  FramePtr frame = decode_ffmpeg(bytes, name);
  check_frame(frame.get(), name);
  if (options.filter_desc.empty()) {
    const detail::Geometry g = detail::plan_geometry(options, frame->width, frame->height, name);
    std::uint8_t* dst = sink(image_shape(options.format, g.out_w, g.out_h));
    detail::thread_scaler().scale(detail::picture_of(frame.get()), g, options.format, dst, name);
    return;
  }
  detail::check_filter_geometry(options, name);
  const AVPixelFormat fmt = detail::av_pixel_format(options.format);
  auto graph = detail::FilterGraph::video(options.filter_desc, frame.get(), {1, 1}, fmt, name);
  graph.push(frame.get());
  graph.push(nullptr);
  FramePtr out = detail::make_frame();
  if (!graph.pull(out.get()))
    throw MediaError(ErrorCode::invalid_argument, name, "the filter graph produced no image");
  check_frame(out.get(), name);
  if (options.format == PixelFormat::yuv420p && (out->width % 2 || out->height % 2)) {
    throw MediaError(ErrorCode::invalid_argument, name,
                     "yuv420p output needs even width and height");
  }
  std::uint8_t* dst = sink(image_shape(options.format, out->width, out->height));
  const int size = av_image_get_buffer_size(fmt, out->width, out->height, 1);
  detail::check_averror(
      av_image_copy_to_buffer(dst, size, out->data, out->linesize, fmt, out->width, out->height, 1),
      name, "while copying the filtered image");
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
  if (detail::is_jpeg(bytes)) {
    const detail::JpegHeader h = detail::read_jpeg_header(bytes, source.name());
    return {h.width, h.height, "mjpeg"};
  }
  FramePtr frame = decode_ffmpeg(bytes, source.name());
  check_frame(frame.get(), source.name());
  const AVCodecID id = sniff_codec(bytes);
  return {frame->width, frame->height, id == AV_CODEC_ID_NONE ? "unknown" : avcodec_get_name(id)};
}

std::vector<std::int64_t> image_output_shape(const ImageOptions& options, int src_width,
                                             int src_height) {
  const detail::Geometry g =
      detail::plan_geometry(options, src_width, src_height, "image_output_shape");
  return image_shape(options.format, g.out_w, g.out_h);
}

Tensor load_image(const Source& source, const ImageOptions& options, const Allocator& allocator) {
  Tensor out;
  decode_image(source, options, [&](std::vector<std::int64_t> shape) {
    out = Tensor::empty(DType::uint8, std::move(shape), allocator);
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
