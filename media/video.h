#pragma once
// Video decoding: whole clips into NTHWC tensors (load_video), and a streaming
// API (Demuxer -> VideoDecoder -> FrameConverter) for long videos processed
// chunk by chunk in bounded memory.
//
// Codecs: whatever Debian's FFmpeg decodes, including H.264, HEVC, MPEG-4, VP9
// and AV1 (libdav1d). Containers: MP4/MOV, Matroska/WebM, AVI, raw streams...
//
// Times are in seconds from the start of the video stream (its first pts);
// frames without timestamps (raw streams) are timed by counting at 1/fps.
// "The frame at time t" is the frame displayed at t: the last frame whose
// timestamp is <= t (the first frame for t before it).
//
// Performance: load_video decodes single-threaded by default, seeks to the
// keyframe before a selected frame when that skips decoding (containers with
// an index: MP4, MKV with cues, WebM), asks the decoder to skip every frame
// that no selected time displays and no other frame refers to (skip_frame =
// nonref: with B-pyramids, the referenced B-frames are still decoded), stops
// reading after the last selected frame, and converts only selected frames.
//
// Errors: never a partial result; a selection that cannot be fully served
// (timestamps past the end, a corrupt packet) throws MediaError.
// Thread safety: load_video and probe_video may run concurrently; the
// streaming objects are single-threaded (one per thread, or external locking).

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "media/image.h"
#include "media/source.h"
#include "media/tensor.h"

namespace brigade::media {
namespace detail {
class PluginPacket;
class PluginFrame;
class PluginDemuxer;
class PluginDecoder;
class PluginReader;
}  // namespace detail

struct FrameSelection {
  enum class Kind { all, evenly_spaced, timestamps, range };
  Kind kind = Kind::all;
  int count = 0;                   // evenly_spaced
  std::vector<double> timestamps;  // timestamps (any order, repeats allowed)
  double start = 0;                // range: [start, end)
  double end = -1;                 //   end < 0: the end of the stream
  double fps = 0;                  //   0: every frame in the range; else frames at start + k / fps

  // Every frame.
  static FrameSelection all_frames() { return {}; }
  // `n` frames at indices round(i * (F - 1) / (n - 1)) of the F frames. F is the
  // container's frame count, else duration x fps; with neither (raw streams)
  // every frame is decoded and n are picked. Indices past the last decodable
  // frame (a container that over-counts) get the last frame.
  static FrameSelection evenly_spaced(int n) { return {Kind::evenly_spaced, n, {}, 0, -1, 0}; }
  static FrameSelection at(std::vector<double> seconds) {
    return {Kind::timestamps, 0, std::move(seconds), 0, -1, 0};
  }
  static FrameSelection range(double start, double end, double fps = 0) {
    return {Kind::range, 0, {}, start, end, fps};
  }
};

// What load_video did, for tuning and tests.
struct DecodeStats {
  std::int64_t packets = 0;            // video packets sent to the decoder
  std::int64_t packets_skippable = 0;  // of which sent with skip_frame = nonref
  std::int64_t frames = 0;             // frames the decoder returned
  std::int64_t seeks = 0;
};

struct VideoOptions {
  FrameSelection frames;
  // Per-frame resize, pixel format and optional filter (stateless filters only:
  // one output frame per input frame), as for images.
  ImageOptions image;
  int threads = 1;               // codec threads; 1 = single-threaded, 0 = FFmpeg's choice
  DecodeStats* stats = nullptr;  // if set, filled in (also when load_video throws)
};

struct VideoInfo {
  int width = 0;
  int height = 0;
  double fps = 0;           // average frame rate
  double duration = 0;      // seconds
  std::int64_t frames = 0;  // from the container, else estimated from duration * fps
  std::string codec;        // "h264", ...
};

VideoInfo probe_video(const Source& source);

// Selected frames as [N, ...image shape] (NHWC for packed formats: N x H x W x 3).
Tensor load_video(const Source& source, const VideoOptions& options = {},
                  const Allocator& allocator = {});

// ---- Streaming API -------------------------------------------------------

// A compressed packet of the video stream. Move-only.
class Packet {
 public:
  Packet(Packet&&) noexcept;
  Packet& operator=(Packet&&) noexcept;
  ~Packet();
  double time() const;  // presentation time in seconds; NaN if unknown
  bool keyframe() const;
  int size() const;

