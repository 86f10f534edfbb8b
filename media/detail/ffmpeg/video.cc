#include "media/video.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
}

#include "media/detail/ffmpeg/decode_loop.h"
#include "media/detail/ffmpeg/error.h"
#include "media/detail/ffmpeg/input.h"
#include "media/detail/ffmpeg/plugin_impl.h"
#include "media/detail/ffmpeg/video_stream.h"
#include "media/detail/ffmpeg/wrappers.h"
#include "media/errors.h"

namespace brigade::media::ffmpeg {

namespace {

[[noreturn]] void invalid(const std::string& name, const std::string& why) {
  throw MediaError(ErrorCode::invalid_argument, name, why);
}

// An opened video stream with its decoder.
struct OpenVideo {
  OpenVideo(const Source& source, int threads, DecodeStats& stats)
      : stream(source), decoder(stream, threads, stats) {}
  detail::VideoStream stream;
  detail::StreamDecoder decoder;
};

// The sorted distinct target times and, for each, the output slots it fills.
struct Targets {
  std::vector<double> times;
  std::vector<std::vector<int>> slots;
  int count = 0;
};

Targets plan_targets(const FrameSelection& sel, const detail::StreamTiming& t,
                     const std::string& name) {
  std::vector<double> wanted;
  switch (sel.kind) {
    case FrameSelection::Kind::evenly_spaced: {
      if (sel.count <= 0) invalid(name, "evenly_spaced needs a positive frame count");
      const double span = t.frames > 0 ? double(t.frames - 1) : 0;
      for (int i = 0; i < sel.count; ++i) {
        const double idx = sel.count == 1 ? 0 : std::round(i * span / (sel.count - 1));
        wanted.push_back(t.fps > 0 ? idx / t.fps
                                   : (t.frames > 0 ? idx * t.duration / t.frames : 0));
      }
      break;
    }
    case FrameSelection::Kind::timestamps:
      if (sel.timestamps.empty()) invalid(name, "no timestamps given");
      for (double s : sel.timestamps) {
        if (!(s >= 0)) invalid(name, "timestamps must be >= 0");
        wanted.push_back(s);
      }
      break;
    case FrameSelection::Kind::range: {
      const double end = sel.end < 0 ? t.duration : sel.end;
      if (!(sel.start >= 0) || !(sel.fps > 0)) invalid(name, "range needs start >= 0 and fps > 0");
      for (std::int64_t k = 0;; ++k) {
        const double s = sel.start + double(k) / sel.fps;
        if (s >= end - 1e-9) break;
        wanted.push_back(s);
      }
      if (wanted.empty()) invalid(name, "the range selects no frame");
      break;
    }
    case FrameSelection::Kind::all:
      break;
  }
  Targets out;
  out.count = int(wanted.size());
  std::vector<int> order(wanted.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = int(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return wanted[a] < wanted[b]; });
  for (int i : order) {
    if (out.times.empty() || wanted[i] != out.times.back()) {
      out.times.push_back(wanted[i]);
      out.slots.emplace_back();
    }
    out.slots.back().push_back(i);
  }
  return out;
}

// Decodes the frames that `targets` selects, seeking and skipping as it can.
class SelectiveDecoder {
 public:
  SelectiveDecoder(OpenVideo& video, const Targets& targets, const ImageOptions& image,
                   const Allocator& allocator, const std::string& name)
      : v_(video),
        targets_(targets),
        writer_(image, name),
        allocator_(allocator),
        name_(name),
        eps_(std::min(0.25 * timing().frame_duration, 0.01)),
        loop_(v_.stream, v_.decoder, detail::DecodeLoop::Skipping::undisplayed, eps_),
        frame_(detail::make_frame()),
        prev_(detail::make_frame()) {
    loop_.set_wanted(targets_.times);
  }

  Tensor run() {
    const bool can_seek = v_.stream.indexed();
    double ft = 0;
    while (next_ < targets_.times.size()) {
      if (loop_.receive(frame_.get(), ft)) {
        on_frame(ft);
        continue;
      }
      if (loop_.finished()) break;
      if (can_seek) maybe_seek();
      loop_.feed();
    }
    // At the end: targets past the last frame get it while within a frame of
    // it (evenly spaced selections are clamped to it).
    while (next_ < targets_.times.size()) {
      const double t = targets_.times[next_];
      if (!have_prev_)
        throw MediaError(ErrorCode::bad_data, name_, "the video has no decodable frame");
      if (t > prev_time_ + 1.5 * timing().frame_duration + eps_ && !clamp_) {
        invalid(name_, "time " + std::to_string(t) + " s is past the last frame (" +
                           std::to_string(prev_time_) + " s)");
      }
      emit(prev_.get());
    }
    return std::move(out_);
  }

