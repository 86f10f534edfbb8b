// image.h's decoding, inside the FFmpeg plugin: JPEG with TurboJPEG + swscale (FFmpeg for
// CMYK/YCCK and with a filter), every other format with FFmpeg's decoders.
#include <cstring>
#include <string>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavutil/imgutils.h>
}

#include "media/detail/ffmpeg/error.h"
#include "media/detail/ffmpeg/filter_graph.h"
#include "media/detail/ffmpeg/input.h"
#include "media/detail/ffmpeg/jpeg.h"
#include "media/detail/ffmpeg/plugin_impl.h"
#include "media/detail/ffmpeg/scale.h"
#include "media/detail/geometry.h"
#include "media/errors.h"

namespace brigade::media::ffmpeg {
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

}  // namespace

void decode_image(std::span<const std::uint8_t> bytes, const std::string& name,
                  const ImageOptions& options, const detail::ImageSink& sink) {
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

ImageInfo probe_image(std::span<const std::uint8_t> bytes, const std::string& name) {
  if (detail::is_jpeg(bytes)) {
    const detail::JpegHeader h = detail::read_jpeg_header(bytes, name);
    return {h.width, h.height, "mjpeg"};
  }
  FramePtr frame = decode_ffmpeg(bytes, name);
  check_frame(frame.get(), name);
  const AVCodecID id = sniff_codec(bytes);
  return {frame->width, frame->height, id == AV_CODEC_ID_NONE ? "unknown" : avcodec_get_name(id)};
}

}  // namespace brigade::media::ffmpeg
