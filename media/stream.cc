// The streaming video API of video.h: Packet, Frame, Demuxer, VideoDecoder,
// FrameConverter, VideoReader, over the decode loop of detail/ffmpeg.
extern "C" {
#include <libavcodec/avcodec.h>
}

#include "media/detail/ffmpeg/decode_loop.h"
#include "media/detail/ffmpeg/video_stream.h"
#include "media/errors.h"
#include "media/video.h"

namespace brigade::media {

struct Packet::Impl {
  detail::PacketPtr packet = detail::make_packet();
  detail::StreamTiming timing;
};

struct Frame::Impl {
  detail::FramePtr frame = detail::make_frame();
  double time = 0;
};

struct Demuxer::Impl {
  explicit Impl(const Source& source) : stream(source) {}
  detail::VideoStream stream;
};

struct VideoDecoder::Impl {
  Impl(const detail::VideoStream& stream, int threads) : decoder(stream, threads, stats) {}
  DecodeStats stats;  // kept for the decoder; the streaming API does not report it
  detail::StreamDecoder decoder;
};

struct VideoReader::Impl {
  Impl(const Source& source, ImageOptions options, int threads)
      : stream(source),
        decoder(stream, threads, stats),
        loop(stream, decoder),
        writer(std::move(options), source.name()) {}
  detail::VideoStream stream;
  DecodeStats stats;
  detail::StreamDecoder decoder;
  detail::DecodeLoop loop;
  detail::FrameWriter writer;
  detail::FramePtr frame = detail::make_frame();
};

namespace {

const ImageOptions& without_filter(const ImageOptions& options, const char* who) {
  if (!options.filter_desc.empty()) {
    throw MediaError(ErrorCode::invalid_argument, who, "filter_desc is not supported here");
  }
  return options;
}

}  // namespace

Packet::Packet(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Packet::Packet(Packet&&) noexcept = default;
Packet& Packet::operator=(Packet&&) noexcept = default;
Packet::~Packet() = default;
double Packet::time() const { return detail::packet_time(impl_->packet.get(), impl_->timing); }
bool Packet::keyframe() const { return impl_->packet->flags & AV_PKT_FLAG_KEY; }
int Packet::size() const { return impl_->packet->size; }

Frame::Frame(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Frame::Frame(Frame&&) noexcept = default;
Frame& Frame::operator=(Frame&&) noexcept = default;
Frame::~Frame() = default;
int Frame::width() const { return impl_->frame->width; }
int Frame::height() const { return impl_->frame->height; }
double Frame::time() const { return impl_->time; }

Demuxer::Demuxer(const Source& source) : impl_(std::make_unique<Impl>(source)) {}
Demuxer::~Demuxer() = default;

VideoInfo Demuxer::info() const {
  return detail::video_info(impl_->stream.input().get(), impl_->stream.index());
}

std::optional<Packet> Demuxer::next() {
  auto p = std::make_unique<Packet::Impl>();
  p->timing = impl_->stream.timing();
  if (!impl_->stream.read(p->packet.get())) return std::nullopt;
  return Packet(std::move(p));
}

void Demuxer::seek(double seconds) { impl_->stream.seek(impl_->stream.to_pts(seconds)); }

VideoDecoder::VideoDecoder(const Demuxer& demuxer, int threads)
    : impl_(std::make_unique<Impl>(demuxer.impl_->stream, threads)) {}
VideoDecoder::~VideoDecoder() = default;

void VideoDecoder::send(const Packet& packet) { impl_->decoder.send(packet.impl_->packet.get()); }

void VideoDecoder::finish() { impl_->decoder.send(nullptr); }

void VideoDecoder::reset() { impl_->decoder.reset(); }

std::optional<Frame> VideoDecoder::receive() {
  auto f = std::make_unique<Frame::Impl>();
  if (!impl_->decoder.receive(f->frame.get(), f->time)) return std::nullopt;
  return Frame(std::move(f));
}

FrameConverter::FrameConverter(ImageOptions options)
    : options_(without_filter(options, "FrameConverter")) {}

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
  const auto& shape = writer.prepare(frame.impl_->frame.get());
  if (out.dtype() != DType::uint8 || !out.is_contiguous() || out.shape() != shape) {
    throw MediaError(ErrorCode::invalid_argument, "frame",
                     "output must be a contiguous uint8 tensor of the output shape");
  }
  writer.write(out.data_as<std::uint8_t>());
}

VideoReader::VideoReader(const Source& source, ImageOptions options, int threads)
    : impl_(std::make_unique<Impl>(source, without_filter(options, "FrameConverter"), threads)) {}
VideoReader::VideoReader(VideoReader&&) noexcept = default;
VideoReader& VideoReader::operator=(VideoReader&&) noexcept = default;
VideoReader::~VideoReader() = default;

std::optional<Tensor> VideoReader::next_chunk(int chunk_frames, const Allocator& allocator) {
  const std::string& name = impl_->stream.name();
  if (chunk_frames <= 0)
    throw MediaError(ErrorCode::invalid_argument, name, "chunk_frames must be > 0");
  Tensor chunk;
  int n = 0;
  double time = 0;
  for (; n < chunk_frames && impl_->loop.next(impl_->frame.get(), time); ++n) {
    const std::vector<std::int64_t>& frame_shape = impl_->writer.prepare(impl_->frame.get());
    if (n == 0) {
      std::vector<std::int64_t> shape(frame_shape);
      shape.insert(shape.begin(), chunk_frames);
      chunk = Tensor::empty(DType::uint8, shape, allocator);
    }
    impl_->writer.write(chunk.data_as<std::uint8_t>() +
                        std::size_t(n) * impl_->writer.frame_bytes());
  }
  if (n == 0) return std::nullopt;
  std::vector<std::int64_t> shape = chunk.shape();
  shape[0] = n;
  return Tensor(DType::uint8, std::move(shape), chunk.owner(), chunk.data());
}

}  // namespace brigade::media
