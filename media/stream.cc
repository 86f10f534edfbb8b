// The streaming video API of video.h: Packet, Frame, Demuxer, VideoDecoder,
// FrameConverter, VideoReader.
#include <cmath>
#include <cstring>
#include <limits>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
}

#include "media/detail/ffmpeg/error.h"
#include "media/detail/ffmpeg/input.h"
#include "media/detail/ffmpeg/video_stream.h"
#include "media/errors.h"
#include "media/video.h"

namespace brigade::media {

using detail::check_averror;

struct Packet::Impl {
  detail::PacketPtr packet = detail::make_packet();
  detail::StreamTiming timing;
  std::string name;
};

struct Frame::Impl {
  detail::FramePtr frame = detail::make_frame();
  double time = 0;
};

struct Demuxer::Impl {
  Impl(const Source& source)
      : input(source, true),
        index(input.find_stream(AVMEDIA_TYPE_VIDEO)),
        timing(detail::stream_timing(input.get(), index)) {}
  detail::Input input;
  int index;
  detail::StreamTiming timing;
};

struct VideoDecoder::Impl {
  detail::CodecContextPtr codec;
  detail::StreamTiming timing;
  std::string name;
  detail::FrameClock clock{detail::StreamTiming{}};
};

Packet::Packet(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Packet::Packet(Packet&&) noexcept = default;
Packet& Packet::operator=(Packet&&) noexcept = default;
Packet::~Packet() = default;
double Packet::time() const {
  const AVPacket* p = impl_->packet.get();
  if (p->pts == AV_NOPTS_VALUE) return std::numeric_limits<double>::quiet_NaN();
  return double(p->pts - impl_->timing.start_pts) * av_q2d(impl_->timing.time_base);
}
bool Packet::keyframe() const { return impl_->packet->flags & AV_PKT_FLAG_KEY; }
int Packet::size() const { return impl_->packet->size; }

Frame::Frame(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Frame::Frame(Frame&&) noexcept = default;
Frame& Frame::operator=(Frame&&) noexcept = default;
Frame::~Frame() = default;
int Frame::width() const { return impl_->frame->width; }
int Frame::height() const { return impl_->frame->height; }
double Frame::time() const { return impl_->time; }

Demuxer::Demuxer(const Source& source) : impl_(std::make_unique<Impl>(source)) {
  AVFormatContext* fmt = impl_->input.get();
  for (unsigned i = 0; i < fmt->nb_streams; ++i) {
    if (int(i) != impl_->index) fmt->streams[i]->discard = AVDISCARD_ALL;
  }
}
Demuxer::~Demuxer() = default;

VideoInfo Demuxer::info() const { return detail::video_info(impl_->input.get(), impl_->index); }

std::optional<Packet> Demuxer::next() {
  auto p = std::make_unique<Packet::Impl>();
  p->timing = impl_->timing;
  p->name = impl_->input.name();
  while (true) {
    const int ret = av_read_frame(impl_->input.get(), p->packet.get());
    if (ret == AVERROR_EOF) return std::nullopt;
    check_averror(ret, impl_->input.name(), "while reading");
    if (p->packet->stream_index == impl_->index) return Packet(std::move(p));
    av_packet_unref(p->packet.get());
  }
}

void Demuxer::seek(double seconds) {
  const auto ts =
      impl_->timing.start_pts + std::int64_t(std::floor(seconds / av_q2d(impl_->timing.time_base)));
  check_averror(av_seek_frame(impl_->input.get(), impl_->index, ts, AVSEEK_FLAG_BACKWARD),
                impl_->input.name(), "while seeking");
}

VideoDecoder::VideoDecoder(const Demuxer& demuxer, int threads) : impl_(std::make_unique<Impl>()) {
  impl_->codec = detail::open_decoder(demuxer.impl().input, demuxer.impl().index, threads);
  impl_->timing = demuxer.impl().timing;
  impl_->clock = detail::FrameClock(impl_->timing);
  impl_->name = demuxer.impl().input.name();
}
VideoDecoder::~VideoDecoder() = default;

void VideoDecoder::send(const Packet& packet) {
  check_averror(avcodec_send_packet(impl_->codec.get(), packet.impl().packet.get()), impl_->name,
                "while decoding");
}

void VideoDecoder::finish() {
  const int ret = avcodec_send_packet(impl_->codec.get(), nullptr);
  if (ret != AVERROR_EOF) check_averror(ret, impl_->name, "while decoding");
}

void VideoDecoder::reset() {
  avcodec_flush_buffers(impl_->codec.get());
  impl_->clock.reset();
}

std::optional<Frame> VideoDecoder::receive() {
  auto f = std::make_unique<Frame::Impl>();
  const int ret = avcodec_receive_frame(impl_->codec.get(), f->frame.get());
  if (ret == AVERROR(EAGAIN) || ret == AVERROR_EOF) return std::nullopt;
  check_averror(ret, impl_->name, "while decoding");
  f->time = impl_->clock.time_of(f->frame.get());
  return Frame(std::move(f));
}

FrameConverter::FrameConverter(ImageOptions options) : options_(std::move(options)) {
  if (!options_.filter_desc.empty()) {
    throw MediaError(ErrorCode::invalid_argument, "FrameConverter",
                     "filter_desc is not supported here");
  }
}

std::vector<std::int64_t> FrameConverter::output_shape(const Frame& frame) const {
  return image_output_shape(options_, frame.width(), frame.height());
}

Tensor FrameConverter::convert(const Frame& frame, const Allocator& allocator) const {
  Tensor out = Tensor::empty(DType::uint8, output_shape(frame), allocator);
  convert_into(frame, out);
  return out;
}

void FrameConverter::convert_into(const Frame& frame, const Tensor& out) const {
  detail::FrameWriter writer(options_, "frame");
  const auto& shape = writer.prepare(frame.impl().frame.get());
  if (out.dtype() != DType::uint8 || !out.is_contiguous() || out.shape() != shape) {
    throw MediaError(ErrorCode::invalid_argument, "frame",
                     "output must be a contiguous uint8 tensor of the output shape");
  }
  writer.write(out.data_as<std::uint8_t>());
}

VideoReader::VideoReader(const Source& source, ImageOptions options, int threads)
    : name_(source.name()),
      demuxer_(source),
      decoder_(demuxer_, threads),
      converter_(std::move(options)) {}

std::optional<Tensor> VideoReader::next_chunk(int chunk_frames, const Allocator& allocator) {
  if (chunk_frames <= 0)
    throw MediaError(ErrorCode::invalid_argument, name_, "chunk_frames must be > 0");
  Tensor chunk;
  int n = 0;
  while (n < chunk_frames) {
    std::optional<Frame> frame = decoder_.receive();
    if (!frame) {
      if (finished_) break;
      if (std::optional<Packet> packet = demuxer_.next()) {
        decoder_.send(*packet);
      } else {
        decoder_.finish();
        finished_ = true;
      }
      continue;
    }
    std::vector<std::int64_t> shape = converter_.output_shape(*frame);
    if (n == 0) {
      shape.insert(shape.begin(), chunk_frames);
      chunk = Tensor::empty(DType::uint8, shape, allocator);
    } else if (!std::equal(shape.begin(), shape.end(), chunk.shape().begin() + 1)) {
      throw MediaError(ErrorCode::bad_data, name_, "the frame size changed mid-stream");
    }
    converter_.convert_into(*frame, chunk[n]);
    ++n;
  }
  if (n == 0) return std::nullopt;
  std::vector<std::int64_t> shape = chunk.shape();
  shape[0] = n;
  return Tensor(DType::uint8, std::move(shape), chunk.owner(), chunk.data());
}

}  // namespace brigade::media
