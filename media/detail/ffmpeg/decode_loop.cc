#include "media/detail/ffmpeg/decode_loop.h"

#include <algorithm>
#include <cmath>
#include <limits>

extern "C" {
#include <libavcodec/avcodec.h>
}

#include "media/detail/ffmpeg/error.h"

namespace brigade::media::detail {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Skips find_stream_info where the header suffices: on short MP4 clips it
// decodes a few frames with a decoder of its own, a fifth of the work of
// taking 8 frames from a 2 s clip.
const Input& probed(Input& input) {
  if (!input.header_describes_video()) input.find_stream_info();
  return input;
}

}  // namespace

VideoStream::VideoStream(const Source& source)
    : input_(source, false),
      index_(probed(input_).find_stream(AVMEDIA_TYPE_VIDEO)),
      timing_(stream_timing(input_.get(), index_)) {
  AVFormatContext* fmt = input_.get();
  for (unsigned i = 0; i < fmt->nb_streams; ++i) {
    if (int(i) != index_) fmt->streams[i]->discard = AVDISCARD_ALL;
  }
}

bool VideoStream::indexed() const { return avformat_index_get_entries_count(stream()) > 0; }

double VideoStream::packet_time(const AVPacket* p) const { return detail::packet_time(p, timing_); }

std::int64_t VideoStream::to_pts(double seconds) const {
  return timing_.start_pts + std::int64_t(std::floor(seconds / av_q2d(timing_.time_base)));
}

bool VideoStream::read(AVPacket* packet) {
  while (true) {
    const int ret = av_read_frame(input_.get(), packet);
    if (ret == AVERROR_EOF) return false;
    check_averror(ret, name(), "while reading");
    if (packet->stream_index == index_) return true;
    av_packet_unref(packet);
  }
}

void VideoStream::seek(std::int64_t pts) {
  check_averror(av_seek_frame(input_.get(), index_, pts, AVSEEK_FLAG_BACKWARD), name(),
                "while seeking");
}

StreamDecoder::StreamDecoder(const VideoStream& stream, int threads, DecodeStats& stats)
    : codec_(open_decoder(stream.input(), stream.index(), threads)),
      clock_(stream.timing()),
      name_(stream.name()),
      stats_(stats) {}

void StreamDecoder::send(const AVPacket* packet, bool skippable) {
  if (packet == nullptr) {
    if (ended_) return;
    ended_ = true;
  } else {
    // Read by the decoder per packet (frame threads copy it when they take one).
    codec_->skip_frame = skippable ? AVDISCARD_NONREF : AVDISCARD_DEFAULT;
    ++stats_.packets;
    stats_.packets_skippable += skippable;
  }
  check_averror(avcodec_send_packet(codec_.get(), packet), name_, "while decoding");
}

bool StreamDecoder::receive(AVFrame* frame, double& time) {
  const int ret = avcodec_receive_frame(codec_.get(), frame);
  if (ret == AVERROR(EAGAIN) || ret == AVERROR_EOF) return false;
  check_averror(ret, name_, "while decoding");
  ++stats_.frames;
  time = clock_.time_of(frame);
  return true;
}

void StreamDecoder::reset() {
  avcodec_flush_buffers(codec_.get());
  clock_.reset();
  ended_ = false;
}

DecodeLoop::DecodeLoop(VideoStream& stream, StreamDecoder& decoder, Skipping skipping, double eps)
    : stream_(stream),
      decoder_(decoder),
      skipping_(skipping),
      eps_(eps),
      depth_(skipping == Skipping::none ? 1 : kLookahead),
      min_time_(kInf) {
  for (int i = 0; i < depth_; ++i) ahead_[i] = make_packet();
}

bool DecodeLoop::next(AVFrame* frame, double& time) {
  while (!receive(frame, time)) {
    if (finished_) return false;
    feed();
  }
  return true;
}

void DecodeLoop::feed() {
  while (!eof_ && count_ < depth_) {
    const int slot = (head_ + count_) % depth_;
    AVPacket* p = ahead_[slot].get();
    if (!stream_.read(p)) {
      eof_ = true;
      break;
    }
    ahead_time_[slot] = stream_.packet_time(p);
    if (!std::isnan(ahead_time_[slot])) min_time_ = std::min(min_time_, ahead_time_[slot]);
    ++count_;
  }
  if (count_ == 0) {
    decoder_.send(nullptr);
    finished_ = true;
    return;
  }
  AVPacket* p = ahead_[head_].get();
  decoder_.send(p, skipping_ == Skipping::undisplayed && skippable(head_));
  if (p->dts != AV_NOPTS_VALUE) last_dts_ = p->dts;
  av_packet_unref(p);
  if (!std::isnan(ahead_time_[head_])) {
    recent_[recent_next_] = ahead_time_[head_];
    recent_next_ = (recent_next_ + 1) % kRecent;
    recent_count_ = std::min(recent_count_ + 1, kRecent);
  }
  head_ = (head_ + 1) % depth_;
  --count_;
}

bool DecodeLoop::skippable(int slot) const {
  const double p = ahead_time_[slot];
  if (std::isnan(p)) return false;
  double q = kInf;  // the next presentation time, or a later one
  for (int i = 1; i < count_; ++i) {
    const double t = ahead_time_[(slot + i) % depth_];
    if (t > p) q = std::min(q, t);
  }
  for (int i = 0; i < recent_count_; ++i) {
    if (recent_[i] > p) q = std::min(q, recent_[i]);
  }
  // The earliest frame since the start or a seek also shows earlier times.
  const double from = p <= min_time_ ? -kInf : p - eps_;
  const auto it = std::lower_bound(wanted_.begin(), wanted_.end(), from);
  return it == wanted_.end() || *it >= q - eps_;
}

void DecodeLoop::seek(std::int64_t pts) {
  stream_.seek(pts);
  decoder_.reset();
  ++decoder_.stats().seeks;
  forget();
}

void DecodeLoop::forget() {
  for (int i = 0; i < count_; ++i) av_packet_unref(ahead_[(head_ + i) % depth_].get());
  head_ = count_ = recent_count_ = recent_next_ = 0;
  min_time_ = kInf;
  last_dts_ = AV_NOPTS_VALUE;
  eof_ = finished_ = false;
}

}  // namespace brigade::media::detail
