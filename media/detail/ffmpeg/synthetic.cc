// synthetic.h's encoders that need FFmpeg (PNG, WebP, BMP images; video; audio), inside
// the FFmpeg plugin.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavutil/channel_layout.h>
#include <libavutil/frame.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>
}

#include "media/detail/ffmpeg/error.h"
#include "media/detail/ffmpeg/output.h"
#include "media/detail/ffmpeg/plugin_impl.h"
#include "media/detail/ffmpeg/wrappers.h"
#include "media/detail/synthetic.h"
#include "media/errors.h"

namespace brigade::media::ffmpeg {
namespace {

using detail::check_averror;
using detail::clamp8;
using detail::Rng;

[[noreturn]] void fail(const std::string& what, const std::string& why) {
  detail::synthetic_fail(what, why);
}

// Encodes one RGB image with an FFmpeg image encoder (png, bmp, libwebp).
Bytes encode_ffmpeg_image(const char* encoder_name, AVPixelFormat pix,
                          std::span<const std::uint8_t> rgb, int width, int height) {
  const std::string name = std::string("synthetic ") + encoder_name;
  const AVCodec* codec = avcodec_find_encoder_by_name(encoder_name);
  if (codec == nullptr) throw MediaError(ErrorCode::unsupported, name, "encoder not available");
  detail::CodecContextPtr enc(avcodec_alloc_context3(codec));
  if (!enc) throw std::bad_alloc();
  enc->width = width;
  enc->height = height;
  enc->pix_fmt = pix;
  enc->time_base = {1, 25};
  enc->thread_count = 1;
  enc->flags |= AV_CODEC_FLAG_BITEXACT;
  if (std::strcmp(encoder_name, "libwebp") == 0) av_opt_set_int(enc->priv_data, "lossless", 0, 0);
  check_averror(avcodec_open2(enc.get(), codec, nullptr), name, "while opening the encoder");
  detail::FramePtr frame = detail::make_frame();
  frame->format = pix;
  frame->width = width;
  frame->height = height;
  check_averror(av_frame_get_buffer(frame.get(), 0), name, "while allocating a frame");
  detail::SwsContextPtr sws(sws_getContext(width, height, AV_PIX_FMT_RGB24, width, height, pix,
                                           SWS_BILINEAR | SWS_ACCURATE_RND, nullptr, nullptr,
                                           nullptr));
  if (!sws) throw MediaError(ErrorCode::unsupported, name, "no pixel conversion");
  const std::uint8_t* src[1] = {rgb.data()};
  const int stride[1] = {width * 3};
  sws_scale(sws.get(), src, stride, 0, height, frame->data, frame->linesize);
  check_averror(avcodec_send_frame(enc.get(), frame.get()), name, "while encoding");
  check_averror(avcodec_send_frame(enc.get(), nullptr), name, "while encoding");
  detail::PacketPtr pkt = detail::make_packet();
  Bytes out;
  while (true) {
    int ret = avcodec_receive_packet(enc.get(), pkt.get());
    if (ret == AVERROR_EOF) break;
    check_averror(ret, name, "while encoding");
    out.insert(out.end(), pkt->data, pkt->data + pkt->size);
    av_packet_unref(pkt.get());
  }
  return out;
}

}  // namespace

Bytes encode_image(ImageCodec codec, std::span<const std::uint8_t> rgb, int width, int height) {
  switch (codec) {
    case ImageCodec::png:
      return encode_ffmpeg_image("png", AV_PIX_FMT_RGB24, rgb, width, height);
    case ImageCodec::bmp:
      return encode_ffmpeg_image("bmp", AV_PIX_FMT_BGR24, rgb, width, height);
    case ImageCodec::webp:
      return encode_ffmpeg_image("libwebp", AV_PIX_FMT_YUV420P, rgb, width, height);
    case ImageCodec::jpeg:
      break;
  }
  fail("image", "not an FFmpeg-encoded codec");
}

namespace {

struct VideoEncoderChoice {
  const char* encoder;
  const char* muxer;
};

VideoEncoderChoice video_encoder(VideoCodec c) {
  switch (c) {
    case VideoCodec::h264:
      return {"libx264", "mp4"};
    case VideoCodec::hevc:
      return {"libx265", "mp4"};
    case VideoCodec::mpeg4:
      return {"mpeg4", "mp4"};
    case VideoCodec::vp9:
      return {"libvpx-vp9", "webm"};
    case VideoCodec::av1:
      return {"libaom-av1", "webm"};
    case VideoCodec::mjpeg:
      return {"mjpeg", "avi"};
  }
  return {"", ""};
}

}  // namespace

Bytes make_video(const VideoSpec& spec, const std::string& container) {
  if (spec.width <= 0 || spec.height <= 0 || spec.width % 2 || spec.height % 2 ||
      spec.frames <= 0 || spec.fps <= 0 || spec.gop <= 0) {
    fail("video", "width/height must be positive and even; frames, fps and gop positive");
  }
  const VideoEncoderChoice choice = video_encoder(spec.codec);
  const std::string name = std::string("synthetic ") + choice.encoder;
  const AVCodec* codec = avcodec_find_encoder_by_name(choice.encoder);
  if (codec == nullptr) throw MediaError(ErrorCode::unsupported, name, "encoder not available");
  detail::MemoryOutput out(container.c_str(), name);
  detail::CodecContextPtr enc(avcodec_alloc_context3(codec));
  if (!enc) throw std::bad_alloc();
  enc->width = spec.width;
  enc->height = spec.height;
  // MJPEG takes the deprecated full-range yuvj420p (same layout as yuv420p).
  const bool mjpeg = spec.codec == VideoCodec::mjpeg;
  enc->pix_fmt = mjpeg ? AV_PIX_FMT_YUVJ420P : AV_PIX_FMT_YUV420P;
  if (mjpeg) enc->color_range = AVCOL_RANGE_JPEG;
  enc->time_base = {1, spec.fps};
  enc->framerate = {spec.fps, 1};
  enc->gop_size = spec.gop;
  enc->max_b_frames = spec.b_frames;
  enc->thread_count = 1;
  switch (spec.codec) {
    case VideoCodec::h264:
      if (spec.profile == VideoProfile::x264_default) {
        // FFmpeg's libx264 wrapper leaves unset fields at x264's defaults;
        // keyint and B-frames are set explicitly to x264's values.
        enc->gop_size = 250;
        enc->max_b_frames = 3;
        av_opt_set(enc->priv_data, "preset", "medium", 0);
        av_opt_set(enc->priv_data, "x264-params", "threads=1:lookahead-threads=1:b-pyramid=normal",
                   0);
      } else {
        av_opt_set(enc->priv_data, "preset", "veryfast", 0);
        // No lookahead: with it, this libx264 build's output varied from call to
        // call (even single-threaded); fixed B-frame placement keeps B-frames.
        av_opt_set(enc->priv_data, "x264-params", "scenecut=0:threads=1:rc-lookahead=0:b-adapt=0",
                   0);
      }
      av_opt_set_int(enc->priv_data, "crf", 23, 0);
      break;
    case VideoCodec::hevc:
      av_opt_set(enc->priv_data, "preset", "ultrafast", 0);
      av_opt_set(enc->priv_data, "x265-params",
                 "log-level=error:pools=none:frame-threads=1:scenecut=0", 0);
      break;
    case VideoCodec::mpeg4:
      enc->bit_rate = 40LL * spec.width * spec.height / 10;
      break;
    case VideoCodec::vp9:
      av_opt_set_int(enc->priv_data, "cpu-used", 8, 0);
      av_opt_set(enc->priv_data, "deadline", "realtime", 0);
      enc->bit_rate = 4LL * spec.width * spec.height;
      break;
    case VideoCodec::av1:
      av_opt_set_int(enc->priv_data, "cpu-used", 8, 0);
      av_opt_set(enc->priv_data, "usage", "realtime", 0);
      enc->bit_rate = 4LL * spec.width * spec.height;
      break;
    case VideoCodec::mjpeg:
      enc->max_b_frames = 0;  // intra-only
      enc->flags |= AV_CODEC_FLAG_QSCALE;
      enc->global_quality = FF_QP2LAMBDA * 3;
      break;
  }
  out.prepare_encoder(enc.get());
  check_averror(avcodec_open2(enc.get(), codec, nullptr), name, "while opening the encoder");
  AVStream* stream = out.add_stream(enc.get());
  out.write_header();

  // A texture larger than the frame pans across it; a box moves over it.
  const int dx = 3, dy = 2;
  const int tw = spec.width + dx * spec.frames, th = spec.height + dy * spec.frames;
  const Bytes texture = synthetic_rgb(tw, th, spec.seed);
  Bytes rgb(std::size_t(spec.width) * spec.height * 3);
  detail::FramePtr frame = detail::make_frame();
  frame->format = enc->pix_fmt;
  frame->width = spec.width;
  frame->height = spec.height;
  frame->color_range = enc->color_range;
  check_averror(av_frame_get_buffer(frame.get(), 0), name, "while allocating a frame");
  // Encoders may read the padding past each row: make it deterministic.
  for (int p = 0; p < 4 && frame->buf[p]; ++p)
    std::memset(frame->buf[p]->data, 0, frame->buf[p]->size);
  detail::SwsContextPtr sws(sws_getContext(
      spec.width, spec.height, AV_PIX_FMT_RGB24, spec.width, spec.height, AV_PIX_FMT_YUV420P,
      SWS_BILINEAR | SWS_ACCURATE_RND, nullptr, nullptr, nullptr));
  if (!sws) throw std::bad_alloc();
  sws_setColorspaceDetails(sws.get(), sws_getCoefficients(SWS_CS_ITU601), 1,
                           sws_getCoefficients(SWS_CS_ITU601), mjpeg ? 1 : 0, 0, 1 << 16, 1 << 16);
  Rng rng(spec.seed ^ 0x5eed);
  const int box = std::max(8, spec.width / 6);
  for (int i = 0; i < spec.frames; ++i) {
    const int ox = dx * i, oy = dy * i;
    for (int y = 0; y < spec.height; ++y) {
      std::memcpy(&rgb[std::size_t(y) * spec.width * 3],
                  &texture[(std::size_t(y + oy) * tw + ox) * 3], std::size_t(spec.width) * 3);
    }
    const int bx = (7 * i) % std::max(1, spec.width - box), by = (spec.height - box) / 2;
    for (int y = by; y < by + box && y < spec.height; ++y) {
      for (int x = bx; x < bx + box && x < spec.width; ++x) {
        std::uint8_t* p = &rgb[(std::size_t(y) * spec.width + x) * 3];
        p[0] = std::uint8_t(200 + (i * 3) % 50);
        p[1] = std::uint8_t(40 + ((x - bx) * 4) % 100);
        p[2] = std::uint8_t(60 + (y * 2) % 80);
      }
    }
    for (auto& v : rgb) v = clamp8(float(v) + 1.5f * rng.normal());
    check_averror(av_frame_make_writable(frame.get()), name, "while preparing a frame");
    const std::uint8_t* src[1] = {rgb.data()};
    const int stride[1] = {spec.width * 3};
    sws_scale(sws.get(), src, stride, 0, spec.height, frame->data, frame->linesize);
    frame->pts = i;
    frame->quality = enc->global_quality;
    out.encode(enc.get(), stream, frame.get());
  }
  out.encode(enc.get(), stream, nullptr);
  return out.finish();
}

namespace {

struct AudioEncoderChoice {
  const char* encoder;
  const char* muxer;
  AVSampleFormat format;
};

AudioEncoderChoice audio_encoder(AudioCodec c) {
  switch (c) {
    case AudioCodec::wav:
      return {"pcm_s16le", "wav", AV_SAMPLE_FMT_S16};
    case AudioCodec::aac:
      return {"aac", "ipod", AV_SAMPLE_FMT_FLTP};
    case AudioCodec::flac:
      return {"flac", "flac", AV_SAMPLE_FMT_S16};
    case AudioCodec::mp3:
      return {"libmp3lame", "mp3", AV_SAMPLE_FMT_FLTP};
    case AudioCodec::opus:
      return {"libopus", "ogg", AV_SAMPLE_FMT_FLT};
  }
  return {"", "", AV_SAMPLE_FMT_NONE};
}

void fill_samples(AVFrame* f, const std::vector<float>& pcm, std::int64_t start, int channels) {
  for (int i = 0; i < f->nb_samples; ++i) {
    for (int c = 0; c < channels; ++c) {
      const float v = pcm[std::size_t(start + i) * channels + c];
      switch (f->format) {
        case AV_SAMPLE_FMT_S16:
          reinterpret_cast<std::int16_t*>(f->data[0])[i * channels + c] =
              static_cast<std::int16_t>(std::lround(std::clamp(v, -1.0f, 1.0f) * 32767));
          break;
        case AV_SAMPLE_FMT_FLT:
          reinterpret_cast<float*>(f->data[0])[i * channels + c] = v;
          break;
        case AV_SAMPLE_FMT_FLTP:
          reinterpret_cast<float*>(f->data[c])[i] = v;
          break;
        default:
          break;
      }
    }
  }
}

}  // namespace

Bytes make_audio(const AudioSpec& spec) {
  if (spec.sample_rate <= 0 || spec.channels <= 0 || spec.channels > 8 || spec.seconds <= 0) {
    fail("audio", "bad parameters");
  }
  const AudioEncoderChoice choice = audio_encoder(spec.codec);
  const std::string name = std::string("synthetic ") + choice.encoder;
  const AVCodec* codec = avcodec_find_encoder_by_name(choice.encoder);
  if (codec == nullptr) throw MediaError(ErrorCode::unsupported, name, "encoder not available");
  detail::MemoryOutput out(choice.muxer, name);
  detail::CodecContextPtr enc(avcodec_alloc_context3(codec));
  if (!enc) throw std::bad_alloc();
  enc->sample_rate = spec.sample_rate;
  enc->sample_fmt = choice.format;
  av_channel_layout_default(&enc->ch_layout, spec.channels);
  enc->time_base = {1, spec.sample_rate};
  enc->thread_count = 1;
  if (spec.codec == AudioCodec::aac || spec.codec == AudioCodec::mp3 ||
      spec.codec == AudioCodec::opus) {
    enc->bit_rate = 64000 * spec.channels;
  }
  out.prepare_encoder(enc.get());
  check_averror(avcodec_open2(enc.get(), codec, nullptr), name, "while opening the encoder");
  AVStream* stream = out.add_stream(enc.get());
  out.write_header();
  const auto total = static_cast<std::int64_t>(std::llround(spec.seconds * spec.sample_rate));
  const std::vector<float> pcm = synthetic_audio(spec.sample_rate, spec.channels, total, spec.seed);
  const int chunk = enc->frame_size > 0 ? enc->frame_size : 1024;
  const bool variable =
      codec->capabilities & (AV_CODEC_CAP_VARIABLE_FRAME_SIZE | AV_CODEC_CAP_SMALL_LAST_FRAME);
  detail::FramePtr frame = detail::make_frame();
  for (std::int64_t pos = 0; pos < total; pos += chunk) {
    const int n = int(std::min<std::int64_t>(chunk, total - pos));
    av_frame_unref(frame.get());
    frame->format = enc->sample_fmt;
    frame->sample_rate = spec.sample_rate;
    frame->nb_samples = (n < chunk && !variable && enc->frame_size > 0) ? chunk : n;
    check_averror(av_channel_layout_copy(&frame->ch_layout, &enc->ch_layout), name,
                  "while preparing audio");
    check_averror(av_frame_get_buffer(frame.get(), 0), name, "while allocating audio");
    if (frame->nb_samples != n) {
      for (int p = 0; p < 8 && frame->buf[p]; ++p)
        std::memset(frame->buf[p]->data, 0, frame->buf[p]->size);
      const int keep = frame->nb_samples;
      frame->nb_samples = n;
      fill_samples(frame.get(), pcm, pos, spec.channels);
      frame->nb_samples = keep;
    } else {
      fill_samples(frame.get(), pcm, pos, spec.channels);
    }
    frame->pts = pos;
    out.encode(enc.get(), stream, frame.get());
  }
  out.encode(enc.get(), stream, nullptr);
  return out.finish();
}

}  // namespace brigade::media::ffmpeg
