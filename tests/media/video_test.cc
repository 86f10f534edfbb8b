#include "media/video.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "media/errors.h"
#include "media/synthetic.h"

// libx265 (used only to make the HEVC test clip) leaks a little at encoder
// open; LeakSanitizer reads this hook in sanitizer builds (unused otherwise).
extern "C" const char* __lsan_default_suppressions() { return "leak:libx265.so\n"; }

namespace brigade::media {
namespace {

VideoOptions pick(FrameSelection frames) {
  VideoOptions o;
  o.frames = std::move(frames);
  return o;
}

const Bytes& h264_clip() {
  static const Bytes clip = make_video({.codec = VideoCodec::h264,
                                        .width = 128,
                                        .height = 96,
                                        .frames = 48,
                                        .fps = 24,
                                        .gop = 12,
                                        .b_frames = 2,
                                        .seed = 1});
  return clip;
}

const Tensor& all_h264_frames() {
  static const Tensor all = load_video(Source::memory(h264_clip(), "clip.mp4"));
  return all;
}

bool same_frame(const Tensor& a, std::int64_t i, const Tensor& b, std::int64_t j) {
  Tensor x = a[i], y = b[j];
  return x.nbytes() == y.nbytes() && std::memcmp(x.data(), y.data(), x.nbytes()) == 0;
}

TEST(Video, ProbeReportsStreamFacts) {
  VideoInfo info = probe_video(Source::memory(h264_clip()));
  EXPECT_EQ(info.width, 128);
  EXPECT_EQ(info.height, 96);
  EXPECT_NEAR(info.fps, 24, 1e-6);
  EXPECT_EQ(info.frames, 48);
  EXPECT_NEAR(info.duration, 2.0, 0.05);
  EXPECT_EQ(info.codec, "h264");
}

TEST(Video, AllFramesDecodeInOrder) {
  const Tensor& all = all_h264_frames();
  ASSERT_EQ(all.shape(), (std::vector<std::int64_t>{48, 96, 128, 3}));
  EXPECT_FALSE(same_frame(all, 0, all, 1));  // there is motion
}

TEST(Video, EvenlySpacedFramesMatchFullDecode) {
  Tensor eight = load_video(Source::memory(h264_clip()), pick(FrameSelection::evenly_spaced(8)));
  ASSERT_EQ(eight.shape(), (std::vector<std::int64_t>{8, 96, 128, 3}));
  for (int i = 0; i < 8; ++i) {
    const std::int64_t idx = std::lround(i * 47.0 / 7);
    EXPECT_TRUE(same_frame(eight, i, all_h264_frames(), idx)) << "frame " << i << " index " << idx;
  }
}

TEST(Video, SeeksAndSkipsInsteadOfDecodingEverything) {
  const Bytes clip = make_video({.codec = VideoCodec::h264,
                                 .width = 96,
                                 .height = 64,
                                 .frames = 120,
                                 .fps = 24,
                                 .gop = 24,
                                 .b_frames = 2,
                                 .seed = 9});
  DecodeStats all_stats, stats;
  VideoOptions all;
  all.stats = &all_stats;
  const Tensor every = load_video(Source::memory(clip), all);
  EXPECT_EQ(all_stats.frames, 120);
  VideoOptions four = pick(FrameSelection::at({0.1, 1.6, 2.6, 4.5}));
  four.stats = &stats;
  const Tensor t = load_video(Source::memory(clip), four);
  EXPECT_GE(stats.seeks, 2);
  EXPECT_LT(stats.packets, 80);
  EXPECT_GT(stats.packets_skippable, 0);
  EXPECT_LT(stats.frames, stats.packets);  // skipped non-reference frames return nothing
  const std::int64_t idx[] = {2, 38, 62, 108};
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(same_frame(t, i, every, idx[i])) << i;
}

// Like users' videos: x264's defaults (one keyframe, B-pyramid), 2 s at 30 fps.
const Bytes& x264_default_clip() {
  static const Bytes clip = make_video({.codec = VideoCodec::h264,
                                        .width = 384,
                                        .height = 216,
                                        .frames = 60,
                                        .fps = 30,
                                        .gop = 12,
                                        .b_frames = 2,
                                        .seed = 5,
                                        .profile = VideoProfile::x264_default});
  return clip;
}

TEST(Video, SelectionsOnX264DefaultClipsMatchFullDecode) {
  const Tensor all =
      load_video(Source::memory(x264_default_clip()), pick(FrameSelection::all_frames()));
  ASSERT_EQ(all.dim(0), 60);
  for (int threads : {1, 2}) {
    VideoOptions eight = pick(FrameSelection::evenly_spaced(8));
    eight.threads = threads;
    const Tensor t = load_video(Source::memory(x264_default_clip()), eight);
    ASSERT_EQ(t.dim(0), 8);
    for (int i = 0; i < 8; ++i) {
      const std::int64_t idx = std::lround(i * 59.0 / 7);
      EXPECT_TRUE(same_frame(t, i, all, idx)) << "threads " << threads << " index " << idx;
    }
  }
  // Every frame of the first mini-GOPs (P, referenced B, unreferenced b), times
  // between frames, repeats and the last frame.
  std::vector<double> times;
  std::vector<std::int64_t> expected;
  for (int k = 1; k <= 13; ++k) {
    times.push_back(k / 30.0);
    expected.push_back(k);
  }
  for (double f : {33.5, 20.6, 33.5, 46.2, 59.0}) {
    times.push_back(f / 30.0);
    expected.push_back(std::int64_t(f));
  }
  const Tensor at =
      load_video(Source::memory(x264_default_clip()), pick(FrameSelection::at(times)));
  for (std::size_t i = 0; i < times.size(); ++i)
    EXPECT_TRUE(same_frame(at, std::int64_t(i), all, expected[i])) << "time " << times[i];
  const Tensor sampled =
      load_video(Source::memory(x264_default_clip()), pick(FrameSelection::range(0.5, 1.5, 10)));
  ASSERT_EQ(sampled.dim(0), 10);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(same_frame(sampled, i, all, 15 + 3 * i)) << i;
}

TEST(Video, SkipsUnselectedNonReferenceFramesAndTheTail) {
  DecodeStats all_stats, stats, early;
  VideoOptions all = pick(FrameSelection::all_frames());
  all.stats = &all_stats;
  load_video(Source::memory(x264_default_clip()), all);
  EXPECT_EQ(all_stats.packets, 60);
  EXPECT_EQ(all_stats.frames, 60);
  EXPECT_EQ(all_stats.packets_skippable, 0);
  VideoOptions eight = pick(FrameSelection::evenly_spaced(8));
  eight.stats = &stats;
  load_video(Source::memory(x264_default_clip()), eight);
  EXPECT_EQ(stats.seeks, 0);  // no keyframe to seek to
  EXPECT_EQ(stats.packets, 60);
  // About half the frames are unreferenced B-frames: all but the selected
  // ones are skipped, the referenced B-frames are not.
  EXPECT_GE(stats.packets_skippable, 40);
  EXPECT_LE(stats.frames, 40);
  EXPECT_GE(stats.frames, 8);
  EXPECT_LT(stats.frames, stats.packets - 20);
  VideoOptions one = pick(FrameSelection::at({0.5}));
  one.stats = &early;
  load_video(Source::memory(x264_default_clip()), one);
  EXPECT_LT(early.packets, 30);  // stops reading after frame 15
}

TEST(Video, TimestampsSelectTheDisplayedFrame) {
  Tensor t = load_video(Source::memory(h264_clip()),
                        pick(FrameSelection::at({1.0, 0.5, 0.5, 0.02, 1.99})));
  ASSERT_EQ(t.dim(0), 5);
  const std::int64_t expected[] = {24, 12, 12, 0, 47};
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(same_frame(t, i, all_h264_frames(), expected[i])) << i;
}

TEST(Video, RangeSelections) {
  Tensor sampled =
      load_video(Source::memory(h264_clip()), pick(FrameSelection::range(0.5, 1.0, 12)));
  ASSERT_EQ(sampled.dim(0), 6);
  for (int i = 0; i < 6; ++i)
    EXPECT_TRUE(same_frame(sampled, i, all_h264_frames(), 12 + 2 * i)) << i;
  Tensor every = load_video(Source::memory(h264_clip()), pick(FrameSelection::range(1.0, 1.5)));
  ASSERT_EQ(every.dim(0), 12);
  for (int i = 0; i < 12; ++i) EXPECT_TRUE(same_frame(every, i, all_h264_frames(), 24 + i)) << i;
}

TEST(Video, RawStreamsWithoutIndexOrFrameCount) {
  const VideoSpec spec{.codec = VideoCodec::h264,
                       .width = 128,
                       .height = 96,
                       .frames = 48,
                       .fps = 24,
                       .gop = 12,
                       .b_frames = 2,
                       .seed = 1};
  for (const char* container : {"h264", "matroska"}) {
    const Bytes clip = make_video(spec, container);
    Tensor all = load_video(Source::memory(clip));
    ASSERT_EQ(all.dim(0), 48) << container;
    EXPECT_TRUE(same_frame(all, 47, all_h264_frames(), 47)) << container;
    Tensor eight = load_video(Source::memory(clip), pick(FrameSelection::evenly_spaced(8)));
    for (int i = 0; i < 8; ++i) {
      EXPECT_TRUE(same_frame(eight, i, all_h264_frames(), std::lround(i * 47.0 / 7)))
          << container << " " << i;
    }
  }
}

TEST(Video, ResizesAndConvertsFrames) {
  VideoOptions o = pick(FrameSelection::evenly_spaced(3));
  o.image.resize = ResizeMode::stretch;
  o.image.width = 64;
  o.image.height = 48;
  o.image.format = PixelFormat::yuv420p;
  EXPECT_EQ(load_video(Source::memory(h264_clip()), o).shape(),
            (std::vector<std::int64_t>{3, 72, 64}));
  o.image = {};
  o.image.filter_desc = "hflip";
  Tensor flipped = load_video(Source::memory(h264_clip()), o);
  ASSERT_EQ(flipped.shape(), (std::vector<std::int64_t>{3, 96, 128, 3}));
  const auto* a = all_h264_frames()[0].data_as<std::uint8_t>();
  const auto* b = flipped[0].data_as<std::uint8_t>();
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(a[c], b[127 * 3 + c], 2);
}

TEST(Video, CropAndFlipApplyToEveryFrameAlike) {
  VideoOptions o = pick(FrameSelection::evenly_spaced(3));
  o.image.crop_x = 10;
  o.image.crop_y = 6;
  o.image.crop_width = 64;
  o.image.crop_height = 40;
  o.image.flip = true;
  Tensor t = load_video(Source::memory(h264_clip()), o);
  ASSERT_EQ(t.shape(), (std::vector<std::int64_t>{3, 40, 64, 3}));
  const Tensor& all = all_h264_frames();
  const std::int64_t picked[3] = {0, 24, 47};  // round(i * 47 / 2)
  for (int f = 0; f < 3; ++f) {
    const auto* want = all[picked[f]].data_as<std::uint8_t>();
    const auto* got = t[f].data_as<std::uint8_t>();
    // Unscaled: the full frame's pixels, mirrored (up to the chroma upsampling's
    // rounding: swscale sees only the crop, so the chroma at its edges is extended
    // rather than interpolated from outside it).
    double diff = 0;
    for (int y = 0; y < 40; ++y) {
      for (int x = 0; x < 64; ++x) {
        for (int c = 0; c < 3; ++c) {
          const int d = std::abs(int(got[(y * 64 + 63 - x) * 3 + c]) -
                                 int(want[(std::size_t(y + 6) * 128 + x + 10) * 3 + c]));
          ASSERT_LE(d, 16) << f << " " << x << "," << y;
          diff += d;
        }
      }
    }
    EXPECT_LT(diff / (40 * 64 * 3), 1.0) << f;
  }
  o.image.crop_x = 100;  // 100 + 64 > 128
  EXPECT_THROW(load_video(Source::memory(h264_clip()), o), MediaError);
}

TEST(Video, OtherCodecsDecode) {
  for (VideoCodec codec : {VideoCodec::mpeg4, VideoCodec::hevc, VideoCodec::vp9, VideoCodec::av1}) {
    const Bytes clip = make_video({.codec = codec,
                                   .width = 64,
                                   .height = 48,
                                   .frames = 12,
                                   .fps = 12,
                                   .gop = 6,
                                   .b_frames = 2,
                                   .seed = 2});
    Tensor all = load_video(Source::memory(clip));
    ASSERT_EQ(all.shape(), (std::vector<std::int64_t>{12, 48, 64, 3})) << int(codec);
    Tensor four = load_video(Source::memory(clip), pick(FrameSelection::evenly_spaced(4)));
    for (int i = 0; i < 4; ++i) {
      EXPECT_TRUE(same_frame(four, i, all, std::lround(i * 11.0 / 3))) << int(codec) << " " << i;
    }
  }
}

TEST(Video, MjpegFullRangeFramesMatchTheSameContentInH264) {
  // MJPEG decodes to the deprecated yuvj420p: it must be read as full range,
  // or every pixel's contrast is off by 16/255 steps.
  const VideoSpec spec{.codec = VideoCodec::mjpeg,
                       .width = 128,
                       .height = 96,
                       .frames = 48,
                       .fps = 24,
                       .gop = 12,
                       .b_frames = 0,
                       .seed = 1};
  const Tensor mjpeg = load_video(Source::memory(make_video(spec), "clip.avi"),
                                  pick(FrameSelection::evenly_spaced(4)));
  const Tensor& h264 = all_h264_frames();
  for (int i = 0; i < 4; ++i) {
    const std::int64_t idx = std::lround(i * 47.0 / 3);
    const auto* a = mjpeg[i].data_as<std::uint8_t>();
    const auto* b = h264[idx].data_as<std::uint8_t>();
    double diff = 0, sa = 0, sb = 0, qa = 0, qb = 0;
    const std::size_t n = std::size_t(mjpeg[i].nbytes());
    for (std::size_t k = 0; k < n; ++k) {
      diff += std::abs(int(a[k]) - int(b[k]));
      sa += a[k];
      sb += b[k];
      qa += double(a[k]) * a[k];
      qb += double(b[k]) * b[k];
    }
    const double sd_a = std::sqrt(qa / n - (sa / n) * (sa / n)),
                 sd_b = std::sqrt(qb / n - (sb / n) * (sb / n));
    EXPECT_LT(diff / double(n), 8.0) << i;
    EXPECT_NEAR(sd_a / sd_b, 1.0, 0.05) << i;  // a range mix-up scales contrast by 255/219
  }
}

TEST(Video, StreamingReaderMatchesLoadVideo) {
  VideoReader reader(Source::memory(h264_clip()), ImageOptions{});
  std::int64_t total = 0;
  while (std::optional<Tensor> chunk = reader.next_chunk(20)) {
    EXPECT_LE(chunk->dim(0), 20);
    for (std::int64_t i = 0; i < chunk->dim(0); ++i)
      EXPECT_TRUE(same_frame(*chunk, i, all_h264_frames(), total + i));
    total += chunk->dim(0);
  }
  EXPECT_EQ(total, 48);
}

TEST(Video, ReadsFilesWhateverTheirExtension) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "brigade_video_test_mp4_named.avi").string();
  write_file(path, h264_clip());
  Tensor t = load_video(Source::file(path), pick(FrameSelection::at({0.5})));
  std::filesystem::remove(path);
  EXPECT_TRUE(same_frame(t, 0, all_h264_frames(), 12));
}

