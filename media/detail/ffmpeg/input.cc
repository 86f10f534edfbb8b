#include "media/detail/ffmpeg/input.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavutil/log.h>
#include <libavutil/mem.h>
}

#include "media/detail/ffmpeg/error.h"
#include "media/image.h"

namespace brigade::media::detail {
namespace {

void log_callback(void* avcl, int level, const char* fmt, va_list vl) {
  if (level > av_log_get_level()) return;
  char line[1024];
  int print_prefix = 1;
  av_log_format_line2(avcl, level, fmt, vl, line, sizeof(line), &print_prefix);
  std::size_t n = std::strlen(line);
  while (n > 0 && line[n - 1] == '\n') line[--n] = 0;
  if (level <= AV_LOG_PANIC)
    spdlog::error("ffmpeg: {}", line);
  else
    spdlog::debug("ffmpeg: {}", line);
}

}  // namespace

void init_ffmpeg_logging() {
  static std::once_flag once;
  std::call_once(once, [] { av_log_set_callback(log_callback); });
}

Input::Input(const Source& source, bool find_stream_info) : name_(source.name()) {
  init_ffmpeg_logging();
  if (!source.is_file()) {
    if (source.bytes().empty()) throw MediaError(ErrorCode::bad_data, name_, "empty input");
    memory_.emplace(source.bytes());
  }
  AVFormatContext* fmt = avformat_alloc_context();
  if (fmt == nullptr) throw std::bad_alloc();
  if (memory_) {
    fmt->pb = memory_->get();
    fmt->flags |= AVFMT_FLAG_CUSTOM_IO;
  }
  // avformat_open_input frees fmt on failure.
  int ret = avformat_open_input(&fmt, source.is_file() ? source.name().c_str() : nullptr, nullptr,
                                nullptr);
  check_averror(ret, name_, "while opening the input");
  fmt_.reset(fmt);
  if (find_stream_info) this->find_stream_info();
}

void Input::find_stream_info() {
  check_averror(avformat_find_stream_info(fmt_.get(), nullptr), name_,
                "while reading stream information");
}

bool Input::header_describes_video() const {
  // MP4's sample tables give every packet's timing, its stsd the picture
  // size; other containers (Matroska without a frame count, raw streams) or
  // codecs without a size in the header (MPEG-4 part 2) need the probe.
  if (std::strncmp(fmt_->iformat->name, "mov,", 4) != 0) return false;
  const AVStream* video = nullptr;
  for (unsigned i = 0; i < fmt_->nb_streams; ++i) {
    const AVStream* st = fmt_->streams[i];
    if (st->codecpar->codec_type != AVMEDIA_TYPE_VIDEO ||
        (st->disposition & AV_DISPOSITION_ATTACHED_PIC))
      continue;
    if (video != nullptr) return false;  // which is best is find_stream_info's call
    video = st;
  }
  return video != nullptr && video->codecpar->codec_id != AV_CODEC_ID_NONE &&
         video->codecpar->width > 0 && video->codecpar->height > 0 && video->nb_frames > 0 &&
         video->avg_frame_rate.num > 0 && video->avg_frame_rate.den > 0 &&
         video->start_time != AV_NOPTS_VALUE && video->duration > 0;
}

Input::~Input() = default;

int Input::find_stream(AVMediaType type) const {
  int index = av_find_best_stream(fmt_.get(), type, -1, -1, nullptr, 0);
  if (index == AVERROR_STREAM_NOT_FOUND) {
    throw MediaError(ErrorCode::unsupported, name_,
                     std::string("no ") + av_get_media_type_string(type) + " stream");
  }
  check_averror(index, name_, "while looking for a stream");
  return index;
}

namespace {

CodecContextPtr open(const AVCodec* codec, const AVCodecParameters* par, std::string_view name,
                     int threads) {
  init_ffmpeg_logging();
  if (codec == nullptr) {
    throw MediaError(ErrorCode::unsupported, std::string(name),
                     std::string("no decoder for codec ") +
                         avcodec_get_name(par ? par->codec_id : AV_CODEC_ID_NONE));
  }
  CodecContextPtr ctx(avcodec_alloc_context3(codec));
  if (!ctx) throw std::bad_alloc();
  if (par != nullptr)
    check_averror(avcodec_parameters_to_context(ctx.get(), par), name,
                  "while configuring the decoder");
  ctx->thread_count = threads;
  ctx->max_pixels = kMaxPixels;
  check_averror(avcodec_open2(ctx.get(), codec, nullptr), name, "while opening the decoder");
  return ctx;
}

}  // namespace

CodecContextPtr open_decoder(const Input& input, int index, int threads) {
  const AVCodecParameters* par = input.get()->streams[index]->codecpar;
  return open(avcodec_find_decoder(par->codec_id), par, input.name(), threads);
}

CodecContextPtr open_decoder(AVCodecID id, std::string_view name, int threads) {
  const AVCodec* codec = avcodec_find_decoder(id);
  if (codec == nullptr) {
    throw MediaError(ErrorCode::unsupported, std::string(name),
                     std::string("no decoder for ") + avcodec_get_name(id));
  }
  return open(codec, nullptr, name, threads);
}

}  // namespace brigade::media::detail
