#include "media/audio.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
}

#include "media/detail/ffmpeg/error.h"
#include "media/detail/ffmpeg/filter_graph.h"
#include "media/detail/ffmpeg/input.h"
#include "media/detail/ffmpeg/plugin_impl.h"
#include "media/errors.h"

namespace brigade::media::ffmpeg {

using detail::check_averror;

namespace {

double stream_duration(const AVFormatContext* fmt, const AVStream* st) {
  if (st->duration != AV_NOPTS_VALUE && st->duration > 0)
    return double(st->duration) * av_q2d(st->time_base);
  if (fmt->duration != AV_NOPTS_VALUE && fmt->duration > 0)
    return double(fmt->duration) / AV_TIME_BASE;
  return 0;
}

// Decodes, filters/resamples and trims by timestamp into `out`.
class AudioDecoder {
 public:
  AudioDecoder(const Source& source, const AudioOptions& o)
      : o_(o),
        name_(source.name()),
        input_(source, true),
        index_(input_.find_stream(AVMEDIA_TYPE_AUDIO)),
        codec_(detail::open_decoder(input_, index_, 1)),
        packet_(detail::make_packet()),
        frame_(detail::make_frame()),
        filtered_(detail::make_frame()) {
    const AVStream* st = input_.get()->streams[index_];
    start_pts_ = st->start_time != AV_NOPTS_VALUE ? st->start_time : 0;
    for (unsigned i = 0; i < input_.get()->nb_streams; ++i) {
      if (int(i) != index_) input_.get()->streams[i]->discard = AVDISCARD_ALL;
    }
  }

  Tensor run(const Allocator& allocator) {
    if (!(o_.start >= 0))
      throw MediaError(ErrorCode::invalid_argument, name_, "start must be >= 0");
    const AVStream* st = input_.get()->streams[index_];
    if (o_.start > 0) {
      const auto ts = start_pts_ + std::int64_t(std::floor(o_.start / av_q2d(st->time_base)));
      // A failed seek (unseekable stream) just means decoding from the beginning.
      if (av_seek_frame(input_.get(), index_, ts, AVSEEK_FLAG_BACKWARD) >= 0) {
        avcodec_flush_buffers(codec_.get());
        seeked_ = true;
      }
    }
    bool eof = false;
    while (!eof && !done_) {
      const int ret = av_read_frame(input_.get(), packet_.get());
      if (ret == AVERROR_EOF) {
        eof = true;
        check_averror(avcodec_send_packet(codec_.get(), nullptr), name_, "while decoding");
      } else {
        check_averror(ret, name_, "while reading");
        if (packet_->stream_index != index_) {
          av_packet_unref(packet_.get());
          continue;
        }
        const int sent = avcodec_send_packet(codec_.get(), packet_.get());
        av_packet_unref(packet_.get());
        check_averror(sent, name_, "while decoding");
      }
      drain_decoder();
    }
    if (graph_ && !done_) {
      graph_->push(nullptr);
      drain_graph();
    }
    return finish(allocator);
  }

 private:
  void drain_decoder() {
    while (!done_) {
      const int ret = avcodec_receive_frame(codec_.get(), frame_.get());
      if (ret == AVERROR(EAGAIN) || ret == AVERROR_EOF) return;
      check_averror(ret, name_, "while decoding");
      if (frame_->sample_rate <= 0 || frame_->ch_layout.nb_channels <= 0 ||
          frame_->nb_samples < 0) {
        throw MediaError(ErrorCode::bad_data, name_, "bad audio frame parameters");
      }
      if (!graph_) open_graph();
      if (frame_->sample_rate != in_rate_ || frame_->ch_layout.nb_channels != in_channels_) {
        throw MediaError(ErrorCode::unsupported, name_, "the audio format changed mid-stream");
      }
      const AVStream* st = input_.get()->streams[index_];
      // Audio is contiguous: only the first frame's position comes from its
      // timestamp (after a seek; 0 otherwise), then samples are counted.
      // Decoders that drop priming samples (Opus pre-skip) leave a negative
      // timestamp on the first frame: that frame starts the stream.
      const std::int64_t ts = frame_->best_effort_timestamp;
      if (!positioned_) {
        positioned_ = true;
        next_in_pts_ = seeked_ && ts != AV_NOPTS_VALUE
                           ? std::max<std::int64_t>(0, av_rescale_q(ts - start_pts_, st->time_base,
                                                                    AVRational{1, in_rate_}))
                           : 0;
      }
      frame_->pts = next_in_pts_;
      next_in_pts_ = frame_->pts + frame_->nb_samples;
      graph_->push(frame_.get());
      av_frame_unref(frame_.get());
      drain_graph();
    }
  }

