#include "media/detail/ffmpeg/output.h"

extern "C" {
#include <libavcodec/avcodec.h>
}

#include "media/detail/ffmpeg/error.h"
#include "media/detail/ffmpeg/input.h"

namespace brigade::media::detail {

MemoryOutput::MemoryOutput(const char* format, std::string name)
    : name_(std::move(name)), packet_(make_packet()) {
  init_ffmpeg_logging();
  AVFormatContext* fmt = nullptr;
  check_averror(avformat_alloc_output_context2(&fmt, nullptr, format, nullptr), name_,
                "while creating the muxer");
  fmt_.reset(fmt);
  fmt_->pb = memory_.get();
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
  return memory_.take();
}

}  // namespace brigade::media::detail
