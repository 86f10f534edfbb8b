#pragma once
// The one demux/decode loop behind load_video and the streaming API:
// VideoStream reads the packets of a video stream, StreamDecoder decodes
// them, and DecodeLoop feeds the one to the other, optionally letting the
// decoder skip frames that no selected time displays.
//
// None of these is thread-safe; use one set per thread.

#include <array>
#include <cstdint>
#include <span>
#include <string>

extern "C" {
#include <libavformat/avformat.h>
}

#include "media/detail/ffmpeg/input.h"
#include "media/detail/ffmpeg/video_stream.h"
#include "media/detail/ffmpeg/wrappers.h"
#include "media/video.h"

namespace brigade::media::detail {

// The best video stream of a Source; the demuxer discards the other streams.
// The Source's bytes must outlive it.
class VideoStream {
 public:
  explicit VideoStream(const Source& source);

  const Input& input() const { return input_; }
  const std::string& name() const { return input_.name(); }
  AVStream* stream() const { return input_.get()->streams[index_]; }
  int index() const { return index_; }
  const StreamTiming& timing() const { return timing_; }
  // Whether the container has a seek index (MP4, MKV with cues, WebM).
  bool indexed() const;
  // Seconds from the stream start; NaN when the packet has no timestamp.
  double packet_time(const AVPacket* packet) const;
  // The stream timestamp of `seconds` from the stream start (rounded down).
  std::int64_t to_pts(double seconds) const;

  // Reads the stream's next packet into the blank `packet`; false at the end.
  bool read(AVPacket* packet);
  // Continues from the keyframe at or before `pts` (the decoder must be reset).
  void seek(std::int64_t pts);

 private:
  Input input_;
  int index_;
  StreamTiming timing_;
};

// A decoder for one VideoStream, counting its work into `stats` (packets,
// packets_skippable, frames), which must outlive it.
class StreamDecoder {
 public:
  StreamDecoder(const VideoStream& stream, int threads, DecodeStats& stats);

  // Sends `packet` (not consumed). With `skippable`, the decoder drops the
  // frame if no other frame refers to it (skip_frame = nonref): only frames
  // that will not be looked at may be sent so. nullptr ends the stream (ending
  // it again does nothing).
  void send(const AVPacket* packet, bool skippable = false);
  // Fills `frame` (unreferenced first) with the next frame and `time` with its
  // time in seconds (FrameClock); false when the decoder needs packets or is
  // drained.
  bool receive(AVFrame* frame, double& time);
  // Drops buffered frames and restarts the clock (after VideoStream::seek).
  void reset();
  DecodeStats& stats() const { return stats_; }

 private:
  CodecContextPtr codec_;
  FrameClock clock_;
  std::string name_;
  DecodeStats& stats_;
  bool ended_ = false;
};

// Reads packets from a VideoStream into a StreamDecoder. Both must outlive it.
//
// Skipping::none sends every packet as it is read. Skipping::undisplayed keeps
// up to kLookahead packets read ahead of the decoder and sends a packet with
// skip_frame = nonref unless its frame may be displayed at one of the wanted
// times (set_wanted). The frame of presentation time p is displayed at t when
// p - eps <= t < q - eps, q being the next presentation time of the stream;
// q is taken as the smallest time after p among the packets read ahead and
// the kRecent sent last, which is q or later: the loop may decode more than
// needed, never less. Packets without timestamps are never skipped.
class DecodeLoop {
 public:
  enum class Skipping { none, undisplayed };
  static constexpr int kLookahead = 8;
  static constexpr int kRecent = 16;

  DecodeLoop(VideoStream& stream, StreamDecoder& decoder, Skipping skipping = Skipping::none,
             double eps = 0);

  // The next decoded frame (as StreamDecoder::receive); false at the end.
  bool next(AVFrame* frame, double& time);
  // The steps of next(), for callers that act between them: receive() a frame
  // the decoder has ready; else, unless finished(), feed() it the next packet
  // (or the end of the stream).
  bool receive(AVFrame* frame, double& time) { return decoder_.receive(frame, time); }
  void feed();
  bool finished() const { return finished_; }

  // Skipping::undisplayed: the times (seconds, sorted) still wanted. The span
  // must stay valid until the next call; an empty span lets every frame skip.
  void set_wanted(std::span<const double> times) { wanted_ = times; }
  // Continues from the keyframe at or before `pts` and resets the decoder
  // (counted in its stats' seeks).
  void seek(std::int64_t pts);
  // The decode timestamp of the last packet sent to the decoder since the
  // start or the last seek (packets read ahead do not count: seeking past
  // them still saves decoding them); AV_NOPTS_VALUE if none.
  std::int64_t last_dts() const { return last_dts_; }

 private:
  bool skippable(int slot) const;
  void forget();

  VideoStream& stream_;
  StreamDecoder& decoder_;
  const Skipping skipping_;
  const double eps_;
  const int depth_;  // packets held before sending one
  std::span<const double> wanted_;
  std::array<PacketPtr, kLookahead> ahead_;  // a ring: count_ packets from head_
  std::array<double, kLookahead> ahead_time_{};
  int head_ = 0;
  int count_ = 0;
  std::array<double, kRecent> recent_{};  // times of the packets sent last (a ring)
  int recent_count_ = 0;
  int recent_next_ = 0;
  double min_time_;  // the earliest time read since the start or the last seek
  std::int64_t last_dts_ = AV_NOPTS_VALUE;
  bool eof_ = false;
  bool finished_ = false;
};

}  // namespace brigade::media::detail
