// video.h on the core's side: every call goes to the FFmpeg plugin (detail/plugin.h),
// loaded on the first one.
#include "media/video.h"

#include "media/detail/plugin.h"
#include "media/errors.h"

namespace brigade::media {
namespace {

const ImageOptions& without_filter(const ImageOptions& options, const char* who) {
  if (!options.filter_desc.empty()) {
    throw MediaError(ErrorCode::invalid_argument, who, "filter_desc is not supported here");
  }
  return options;
}

}  // namespace

VideoInfo probe_video(const Source& source) {
  return detail::ffmpeg_plugin(source.name()).probe_video(source);
}

Tensor load_video(const Source& source, const VideoOptions& options, const Allocator& allocator) {
  return detail::ffmpeg_plugin(source.name()).load_video(source, options, allocator);
}

Packet::Packet(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Packet::Packet(Packet&&) noexcept = default;
Packet& Packet::operator=(Packet&&) noexcept = default;
Packet::~Packet() = default;
double Packet::time() const { return impl_->time(); }
bool Packet::keyframe() const { return impl_->keyframe(); }
int Packet::size() const { return impl_->size(); }

Frame::Frame(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Frame::Frame(Frame&&) noexcept = default;
Frame& Frame::operator=(Frame&&) noexcept = default;
Frame::~Frame() = default;
int Frame::width() const { return impl_->width(); }
int Frame::height() const { return impl_->height(); }
double Frame::time() const { return impl_->time(); }

Demuxer::Demuxer(const Source& source)
    : impl_(detail::ffmpeg_plugin(source.name()).open_demuxer(source)) {}
Demuxer::~Demuxer() = default;
VideoInfo Demuxer::info() const { return impl_->info(); }

std::optional<Packet> Demuxer::next() {
  std::unique_ptr<Packet::Impl> p = impl_->next();
  if (!p) return std::nullopt;
  return Packet(std::move(p));
}

void Demuxer::seek(double seconds) { impl_->seek(seconds); }

VideoDecoder::VideoDecoder(const Demuxer& demuxer, int threads)
    : impl_(demuxer.impl_->decoder(threads)) {}
VideoDecoder::~VideoDecoder() = default;
void VideoDecoder::send(const Packet& packet) { impl_->send(packet.impl_.get()); }
void VideoDecoder::finish() { impl_->send(nullptr); }
void VideoDecoder::reset() { impl_->reset(); }

std::optional<Frame> VideoDecoder::receive() {
  std::unique_ptr<Frame::Impl> f = impl_->receive();
  if (!f) return std::nullopt;
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
  detail::ffmpeg_plugin("frame").convert_frame(*frame.impl_, options_, out);
}

VideoReader::VideoReader(const Source& source, ImageOptions options, int threads)
    : impl_(detail::ffmpeg_plugin(source.name())
                .open_reader(source, without_filter(options, "FrameConverter"), threads)) {}
VideoReader::VideoReader(VideoReader&&) noexcept = default;
VideoReader& VideoReader::operator=(VideoReader&&) noexcept = default;
VideoReader::~VideoReader() = default;

std::optional<Tensor> VideoReader::next_chunk(int chunk_frames, const Allocator& allocator) {
  return impl_->next_chunk(chunk_frames, allocator);
}

}  // namespace brigade::media
