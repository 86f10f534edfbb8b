// Random mutations of valid media: every result must be a success or a
// MediaError (never a crash, a hang, another exception or a sanitizer report).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <random>

#include "media/array.h"
#include "media/audio.h"
#include "media/errors.h"
#include "media/image.h"
#include "media/synthetic.h"
#include "media/transform.h"
#include "media/video.h"
#include "tests/media/npy_writer.h"

namespace brigade::media {
namespace {

struct Corpus {
  std::string kind;
  Bytes bytes;
  std::function<void(const Bytes&)> load;
};

Bytes npy_bytes() {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 8), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string file = std::string("\x93NUMPY\x01\x00", 8) + char(header.size()) + '\0' + header;
  for (int i = 0; i < 32 * 4; ++i) file += char(i);
  return Bytes(file.begin(), file.end());
}

Bytes npz_bytes(bool deflate) {
  const float x[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  const std::int64_t y[2] = {7, 8};
  return testing::make_zip({{"x.npy", testing::make_npy("<f4", "(3, 4)", x, sizeof(x))},
                            {"y.npy", testing::make_npy("<i8", "(2,)", y, sizeof(y))}},
                           deflate);
}

std::vector<Corpus> corpus() {
  ImageOptions small;
  small.resize = ResizeMode::shorter_side_crop;
  small.width = small.height = 24;
  small.shorter_side = 32;
  auto image = [small](const Bytes& b) {
    Tensor t = load_image(Source::memory(b, "mutant"), small);
    if (t.shape() != std::vector<std::int64_t>{24, 24, 3})
      throw std::logic_error("bad image shape");
  };
  auto video = [](const Bytes& b) {
    VideoOptions o;
    o.frames = FrameSelection::evenly_spaced(3);
    o.image.resize = ResizeMode::stretch;
    o.image.width = o.image.height = 16;
    Tensor t = load_video(Source::memory(b, "mutant"), o);
    if (t.shape() != std::vector<std::int64_t>{3, 16, 16, 3})
      throw std::logic_error("bad video shape");
  };
  auto audio = [](const Bytes& b) {
    AudioOptions o;
    o.sample_rate = 8000;
    o.channels = 1;
    load_audio(Source::memory(b, "mutant"), o);
  };
  // The transforms' own JPEG path (libjpeg: region, DCT scaling, EXIF) and the fallback.
  auto train = [](const Bytes& b) {
    TransformOptions o;
    o.kind = TransformKind::train;
    o.size = 32;
    o.exif_orientation = true;
    for (std::uint64_t id = 0; id < 2; ++id) load_transformed(Source::memory(b, "mutant"), o, id);
  };
  auto eval = [](const Bytes& b) {
    TransformOptions o;
    o.size = 16;
    o.resize = 18;
    load_transformed(Source::memory(b, "mutant"), o, 0);
  };
  auto npy = [](const Bytes& b) { load_npy(b, "mutant"); };
  auto npz = [](const Bytes& b) { load_npz(b, "mutant"); };
  auto clip = [](VideoCodec c) {
    return make_video({.codec = c,
                       .width = 48,
                       .height = 32,
                       .frames = 8,
                       .fps = 8,
                       .gop = 4,
                       .b_frames = 2,
                       .seed = 5});
  };
  auto sound = [](AudioCodec c) {
    return make_audio({.codec = c, .sample_rate = 8000, .channels = 1, .seconds = 0.3, .seed = 6});
  };
  return {
      {"jpeg", make_image(ImageCodec::jpeg, 48, 40, 1), image},
      {"jpeg-train", make_image(ImageCodec::jpeg, 160, 120, 7), train},
      {"jpeg-eval", make_image(ImageCodec::jpeg, 200, 90, 8), eval},
      {"png-train", make_image(ImageCodec::png, 40, 30, 9), train},
      {"png", make_image(ImageCodec::png, 40, 30, 2), image},
      {"webp", make_image(ImageCodec::webp, 40, 30, 3), image},
      {"bmp", make_image(ImageCodec::bmp, 36, 30, 4), image},
      {"h264", clip(VideoCodec::h264), video},
      {"mpeg4", clip(VideoCodec::mpeg4), video},
      {"vp9-webm", clip(VideoCodec::vp9), video},
      {"mjpeg-avi", clip(VideoCodec::mjpeg), video},
      {"wav", sound(AudioCodec::wav), audio},
      {"aac", sound(AudioCodec::aac), audio},
      {"flac", sound(AudioCodec::flac), audio},
      {"npy", npy_bytes(), npy},
      {"npz-stored", npz_bytes(false), npz},
      {"npz-deflated", npz_bytes(true), npz},
  };
}

Bytes mutate(const Bytes& in, std::mt19937_64& rng) {
  Bytes b = in;
  auto pos = [&] { return b.empty() ? 0 : std::size_t(rng() % b.size()); };
  switch (rng() % 6) {
    case 0:  // flip a few bytes
      for (int i = 0, n = 1 + int(rng() % 8); i < n && !b.empty(); ++i)
        b[pos()] ^= std::uint8_t(1 + rng() % 255);
      break;
    case 1:  // truncate
      b.resize(pos());
      break;
    case 2: {  // zero a range
      const std::size_t p = pos(), n = std::min<std::size_t>(b.size() - p, 1 + rng() % 64);
      std::fill(b.begin() + p, b.begin() + p + n, 0);
      break;
    }
    case 3: {  // insert random bytes
      Bytes junk(1 + rng() % 32);
      for (auto& j : junk) j = std::uint8_t(rng());
      b.insert(b.begin() + std::ptrdiff_t(pos()), junk.begin(), junk.end());
      break;
    }
    case 4: {  // set bytes to 0xFF (large lengths and sizes)
      for (int i = 0, n = 1 + int(rng() % 4); i < n && !b.empty(); ++i) b[pos()] = 0xFF;
      break;
    }
    default: {  // duplicate a chunk
      const std::size_t p = pos(), n = std::min<std::size_t>(b.size() - p, 1 + rng() % 256);
      Bytes chunk(b.begin() + std::ptrdiff_t(p), b.begin() + std::ptrdiff_t(p + n));
      b.insert(b.begin() + std::ptrdiff_t(pos()), chunk.begin(), chunk.end());
    }
  }
  return b;
}

TEST(Robustness, MutatedInputsGiveSuccessOrTypedError) {
  std::mt19937_64 rng(20261129);
  const std::vector<Corpus> inputs = corpus();
  constexpr int kPerFormat = 150;  // 17 formats: 2,550 mutations
  int total = 0, ok = 0, typed = 0;
  for (const Corpus& c : inputs) {
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_NO_THROW(c.load(c.bytes)) << c.kind << " must load unmutated";
    for (int i = 0; i < kPerFormat; ++i) {
      const Bytes m = mutate(c.bytes, rng);
      ++total;
      try {
        c.load(m);
        ++ok;
      } catch (const MediaError& e) {
        ++typed;
        EXPECT_NE(std::string(e.what()).find("mutant"), std::string::npos) << e.what();
      } catch (const std::exception& e) {
        ADD_FAILURE() << c.kind << " mutation " << i << ": untyped exception: " << e.what();
      }
    }
    // A slow format under mutation hints at a missing size check.
    std::fprintf(
        stderr, "%s: %.0f ms\n", c.kind.c_str(),
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::fprintf(stderr, "mutations: %d, succeeded: %d, typed errors: %d\n", total, ok, typed);
  EXPECT_GE(total, 1000);
}

}  // namespace
}  // namespace brigade::media