  bool clamp_ = false;

 private:
  const detail::StreamTiming& timing() const { return v_.stream.timing(); }

  // Seeks when the keyframe before the next target lies ahead of what has
  // been read: decoding up to it would be wasted work.
  void maybe_seek() {
    if (!seek_check_) return;
    seek_check_ = false;
    AVStream* st = v_.stream.stream();
    const std::int64_t ts = v_.stream.to_pts(targets_.times[next_] - eps_);
    const int idx = av_index_search_timestamp(st, ts, AVSEEK_FLAG_BACKWARD);
    const std::int64_t last_dts = loop_.last_dts();
    if (idx < 0 || (idx == 0 && last_dts == AV_NOPTS_VALUE)) return;
    const AVIndexEntry* e = avformat_index_get_entry(st, idx);
    if (e == nullptr || (last_dts != AV_NOPTS_VALUE && e->timestamp <= last_dts)) return;
    // Index entries carry decode timestamps; demuxers seek by presentation
    // time, so seek to the target itself (the demuxer finds its keyframe).
    seek_to(ts);
  }

  void seek_to(std::int64_t ts) {
    loop_.seek(ts);
    seek_ts_ = ts;
    seeked_ = true;
    have_prev_ = false;
  }

  // The demuxer landed on a keyframe displayed after the target: back off
  // further (1 s, 2 s, 4 s...), down to the start of the stream.
  void seek_back() {
    const auto step = std::int64_t(backoff_ / av_q2d(timing().time_base));
    backoff_ *= 2;
    if (seek_ts_ - step <= timing().start_pts) {
      seek_to(timing().start_pts);
      seeked_ = false;  // decoding from the start: the first frame is the earliest
    } else {
      seek_to(seek_ts_ - step);
    }
  }

  void on_frame(double ft) {
    // Targets displayed before this frame are shown by the previous one.
    while (next_ < targets_.times.size() && targets_.times[next_] < ft - eps_) {
      if (have_prev_) {
        emit(prev_.get());
      } else if (!seeked_) {
        emit(frame_.get());  // before the first frame: the first frame
      } else {
        seek_back();
        av_frame_unref(frame_.get());
        return;
      }
    }
    // This frame is the one for targets at (about) its own time.
    while (next_ < targets_.times.size() && targets_.times[next_] <= ft + eps_) emit(frame_.get());
    av_frame_unref(prev_.get());
    av_frame_move_ref(prev_.get(), frame_.get());
    prev_time_ = ft;
    have_prev_ = true;
  }

  // Writes `f` into every slot of the next target.
  void emit(AVFrame* f) {
    const auto& shape = writer_.prepare(f);
    if (!out_.defined() || out_.ndim() == 0) {
      std::vector<std::int64_t> full(shape);
      full.insert(full.begin(), targets_.count);
      out_ = Tensor::empty(DType::uint8, full, allocator_);
    }
    const std::size_t n = writer_.frame_bytes();
    auto* base = out_.data_as<std::uint8_t>();
    const auto& slots = targets_.slots[next_];
    writer_.write(base + n * std::size_t(slots[0]));
    for (std::size_t i = 1; i < slots.size(); ++i) {
      std::memcpy(base + n * std::size_t(slots[i]), base + n * std::size_t(slots[0]), n);
    }
    ++next_;
    loop_.set_wanted(std::span<const double>(targets_.times).subspan(next_));
    seek_check_ = true;
    backoff_ = 1.0;
  }

