#include "media/synthetic.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "media/errors.h"
#include "media/source.h"
#include "media/video.h"

namespace brigade::media {
namespace {

TEST(Synthetic, ImagesAreTexturedAndDeterministic) {
  const Bytes a = synthetic_rgb(64, 48, 1);
  EXPECT_EQ(a, synthetic_rgb(64, 48, 1));
  EXPECT_NE(a, synthetic_rgb(64, 48, 2));
  // Not flat: neighbouring pixels differ and the histogram is spread.
  double sum = 0, sq = 0;
  for (auto v : a) {
    sum += v;
    sq += double(v) * v;
  }
  const double mean = sum / a.size(), sd = std::sqrt(sq / a.size() - mean * mean);
  EXPECT_GT(sd, 20.0);
}

TEST(Synthetic, JpegIsBaseline420) {
  const Bytes jpeg = make_image(ImageCodec::jpeg, 64, 48, 3);
  bool sof0 = false, sof2 = false;
  for (std::size_t i = 0; i + 11 < jpeg.size(); ++i) {
    if (jpeg[i] != 0xFF) continue;
    if (jpeg[i + 1] == 0xC2) sof2 = true;
    if (jpeg[i + 1] == 0xC0) {
      sof0 = true;
      EXPECT_EQ(jpeg[i + 9], 3);      // three components
      EXPECT_EQ(jpeg[i + 11], 0x22);  // Y sampled 2x2: 4:2:0
      break;
    }
  }
  EXPECT_TRUE(sof0);
  EXPECT_FALSE(sof2);
}

TEST(Synthetic, VideoAndAudioAreDeterministic) {
  const VideoSpec v{.codec = VideoCodec::h264,
                    .width = 64,
                    .height = 48,
                    .frames = 6,
                    .fps = 6,
                    .gop = 3,
                    .b_frames = 1,
                    .seed = 4};
  EXPECT_EQ(make_video(v), make_video(v));
  const AudioSpec a{
      .codec = AudioCodec::aac, .sample_rate = 16000, .channels = 2, .seconds = 0.2, .seed = 4};
  EXPECT_EQ(make_audio(a), make_audio(a));
}

TEST(Synthetic, X264DefaultClipsHaveOneKeyframeAndABPyramid) {
  const VideoSpec spec{.codec = VideoCodec::h264,
                       .width = 384,
                       .height = 216,
                       .frames = 60,
                       .fps = 30,
                       .gop = 12,  // ignored: x264's keyint 250
                       .b_frames = 0,
                       .seed = 5,
                       .profile = VideoProfile::x264_default};
  const Bytes clip = make_video(spec);
  EXPECT_EQ(clip, make_video(spec));
  Demuxer demuxer(Source::memory(clip));
  EXPECT_EQ(demuxer.info().frames, 60);
  int packets = 0, keyframes = 0, reordered = 0, pyramids = 0;
  double prev = -1, prev2 = -1;
  while (std::optional<Packet> p = demuxer.next()) {
    ++packets;
    keyframes += p->keyframe();
    // In decode order, a B-frame comes after the later frame it refers to; a
    // B-pyramid (P8 B6 b5 b7) puts two such steps back in a row.
    reordered += p->time() < prev;
    pyramids += p->time() < prev && prev < prev2;
    prev2 = prev;
    prev = p->time();
  }
  EXPECT_EQ(packets, 60);
  EXPECT_EQ(keyframes, 1);
  EXPECT_GE(reordered, 20);
  EXPECT_GE(pyramids, 5);
}

TEST(Synthetic, WritesFiles) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "brigade_synthetic_test.png").string();
  const Bytes png = make_image(ImageCodec::png, 16, 16, 5);
  write_file(path, png);
  EXPECT_EQ(read_file(path), png);
  std::filesystem::remove(path);
  EXPECT_THROW(write_file("/nonexistent/dir/x.png", png), MediaError);
}

TEST(Synthetic, RejectsBadParameters) {
  EXPECT_THROW(synthetic_rgb(0, 10, 1), MediaError);
  EXPECT_THROW(make_video({.codec = VideoCodec::h264,
                           .width = 63,
                           .height = 48,
                           .frames = 1,
                           .fps = 1,
                           .gop = 1,
                           .b_frames = 0,
                           .seed = 0}),
               MediaError);
}

}  // namespace
}  // namespace brigade::media