 private:
  friend class Demuxer;
  friend class VideoDecoder;
  using Impl = detail::PluginPacket;  // implemented by the FFmpeg plugin (detail/plugin.h)
  explicit Packet(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A decoded picture (reference-counted by FFmpeg; cheap to move). Move-only.
class Frame {
 public:
  Frame(Frame&&) noexcept;
  Frame& operator=(Frame&&) noexcept;
  ~Frame();
  int width() const;
  int height() const;
  double time() const;  // seconds from the stream's start

 private:
  friend class VideoDecoder;
  friend class FrameConverter;
  using Impl = detail::PluginFrame;  // implemented by the FFmpeg plugin (detail/plugin.h)
  explicit Frame(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Reads the packets of the best video stream.
class Demuxer {
 public:
  explicit Demuxer(const Source& source);  // the source's bytes must outlive it
  ~Demuxer();
  Demuxer(const Demuxer&) = delete;
  Demuxer& operator=(const Demuxer&) = delete;

  VideoInfo info() const;
  // The next packet; std::nullopt at the end of the stream.
  std::optional<Packet> next();
  // Continues from the keyframe at or before `seconds`.
  void seek(double seconds);

 private:
  friend class VideoDecoder;
  using Impl = detail::PluginDemuxer;  // implemented by the FFmpeg plugin (detail/plugin.h)
  std::unique_ptr<Impl> impl_;
};

// Decodes the packets of one Demuxer's stream; the demuxer must outlive it.
class VideoDecoder {
 public:
  explicit VideoDecoder(const Demuxer& demuxer, int threads = 1);
  ~VideoDecoder();
  VideoDecoder(const VideoDecoder&) = delete;
  VideoDecoder& operator=(const VideoDecoder&) = delete;

  void send(const Packet& packet);
  void finish();  // no more packets: the decoder gives out what it holds
  void reset();   // after Demuxer::seek: drop buffered frames
  // The next decoded frame, or std::nullopt when it needs more packets (or is done).
  std::optional<Frame> receive();

 private:
  using Impl = detail::PluginDecoder;  // implemented by the FFmpeg plugin (detail/plugin.h)
  std::unique_ptr<Impl> impl_;
};

// Converts frames into `options`' size and pixel format (no filter_desc).
class FrameConverter {
 public:
  explicit FrameConverter(ImageOptions options);
  std::vector<std::int64_t> output_shape(const Frame& frame) const;
  Tensor convert(const Frame& frame, const Allocator& allocator = {}) const;
  // Into caller memory: contiguous uint8 of exactly output_shape(frame).
  void convert_into(const Frame& frame, const Tensor& out) const;

 private:
  ImageOptions options_;
};

// Streams a video in chunks of at most `chunk_frames` converted frames
// ([n, ...image shape] each), holding at most one chunk in memory.
// Move-only; the source's bytes must outlive it.
class VideoReader {
 public:
  VideoReader(const Source& source, ImageOptions options, int threads = 1);
  VideoReader(VideoReader&&) noexcept;
  VideoReader& operator=(VideoReader&&) noexcept;
  ~VideoReader();
  std::optional<Tensor> next_chunk(int chunk_frames, const Allocator& allocator = {});

 private:
  using Impl = detail::PluginReader;  // implemented by the FFmpeg plugin (detail/plugin.h)
  std::unique_ptr<Impl> impl_;
};

}  // namespace brigade::media
