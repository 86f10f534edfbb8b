#include "media/detail/ffmpeg/filter_graph.h"

#include <string>

extern "C" {
#include <libavfilter/avfilter.h>
#include <libavfilter/buffersink.h>
#include <libavfilter/buffersrc.h>
#include <libavutil/channel_layout.h>
#include <libavutil/frame.h>
#include <libavutil/pixdesc.h>
}

#include "media/detail/ffmpeg/error.h"

namespace brigade::media::detail {

FilterGraph::FilterGraph(const char* source, const std::string& args, const char* sink,
                         std::string_view description, const std::string& tail,
                         std::string_view input)
    : graph_(avfilter_graph_alloc()), input_(input) {
  if (!graph_) throw std::bad_alloc();
  graph_->nb_threads = 1;
  check_averror(avfilter_graph_create_filter(&src_, avfilter_get_by_name(source), "in",
                                             args.c_str(), nullptr, graph_.get()),
                input, "while creating the filter source");
  check_averror(avfilter_graph_create_filter(&sink_, avfilter_get_by_name(sink), "out", nullptr,
                                             nullptr, graph_.get()),
                input, "while creating the filter sink");
  connect(description, tail);
}

FilterGraph FilterGraph::video(std::string_view description, const AVFrame* first,
                               AVRational time_base, AVPixelFormat out, std::string_view input) {
  AVRational sar =
      first->sample_aspect_ratio.num > 0 ? first->sample_aspect_ratio : AVRational{1, 1};
  std::string args = "video_size=" + std::to_string(first->width) + "x" +
                     std::to_string(first->height) + ":pix_fmt=" + std::to_string(first->format) +
                     ":time_base=" + std::to_string(time_base.num) + "/" +
                     std::to_string(time_base.den) + ":pixel_aspect=" + std::to_string(sar.num) +
                     "/" + std::to_string(sar.den);
  return FilterGraph("buffer", args, "buffersink", description,
                     std::string(",format=pix_fmts=") + av_get_pix_fmt_name(out), input);
}

void FilterGraph::connect(std::string_view description, const std::string& tail) {
  FilterInOutPtr outputs(avfilter_inout_alloc());
  FilterInOutPtr inputs(avfilter_inout_alloc());
  if (!outputs || !inputs) throw std::bad_alloc();
  outputs->name = av_strdup("in");
  outputs->filter_ctx = src_;
  inputs->name = av_strdup("out");
  inputs->filter_ctx = sink_;
  std::string desc =
      description.empty() ? std::string(tail.substr(1)) : std::string(description) + tail;
  AVFilterInOut* in_raw = inputs.release();
  AVFilterInOut* out_raw = outputs.release();
  int ret = avfilter_graph_parse_ptr(graph_.get(), desc.c_str(), &in_raw, &out_raw, nullptr);
  inputs.reset(in_raw);
  outputs.reset(out_raw);
  if (ret < 0) {
    throw MediaError(
        averror_code(ret) == ErrorCode::unsupported ? ErrorCode::unsupported
                                                    : ErrorCode::invalid_argument,
        input_, "bad filter description '" + std::string(description) + "': " + averror_text(ret));
  }
  ret = avfilter_graph_config(graph_.get(), nullptr);
  if (ret < 0) {
    throw MediaError(
        ErrorCode::invalid_argument, input_,
        "cannot configure filter graph '" + std::string(description) + "': " + averror_text(ret));
  }
}

FilterGraph FilterGraph::audio(std::string_view description, const AVFrame* first,
                               AVSampleFormat out, int out_rate, int out_channels,
                               std::string_view input) {
  char layout[128] = {};
  if (first->ch_layout.order == AV_CHANNEL_ORDER_UNSPEC) {
    AVChannelLayout def{};
    av_channel_layout_default(&def, first->ch_layout.nb_channels);
    av_channel_layout_describe(&def, layout, sizeof(layout));
  } else {
    av_channel_layout_describe(&first->ch_layout, layout, sizeof(layout));
  }
  std::string args = "time_base=1/" + std::to_string(first->sample_rate) +
                     ":sample_rate=" + std::to_string(first->sample_rate) + ":sample_fmt=" +
                     av_get_sample_fmt_name(static_cast<AVSampleFormat>(first->format)) +
                     ":channel_layout=" + layout;
  AVChannelLayout out_layout{};
  av_channel_layout_default(&out_layout, out_channels);
  char out_desc[128] = {};
  av_channel_layout_describe(&out_layout, out_desc, sizeof(out_desc));
  return FilterGraph("abuffer", args, "abuffersink", description,
                     ",aresample=" + std::to_string(out_rate) + ",aformat=sample_fmts=" +
                         av_get_sample_fmt_name(out) + ":sample_rates=" + std::to_string(out_rate) +
                         ":channel_layouts=" + out_desc,
                     input);
}

AVRational FilterGraph::output_time_base() const { return av_buffersink_get_time_base(sink_); }

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