  void open_graph() {
    in_rate_ = frame_->sample_rate;
    in_channels_ = frame_->ch_layout.nb_channels;
    out_rate_ = o_.sample_rate > 0 ? o_.sample_rate : in_rate_;
    out_channels_ = o_.channels > 0 ? o_.channels : in_channels_;
    if (out_channels_ > 64)
      throw MediaError(ErrorCode::invalid_argument, name_, "too many channels");
    bytes_per_sample_ = o_.format == SampleFormat::f32 ? 4 : 2;
    graph_.emplace(detail::FilterGraph::audio(
        o_.filter_desc, frame_.get(),
        o_.format == SampleFormat::f32 ? AV_SAMPLE_FMT_FLT : AV_SAMPLE_FMT_S16, out_rate_,
        out_channels_, name_));
    first_ = std::llround(o_.start * out_rate_);
    if (o_.duration >= 0) last_ = first_ + std::llround(o_.duration * out_rate_);
  }

  void drain_graph() {
    while (!done_ && graph_->pull(filtered_.get())) {
      const AVRational tb = graph_->output_time_base();
      const std::int64_t pos = filtered_->pts == AV_NOPTS_VALUE
                                   ? next_out_
                                   : av_rescale_q(filtered_->pts, tb, AVRational{1, out_rate_});
      const std::int64_t n = filtered_->nb_samples;
      next_out_ = pos + n;
      // Keep the samples of [first_, last_) and drop everything else.
      std::int64_t from = std::max<std::int64_t>(first_, std::max<std::int64_t>(pos, written_end_));
      std::int64_t to = last_ >= 0 ? std::min(last_, pos + n) : pos + n;
      if (from < to) {
        const std::size_t frame_bytes = std::size_t(bytes_per_sample_) * out_channels_;
        if (samples_.empty() && from > first_) {
          // A gap before the first sample we have (seek landed late): pad with silence.
          samples_.resize(std::size_t(from - first_) * frame_bytes, 0);
        }
        const std::uint8_t* src = filtered_->data[0] + std::size_t(from - pos) * frame_bytes;
        samples_.insert(samples_.end(), src, src + std::size_t(to - from) * frame_bytes);
        written_end_ = to;
      }
      if (last_ >= 0 && pos + n >= last_) done_ = true;
    }
  }

  Tensor finish(const Allocator& allocator) {
    if (!graph_) throw MediaError(ErrorCode::bad_data, name_, "no audio frame could be decoded");
    const std::int64_t have =
        std::int64_t(samples_.size()) / (std::int64_t(bytes_per_sample_) * out_channels_);
    if (have == 0 && written_end_ == 0 && o_.start > 0) {
      throw MediaError(ErrorCode::invalid_argument, name_, "start is past the end of the audio");
    }
    if (o_.duration >= 0) {
      const std::int64_t want = last_ - first_;
      // Allow for the resampler's last partial sample.
      if (have < want - 1) {
        throw MediaError(ErrorCode::invalid_argument, name_,
                         "the audio ends " + std::to_string(double(want - have) / out_rate_) +
                             " s before start + duration");
      }
      samples_.resize(std::size_t(want) * std::size_t(bytes_per_sample_) * out_channels_, 0);
    }
    const std::int64_t count =
        std::int64_t(samples_.size()) / (std::int64_t(bytes_per_sample_) * out_channels_);
    Tensor out = Tensor::empty(o_.format == SampleFormat::f32 ? DType::float32 : DType::int16,
                               {count, out_channels_}, allocator);
    if (!samples_.empty()) std::memcpy(out.data(), samples_.data(), samples_.size());
    return out;
  }

  const AudioOptions& o_;
  std::string name_;
  detail::Input input_;
  int index_;
  detail::CodecContextPtr codec_;
  detail::PacketPtr packet_;
  detail::FramePtr frame_;
  detail::FramePtr filtered_;
  std::optional<detail::FilterGraph> graph_;
  std::int64_t start_pts_ = 0;
  std::int64_t next_in_pts_ = 0;
  std::int64_t next_out_ = 0;
  std::int64_t first_ = 0;
  std::int64_t last_ = -1;
  std::int64_t written_end_ = 0;
  int in_rate_ = 0, in_channels_ = 0, out_rate_ = 0, out_channels_ = 0, bytes_per_sample_ = 4;
  bool done_ = false;
  bool seeked_ = false;
  bool positioned_ = false;
  std::vector<std::uint8_t> samples_;
};

}  // namespace

AudioInfo probe_audio(const Source& source) {
  detail::Input input(source, true);
  const int index = input.find_stream(AVMEDIA_TYPE_AUDIO);
  const AVStream* st = input.get()->streams[index];
  return {st->codecpar->sample_rate, st->codecpar->ch_layout.nb_channels,
          stream_duration(input.get(), st), avcodec_get_name(st->codecpar->codec_id)};
}

Tensor load_audio(const Source& source, const AudioOptions& options, const Allocator& allocator) {
  if (options.sample_rate < 0 || options.channels < 0) {
    throw MediaError(ErrorCode::invalid_argument, source.name(),
                     "sample_rate and channels must be >= 0");
  }
  AudioDecoder decoder(source, options);
  return decoder.run(allocator);
}

}  // namespace brigade::media::ffmpeg
