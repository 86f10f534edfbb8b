#include "media/detail/ffmpeg/video_stream.h"

#include <cmath>
#include <limits>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavutil/imgutils.h>
}

#include "media/detail/ffmpeg/error.h"
#include "media/detail/ffmpeg/scale.h"
#include "media/detail/geometry.h"

namespace brigade::media::detail {

StreamTiming stream_timing(const AVFormatContext* fmt, int index) {
  const AVStream* st = fmt->streams[index];
  StreamTiming t;
  t.time_base = st->time_base;
  t.start_pts = st->start_time != AV_NOPTS_VALUE ? st->start_time : 0;
  // avg_frame_rate is frames / duration, which MP4's duration rounding skews;
  // the real base rate (r_frame_rate) wins when it is close to it.
  const double avg =
      st->avg_frame_rate.num > 0 && st->avg_frame_rate.den > 0 ? av_q2d(st->avg_frame_rate) : 0;
  const double base =
      st->r_frame_rate.num > 0 && st->r_frame_rate.den > 0 ? av_q2d(st->r_frame_rate) : 0;
  t.fps = avg > 0 && (base <= 0 || std::abs(base - avg) > 0.05 * avg) ? avg : base;
  t.frame_duration = t.fps > 0 ? 1.0 / t.fps : 0.04;
  if (st->duration != AV_NOPTS_VALUE && st->duration > 0) {
    t.duration = double(st->duration) * av_q2d(st->time_base);
  } else if (fmt->duration != AV_NOPTS_VALUE && fmt->duration > 0) {
    t.duration = double(fmt->duration) / AV_TIME_BASE;
  }
  // A duration guessed from the bit rate (raw streams) says nothing reliable
  // about the frame count: leave it unknown (0).
  const bool guessed = fmt->duration_estimation_method == AVFMT_DURATION_FROM_BITRATE;
  t.frames = st->nb_frames > 0 ? st->nb_frames
                               : (t.fps > 0 && !guessed ? std::llround(t.duration * t.fps) : 0);
  return t;
}

VideoInfo video_info(const AVFormatContext* fmt, int index) {
  const StreamTiming t = stream_timing(fmt, index);
  const AVCodecParameters* par = fmt->streams[index]->codecpar;
  return {par->width, par->height, t.fps, t.duration, t.frames, avcodec_get_name(par->codec_id)};
}

double frame_time(const AVFrame* frame, const StreamTiming& timing) {
  // Only real presentation timestamps: best_effort_timestamp guesses from
  // decode timestamps, which raw streams invent.
  if (frame->pts == AV_NOPTS_VALUE) return std::numeric_limits<double>::quiet_NaN();
  return double(frame->pts - timing.start_pts) * av_q2d(timing.time_base);
}

double packet_time(const AVPacket* packet, const StreamTiming& timing) {
  if (packet->pts == AV_NOPTS_VALUE) return std::numeric_limits<double>::quiet_NaN();
  return double(packet->pts - timing.start_pts) * av_q2d(timing.time_base);
}

double FrameClock::time_of(const AVFrame* frame) {
  double t = frame_time(frame, timing_);
  if (std::isnan(t)) t = have_last_ ? last_ + timing_.frame_duration : 0;
  last_ = t;
  have_last_ = true;
  return t;
}

FrameWriter::FrameWriter(ImageOptions options, std::string name)
    : options_(std::move(options)), name_(std::move(name)) {}

const std::vector<std::int64_t>& FrameWriter::prepare(AVFrame* frame) {
  pending_ = frame;
  std::vector<std::int64_t> shape;
  if (frame->width <= 0 || frame->height <= 0)
    throw MediaError(ErrorCode::bad_data, name_, "zero frame dimensions");
  if (options_.filter_desc.empty()) {
    if (!shape_.empty() && frame->width == geometry_w_ && frame->height == geometry_h_)
      return shape_;
    geometry_ = plan_geometry(options_, frame->width, frame->height, name_);
    geometry_w_ = frame->width;
    geometry_h_ = frame->height;
    shape = image_shape(options_.format, geometry_.out_w, geometry_.out_h);
  } else {
    if (!graph_) {
      check_filter_geometry(options_, name_);
      graph_.emplace(FilterGraph::video(options_.filter_desc, frame, {1, 1},
                                        av_pixel_format(options_.format), name_));
      filtered_ = make_frame();
    }
    graph_->push(frame);
    if (!graph_->pull(filtered_.get())) {
      throw MediaError(ErrorCode::invalid_argument, name_,
                       "the filter must give one frame per input frame");
    }
    if (options_.format == PixelFormat::yuv420p &&
        (filtered_->width % 2 || filtered_->height % 2)) {
      throw MediaError(ErrorCode::invalid_argument, name_,
                       "yuv420p output needs even width and height");
    }
    shape = image_shape(options_.format, filtered_->width, filtered_->height);
  }
  if (shape_.empty()) shape_ = shape;
  if (shape != shape_)
    throw MediaError(ErrorCode::bad_data, name_, "the frame size changed mid-stream");
  return shape_;
}

std::size_t FrameWriter::frame_bytes() const {
  std::size_t n = 1;
  for (auto d : shape_) n *= static_cast<std::size_t>(d);
  return n;
}

void FrameWriter::write(std::uint8_t* dst) {
  if (!graph_) {
    thread_scaler().scale(picture_of(pending_), geometry_, options_.format, dst, name_);
    return;
  }
  const AVPixelFormat fmt = av_pixel_format(options_.format);
  const AVFrame* f = filtered_.get();
  check_averror(av_image_copy_to_buffer(dst, int(frame_bytes()), f->data, f->linesize, fmt,
                                        f->width, f->height, 1),
                name_, "while copying a filtered frame");
}

}  // namespace brigade::media::detail