  OpenVideo& v_;
  const Targets& targets_;
  detail::FrameWriter writer_;
  const Allocator& allocator_;
  const std::string& name_;
  const double eps_;
  detail::DecodeLoop loop_;
  detail::FramePtr frame_;
  detail::FramePtr prev_;
  Tensor out_;
  std::size_t next_ = 0;
  bool have_prev_ = false;
  double prev_time_ = 0;
  bool seeked_ = false;
  bool seek_check_ = true;
  std::int64_t seek_ts_ = 0;
  double backoff_ = 1.0;
};

// Every frame in [start, end): decoded in order and concatenated.
Tensor decode_range(OpenVideo& v, const ImageOptions& image, double start, double end,
                    const Allocator& allocator, const std::string& name) {
  if (!(start >= 0)) invalid(name, "range start must be >= 0");
  const detail::StreamTiming& timing = v.stream.timing();
  detail::DecodeLoop loop(v.stream, v.decoder);
  if (start > 0 && v.stream.indexed()) loop.seek(v.stream.to_pts(start));
  detail::FrameWriter writer(image, name);
  // Frames go straight into the output, sized from the container's frame
  // count and grown (doubling) if the stream holds more.
  Tensor out;
  std::int64_t count = 0, capacity = 0;
  detail::FramePtr frame = detail::make_frame();
  const double eps = std::min(0.25 * timing.frame_duration, 0.01);
  double ft = 0;
  while (loop.next(frame.get(), ft)) {
    if (ft < start - eps || (end >= 0 && ft >= end - eps)) continue;
    const std::vector<std::int64_t>& frame_shape = writer.prepare(frame.get());
    if (count == capacity) {
      const double span = (end >= 0 ? std::min(end, timing.duration) : timing.duration) - start;
      capacity = std::max<std::int64_t>({capacity * 2, std::llround(span * timing.fps) + 1, 16});
      std::vector<std::int64_t> shape(frame_shape);
      shape.insert(shape.begin(), capacity);
      Tensor grown = Tensor::empty(DType::uint8, shape, allocator);
      if (count > 0)
        std::memcpy(grown.data(), out.data(), std::size_t(count) * writer.frame_bytes());
      out = std::move(grown);
    }
    writer.write(out.data_as<std::uint8_t>() + std::size_t(count) * writer.frame_bytes());
    ++count;
  }
  if (count == 0) throw MediaError(ErrorCode::bad_data, name, "no frame in the selected range");
  std::vector<std::int64_t> shape = out.shape();
  shape[0] = count;
  return Tensor(DType::uint8, std::move(shape), out.owner(), out.data());
}

}  // namespace

VideoInfo probe_video(const Source& source) {
  detail::Input input(source, true);
  const int index = input.find_stream(AVMEDIA_TYPE_VIDEO);
  return detail::video_info(input.get(), index);
}

Tensor load_video(const Source& source, const VideoOptions& options, const Allocator& allocator) {
  DecodeStats local;
  DecodeStats& stats = options.stats != nullptr ? *options.stats : local;
  stats = {};
  const std::string& name = source.name();
  OpenVideo video(source, options.threads, stats);
  const FrameSelection& sel = options.frames;
  if (sel.kind == FrameSelection::Kind::all)
    return decode_range(video, options.image, 0, -1, allocator, name);
  if (sel.kind == FrameSelection::Kind::range && sel.fps <= 0) {
    return decode_range(video, options.image, sel.start, sel.end, allocator, name);
  }
  if (sel.kind == FrameSelection::Kind::evenly_spaced && video.stream.timing().frames <= 0) {
    // No frame count (raw streams): decode everything, then pick.
    if (sel.count <= 0) invalid(name, "evenly_spaced needs a positive frame count");
    const Tensor all = decode_range(video, options.image, 0, -1, {}, name);
    std::vector<std::int64_t> shape = all.shape();
    const std::int64_t total = shape[0];
    shape[0] = sel.count;
    Tensor out = Tensor::empty(DType::uint8, shape, allocator);
    const std::size_t n = all.nbytes() / std::size_t(total);
    for (int i = 0; i < sel.count; ++i) {
      const std::int64_t idx =
          sel.count == 1 ? 0 : std::llround(double(i) * double(total - 1) / (sel.count - 1));
      std::memcpy(out.data_as<std::uint8_t>() + n * std::size_t(i),
                  all.data_as<std::uint8_t>() + n * std::size_t(idx), n);
    }
    return out;
  }
  const Targets targets = plan_targets(sel, video.stream.timing(), name);
  SelectiveDecoder decoder(video, targets, options.image, allocator, name);
  decoder.clamp_ = sel.kind == FrameSelection::Kind::evenly_spaced;
  return decoder.run();
}

}  // namespace brigade::media::ffmpeg
