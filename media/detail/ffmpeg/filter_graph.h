#pragma once
// A single-input, single-output FFmpeg filter graph:
//   buffer (the decoded frames) -> <description> -> format=<out> -> buffersink.

#include <string>
#include <string_view>

extern "C" {
#include <libavutil/pixfmt.h>
#include <libavutil/rational.h>
#include <libavutil/samplefmt.h>
}

#include "media/detail/ffmpeg/wrappers.h"

struct AVFilterContext;

namespace brigade::media::detail {

class FilterGraph {
 public:
  // A video graph for frames shaped like `first`, producing `out` pixels.
  static FilterGraph video(std::string_view description, const AVFrame* first, AVRational time_base,
                           AVPixelFormat out, std::string_view input);

  // An audio graph for frames shaped like `first` (timestamps in 1/sample_rate),
  // producing packed `out` samples at `out_rate` with `out_channels` channels.
  static FilterGraph audio(std::string_view description, const AVFrame* first, AVSampleFormat out,
                           int out_rate, int out_channels, std::string_view input);

  AVRational output_time_base() const;

  // Pushes a frame (nullptr ends the stream). The frame is not consumed.
  void push(AVFrame* frame);
  // Fills `out` with the next output frame; false when none is ready yet or at the end.
  bool pull(AVFrame* out);

 private:
  // The one setup of every graph: `source` (buffer/abuffer) made with `args`
  // -> description + tail -> `sink`.
  FilterGraph(const char* source, const std::string& args, const char* sink,
              std::string_view description, const std::string& tail, std::string_view input);
  void connect(std::string_view description, const std::string& tail);
  FilterGraphPtr graph_;
  std::string input_;
  AVFilterContext* src_ = nullptr;
  AVFilterContext* sink_ = nullptr;
};

}  // namespace brigade::media::detail