TEST(Video, DemuxerDecoderConverterPipeline) {
  Demuxer demuxer(Source::memory(h264_clip()));
  VideoDecoder decoder(demuxer);
  FrameConverter converter(ImageOptions{});
  demuxer.seek(1.0);
  decoder.reset();
  std::optional<Frame> first;
  while (!first) {
    std::optional<Packet> p = demuxer.next();
    ASSERT_TRUE(p.has_value());
    decoder.send(*p);
    first = decoder.receive();
  }
  EXPECT_NEAR(first->time(), 1.0, 1e-6);  // keyframes every 12 frames: 1.0 s is one
  Tensor t = converter.convert(*first);
  EXPECT_EQ(std::memcmp(t.data(), all_h264_frames()[24].data(), t.nbytes()), 0);
}

ErrorCode video_error(const Bytes& bytes, const VideoOptions& o = {}) {
  try {
    load_video(Source::memory(bytes, "bad-video"), o);
  } catch (const MediaError& e) {
    EXPECT_NE(std::string(e.what()).find("bad-video"), std::string::npos);
    return e.code();
  }
  ADD_FAILURE() << "no error";
  return ErrorCode::io;
}

TEST(Video, BadInputsGiveTypedErrors) {
  EXPECT_EQ(video_error(h264_clip(), pick(FrameSelection::at({10.0}))),
            ErrorCode::invalid_argument);
  EXPECT_EQ(video_error(h264_clip(), pick(FrameSelection::evenly_spaced(0))),
            ErrorCode::invalid_argument);
  const Bytes audio = make_audio(
      {.codec = AudioCodec::wav, .sample_rate = 16000, .channels = 1, .seconds = 0.1, .seed = 0});
  EXPECT_EQ(video_error(audio), ErrorCode::unsupported);
  const Bytes truncated(h264_clip().begin(), h264_clip().begin() + h264_clip().size() / 3);
  EXPECT_EQ(video_error(truncated), ErrorCode::bad_data);
  const Bytes empty;
  EXPECT_EQ(video_error(empty), ErrorCode::bad_data);
  Bytes unknown_codec = h264_clip();
  for (std::size_t i = 0; i + 4 < unknown_codec.size(); ++i) {
    if (std::memcmp(&unknown_codec[i], "avc1", 4) == 0) std::memcpy(&unknown_codec[i], "zzzz", 4);
  }
  EXPECT_EQ(video_error(unknown_codec), ErrorCode::unsupported);
  try {
    load_video(Source::file("/nonexistent/clip.mp4"));
    FAIL();
  } catch (const MediaError& e) {
    EXPECT_EQ(e.code(), ErrorCode::not_found);
  }
}

}  // namespace
}  // namespace brigade::media
