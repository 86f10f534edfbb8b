// The FFmpeg plugin (media/detail/plugin.h): loaded on first need, never for JPEG through
// the transforms. Each check runs in a fresh process (a threadsafe death test re-runs
// this binary for the one test), since a process loads the plugin at most once; the
// child's exit code is the check's result.
#include "media/detail/plugin.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "media/errors.h"
#include "media/image.h"
#include "media/synthetic.h"
#include "media/transform.h"
#include "media/video.h"

namespace brigade::media {
namespace {

bool mapped(const std::string& library) {
  std::ifstream in("/proc/self/maps");
  std::stringstream s;
  s << in.rdbuf();
  return s.str().find(library) != std::string::npos;
}

VideoSpec short_clip() {
  VideoSpec spec;
  spec.frames = 4;
  return spec;
}

int decode_jpeg_through_the_transform() {
  const Bytes jpeg = encode_jpeg(synthetic_rgb(320, 240, 3), 320, 240);
  const Tensor out = load_transformed(Source::memory(jpeg, "a.jpg"), TransformOptions{}, 0);
  if (out.shape() != std::vector<std::int64_t>{224, 224, 3}) return 2;
  const bool loaded = detail::ffmpeg_plugin_loaded() || mapped(detail::kPluginFile) ||
                      mapped("libavcodec") || mapped("libavutil");
  return loaded ? 1 : 0;
}

int decode_a_video() {
  if (detail::ffmpeg_plugin_loaded() || mapped("libavcodec")) return 3;
  const Bytes clip = make_video(short_clip());
  VideoOptions options;
  options.frames = FrameSelection::evenly_spaced(2);
  const Tensor frames = load_video(Source::memory(clip, "clip.mp4"), options);
  if (frames.shape()[0] != 2) return 2;
  const bool loaded =
      detail::ffmpeg_plugin_loaded() && mapped(detail::kPluginFile) && mapped("libavcodec");
  return loaded ? 0 : 1;
}

int decode_without_the_plugin() {
  setenv(detail::kPluginEnv, "/nonexistent/libbrigade_media_ffmpeg.so", 1);
  try {
    make_video(short_clip());
  } catch (const MediaError& e) {
    const std::string& cause = e.cause();
    const bool named =
        e.code() == ErrorCode::unsupported && e.input() == "synthetic video" &&
        cause.find("/nonexistent/libbrigade_media_ffmpeg.so: ") != std::string::npos &&
        cause.find("No such file") != std::string::npos;
    return named && !detail::ffmpeg_plugin_loaded() ? 0 : 1;
  }
  return 2;
}

class Plugin : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(Plugin, JpegThroughTheTransformDoesNotLoadIt) {
  EXPECT_EXIT(std::_Exit(decode_jpeg_through_the_transform()), ::testing::ExitedWithCode(0), "");
}

TEST_F(Plugin, VideoDecodeLoadsIt) {
  EXPECT_EXIT(std::_Exit(decode_a_video()), ::testing::ExitedWithCode(0), "");
}

TEST_F(Plugin, MissingPluginErrorNamesThePathAndTheCause) {
  EXPECT_EXIT(std::_Exit(decode_without_the_plugin()), ::testing::ExitedWithCode(0), "");
}

// The plugin builds its own copy of errors.cc; its errors must still carry the core's
// category, or their error_code would not compare equal to the core's (and would print
// as "brigade.media:4" instead of bad_data).
TEST(PluginErrors, CarryTheCoresErrorCategory) {
  Bytes png = make_image(ImageCodec::png, 32, 24, 1);
  png.resize(png.size() / 2);
  std::fill(png.begin() + 40, png.end(), std::uint8_t{7});
  try {
    load_image(Source::memory(png, "bad.png"));
    FAIL() << "a corrupt PNG decoded";
  } catch (const MediaError& e) {
    EXPECT_EQ(e.code(), ErrorCode::bad_data) << e.what();
    EXPECT_EQ(e.error_code(), make_error_code(ErrorCode::bad_data));
    EXPECT_EQ(&e.error_code().category(), &media_category());
  }
}

}  // namespace
}  // namespace brigade::media
