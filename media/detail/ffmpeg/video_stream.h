#pragma once
// Timing facts of a video stream and frame-to-tensor conversion shared by
// load_video and the streaming API.

#include <cstdint>
#include <optional>
#include <string>

extern "C" {
#include <libavformat/avformat.h>
}

#include "media/detail/ffmpeg/filter_graph.h"
#include "media/detail/geometry.h"
#include "media/image.h"
#include "media/video.h"

namespace brigade::media::detail {

struct StreamTiming {
  AVRational time_base{1, 1};
  std::int64_t start_pts = 0;
  double fps = 0;
  double frame_duration = 0.04;  // 1 / fps, or 25 fps when unknown
  double duration = 0;
  std::int64_t frames = 0;
};

StreamTiming stream_timing(const AVFormatContext* fmt, int index);
VideoInfo video_info(const AVFormatContext* fmt, int index);
// Seconds from the stream start; NaN when the frame has no timestamp.
double frame_time(const AVFrame* frame, const StreamTiming& timing);
// Presentation time in seconds from the stream start; NaN without a pts.
double packet_time(const AVPacket* packet, const StreamTiming& timing);

// Frame times: from timestamps where frames have them, else counted from the
// first frame at 1/fps each (raw streams carry no timestamps).
class FrameClock {
 public:
  explicit FrameClock(const StreamTiming& timing) : timing_(timing) {}
  double time_of(const AVFrame* frame);
  void reset() { have_last_ = false; }  // after a seek

 private:
  StreamTiming timing_;
  double last_ = 0;
  bool have_last_ = false;
};

// Writes frames into tensors with `options` (resize + format, or filter).
// The first frame fixes the output shape; a later frame that would give
// another shape throws bad_data. Use: prepare(frame), then write(dst).
// Without a filter, frames of the same size as the last reuse its geometry:
// no allocation per frame.
class FrameWriter {
 public:
  FrameWriter(ImageOptions options, std::string name);
  // Runs the filter (if any) on `frame` and returns the output shape. The
  // frame must stay alive until write().
  const std::vector<std::int64_t>& prepare(AVFrame* frame);
  std::size_t frame_bytes() const;
  const std::vector<std::int64_t>& shape() const { return shape_; }
  // Writes the prepared frame at `dst` (frame_bytes() bytes).
  void write(std::uint8_t* dst);

 private:
  ImageOptions options_;
  std::string name_;
  std::vector<std::int64_t> shape_;
  std::optional<FilterGraph> graph_;
  FramePtr filtered_;
  AVFrame* pending_ = nullptr;
  Geometry geometry_;
  int geometry_w_ = 0;  // the frame size geometry_ was planned for
  int geometry_h_ = 0;
};

}  // namespace brigade::media::detail
