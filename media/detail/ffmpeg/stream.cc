// The streaming video API of video.h (Packet, Frame, Demuxer, VideoDecoder,
// FrameConverter, VideoReader) on the plugin's side: detail/plugin.h's streaming
// objects over the decode loop of detail/ffmpeg.
extern "C" {
#include <libavcodec/avcodec.h>
}

#include "media/detail/ffmpeg/decode_loop.h"
#include "media/detail/ffmpeg/plugin_impl.h"
#include "media/detail/ffmpeg/video_stream.h"
#include "media/errors.h"

namespace brigade::media::ffmpeg {
namespace {

class Packet final : public detail::PluginPacket {
 public:
  explicit Packet(detail::StreamTiming timing) : timing_(timing) {}
  double time() const override { return detail::packet_time(packet_.get(), timing_); }
  bool keyframe() const override { return packet_->flags & AV_PKT_FLAG_KEY; }
  int size() const override { return packet_->size; }
  AVPacket* get() const { return packet_.get(); }

 private:
  detail::PacketPtr packet_ = detail::make_packet();
  detail::StreamTiming timing_;
};

class Frame final : public detail::PluginFrame {
 public:
  int width() const override { return frame_->width; }
  int height() const override { return frame_->height; }
  double time() const override { return time_; }
  AVFrame* get() const { return frame_.get(); }
  double& time_slot() { return time_; }

 private:
  detail::FramePtr frame_ = detail::make_frame();
  double time_ = 0;
};

class Decoder final : public detail::PluginDecoder {
 public:
  Decoder(const detail::VideoStream& stream, int threads) : decoder_(stream, threads, stats_) {}
  void send(const detail::PluginPacket* packet) override {
    decoder_.send(packet ? static_cast<const Packet*>(packet)->get() : nullptr);
  }
  void reset() override { decoder_.reset(); }
  std::unique_ptr<detail::PluginFrame> receive() override {
    auto f = std::make_unique<Frame>();
    if (!decoder_.receive(f->get(), f->time_slot())) return nullptr;
    return f;
  }

 private:
  DecodeStats stats_;  // kept for the decoder; the streaming API does not report it
  detail::StreamDecoder decoder_;
};

class Demuxer final : public detail::PluginDemuxer {
 public:
  explicit Demuxer(const Source& source) : stream_(source) {}
  VideoInfo info() const override {
    return detail::video_info(stream_.input().get(), stream_.index());
  }
  std::unique_ptr<detail::PluginPacket> next() override {
    auto p = std::make_unique<Packet>(stream_.timing());
    if (!stream_.read(p->get())) return nullptr;
    return p;
  }
  void seek(double seconds) override { stream_.seek(stream_.to_pts(seconds)); }
  std::unique_ptr<detail::PluginDecoder> decoder(int threads) const override {
    return std::make_unique<Decoder>(stream_, threads);
  }

 private:
  detail::VideoStream stream_;
};

class Reader final : public detail::PluginReader {
 public:
  Reader(const Source& source, ImageOptions options, int threads)
      : stream_(source),
        decoder_(stream_, threads, stats_),
        loop_(stream_, decoder_),
        writer_(std::move(options), source.name()) {}

  std::optional<Tensor> next_chunk(int chunk_frames, const Allocator& allocator) override {
    const std::string& name = stream_.name();
    if (chunk_frames <= 0)
      throw MediaError(ErrorCode::invalid_argument, name, "chunk_frames must be > 0");
    Tensor chunk;
    int n = 0;
    double time = 0;
    for (; n < chunk_frames && loop_.next(frame_.get(), time); ++n) {
      const std::vector<std::int64_t>& frame_shape = writer_.prepare(frame_.get());
      if (n == 0) {
        std::vector<std::int64_t> shape(frame_shape);
        shape.insert(shape.begin(), chunk_frames);
        chunk = Tensor::empty(DType::uint8, shape, allocator);
      }
      writer_.write(chunk.data_as<std::uint8_t>() + std::size_t(n) * writer_.frame_bytes());
    }
    if (n == 0) return std::nullopt;
    std::vector<std::int64_t> shape = chunk.shape();
    shape[0] = n;
    return Tensor(DType::uint8, std::move(shape), chunk.owner(), chunk.data());
  }

 private:
  detail::VideoStream stream_;
  DecodeStats stats_;
  detail::StreamDecoder decoder_;
  detail::DecodeLoop loop_;
  detail::FrameWriter writer_;
  detail::FramePtr frame_ = detail::make_frame();
};

}  // namespace

std::unique_ptr<detail::PluginDemuxer> open_demuxer(const Source& source) {
  return std::make_unique<Demuxer>(source);
}

std::unique_ptr<detail::PluginReader> open_reader(const Source& source, ImageOptions options,
                                                  int threads) {
  return std::make_unique<Reader>(source, std::move(options), threads);
}

void convert_frame(const detail::PluginFrame& frame, const ImageOptions& options,
                   const Tensor& out) {
  detail::FrameWriter writer(options, "frame");
  const auto& shape = writer.prepare(static_cast<const Frame&>(frame).get());
  if (out.dtype() != DType::uint8 || !out.is_contiguous() || out.shape() != shape) {
    throw MediaError(ErrorCode::invalid_argument, "frame",
                     "output must be a contiguous uint8 tensor of the output shape");
  }
  writer.write(out.data_as<std::uint8_t>());
}

}  // namespace brigade::media::ffmpeg
