#include "media/detail/ffmpeg/filter_graph.h"

#include <string>

extern "C" {
#include <libavfilter/avfilter.h>
#include <libavfilter/buffersink.h>
#include <libavfilter/buffersrc.h>
#include <libavutil/frame.h>
#include <libavutil/pixdesc.h>
}

#include "media/detail/ffmpeg/error.h"

namespace brigade::media::detail {

FilterGraph FilterGraph::video(std::string_view description, const AVFrame* first, AVRational time_base,
                               AVPixelFormat out, std::string_view input) {
  FilterGraph g;
  g.input_ = std::string(input);
  g.graph_.reset(avfilter_graph_alloc());
  if (!g.graph_) throw std::bad_alloc();
  g.graph_->nb_threads = 1;
  AVRational sar = first->sample_aspect_ratio.num > 0 ? first->sample_aspect_ratio : AVRational{1, 1};
  std::string args = "video_size=" + std::to_string(first->width) + "x" + std::to_string(first->height) +
                     ":pix_fmt=" + std::to_string(first->format) + ":time_base=" +
                     std::to_string(time_base.num) + "/" + std::to_string(time_base.den) +
                     ":pixel_aspect=" + std::to_string(sar.num) + "/" + std::to_string(sar.den);
  check_averror(avfilter_graph_create_filter(&g.src_, avfilter_get_by_name("buffer"), "in", args.c_str(),
                                             nullptr, g.graph_.get()),
                input, "while creating the filter source");
  check_averror(avfilter_graph_create_filter(&g.sink_, avfilter_get_by_name("buffersink"), "out", nullptr,
                                             nullptr, g.graph_.get()),
                input, "while creating the filter sink");
  FilterInOutPtr outputs(avfilter_inout_alloc());
  FilterInOutPtr inputs(avfilter_inout_alloc());
  if (!outputs || !inputs) throw std::bad_alloc();
  outputs->name = av_strdup("in");
  outputs->filter_ctx = g.src_;
  inputs->name = av_strdup("out");
  inputs->filter_ctx = g.sink_;
  std::string desc = description.empty() ? std::string("null") : std::string(description);
  desc += std::string(",format=pix_fmts=") + av_get_pix_fmt_name(out);
  AVFilterInOut* in_raw = inputs.release();
  AVFilterInOut* out_raw = outputs.release();
  int ret = avfilter_graph_parse_ptr(g.graph_.get(), desc.c_str(), &in_raw, &out_raw, nullptr);
  inputs.reset(in_raw);
  outputs.reset(out_raw);
  if (ret < 0) {
    throw MediaError(averror_code(ret) == ErrorCode::unsupported ? ErrorCode::unsupported
                                                                  : ErrorCode::invalid_argument,
                     std::string(input), "bad filter description '" + std::string(description) +
                                             "': " + averror_text(ret));
  }
  ret = avfilter_graph_config(g.graph_.get(), nullptr);
  if (ret < 0) {
    throw MediaError(ErrorCode::invalid_argument, std::string(input),
                     "cannot configure filter graph '" + std::string(description) + "': " + averror_text(ret));
  }
  return g;
}

void FilterGraph::push(AVFrame* frame) {
  check_averror(av_buffersrc_write_frame(src_, frame), input_, "while filtering");
}

bool FilterGraph::pull(AVFrame* out) {
  av_frame_unref(out);
  int ret = av_buffersink_get_frame(sink_, out);
  if (ret == AVERROR(EAGAIN) || ret == AVERROR_EOF) return false;
  check_averror(ret, input_, "while filtering");
  return true;
}

}  // namespace brigade::media::detail
