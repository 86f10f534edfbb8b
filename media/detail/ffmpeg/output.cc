#include "media/detail/ffmpeg/output.h"

#include <cstring>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavutil/mem.h>
}

#include "media/detail/ffmpeg/error.h"
#include "media/detail/ffmpeg/input.h"

namespace brigade::media::detail {
namespace {

constexpr int kIOBufferSize = 65536;

int write_packet(void* opaque, std::uint8_t* buf, int size) {
  auto* v = static_cast<OutputBuffer*>(opaque);
  const auto end = static_cast<std::size_t>(v->pos) + static_cast<std::size_t>(size);
  if (v->data.size() < end) v->data.resize(end);
  std::memcpy(v->data.data() + v->pos, buf, static_cast<std::size_t>(size));
  v->pos += size;
  return size;
}

std::int64_t seek(void* opaque, std::int64_t offset, int whence) {
  auto* v = static_cast<OutputBuffer*>(opaque);
  const auto size = static_cast<std::int64_t>(v->data.size());
  switch (whence & ~AVSEEK_FORCE) {
    case AVSEEK_SIZE:
      return size;
    case SEEK_SET:
      break;
    case SEEK_CUR:
      offset += v->pos;
      break;
    case SEEK_END:
      offset += size;
      break;
    default:
      return AVERROR(EINVAL);
  }
  if (offset < 0) return AVERROR(EINVAL);
  v->pos = offset;
  return offset;
}

}  // namespace

MemoryOutput::MemoryOutput(const char* format, std::string name)
    : name_(std::move(name)), buffer_(std::make_unique<OutputBuffer>()), packet_(make_packet()) {
  init_ffmpeg_logging();
  AVFormatContext* fmt = nullptr;
  check_averror(avformat_alloc_output_context2(&fmt, nullptr, format, nullptr), name_,
                "while creating the muxer");
  fmt_.reset(fmt);
  auto* buf = static_cast<std::uint8_t*>(av_malloc(kIOBufferSize));
  if (buf == nullptr) throw std::bad_alloc();
  io_.reset(avio_alloc_context(buf, kIOBufferSize, 1, buffer_.get(), nullptr, write_packet, seek));
  if (!io_) {
    av_free(buf);
    throw std::bad_alloc();
  }
  fmt_->pb = io_.get();
  fmt_->flags |= AVFMT_FLAG_CUSTOM_IO | AVFMT_FLAG_BITEXACT;
}

MemoryOutput::~MemoryOutput() = default;

void MemoryOutput::prepare_encoder(AVCodecContext* encoder) const {
  if (fmt_->oformat->flags & AVFMT_GLOBALHEADER) encoder->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
  encoder->flags |= AV_CODEC_FLAG_BITEXACT;
}

AVStream* MemoryOutput::add_stream(const AVCodecContext* encoder) {
  AVStream* st = avformat_new_stream(fmt_.get(), nullptr);
  if (st == nullptr) throw std::bad_alloc();
  check_averror(avcodec_parameters_from_context(st->codecpar, encoder), name_,
                "while adding a stream");
  st->time_base = encoder->time_base;
  return st;
}

void MemoryOutput::write_header() {
  check_averror(avformat_write_header(fmt_.get(), nullptr), name_, "while writing the header");
}

void MemoryOutput::encode(AVCodecContext* encoder, AVStream* stream, const AVFrame* frame) {
  check_averror(avcodec_send_frame(encoder, frame), name_, "while encoding");
  while (true) {
    int ret = avcodec_receive_packet(encoder, packet_.get());
    if (ret == AVERROR(EAGAIN) || ret == AVERROR_EOF) return;
    check_averror(ret, name_, "while encoding");
    // One frame per time-base tick for video: lets the muxer know the last frame's duration.
    if (encoder->codec_type == AVMEDIA_TYPE_VIDEO && packet_->duration <= 0) packet_->duration = 1;
    av_packet_rescale_ts(packet_.get(), encoder->time_base, stream->time_base);
    packet_->stream_index = stream->index;
    check_averror(av_interleaved_write_frame(fmt_.get(), packet_.get()), name_, "while muxing");
  }
}

std::vector<std::uint8_t> MemoryOutput::finish() {
  check_averror(av_write_trailer(fmt_.get()), name_, "while writing the trailer");
  avio_flush(io_.get());
  return std::move(buffer_->data);
}

}  // namespace brigade::media::detail
