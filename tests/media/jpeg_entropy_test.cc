#include "media/detail/jpeg_entropy.h"

#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "media/detail/libjpeg.h"
#include "media/errors.h"
#include "tests/media/jpeg_encode.h"

namespace brigade::media {
namespace {

using testing::encode_with;

// Noise over gradients: long codes and large magnitudes (the slow paths), and flat runs.
std::vector<std::uint8_t> noisy_rgb(int w, int h, std::uint32_t seed, int noise) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> n(-noise, noise);
  std::vector<std::uint8_t> px(std::size_t(w) * h * 3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < 3; ++c) {
        const int base = (x * (c + 1) + y * (3 - c)) % 256;
        const int v = (x / 40 + y / 40) % 3 == 0 ? base : base + n(rng);
        px[(std::size_t(y) * w + x) * 3 + c] = std::uint8_t(std::clamp(v, 0, 255));
      }
    }
  }
  return px;
}

struct Image {
  std::vector<std::uint8_t> px;
  int w = 0, h = 0;
};

// libjpeg's own entropy decoder, through TurboJPEG (accurate DCT, fancy upsampling), at
// 1/denom.
Image turbojpeg_decode(const std::vector<std::uint8_t>& jpeg, int denom) {
  std::unique_ptr<void, int (*)(void*)> tj(tjInitDecompress(), tjDestroy);
  int w = 0, h = 0, ss = 0, cs = 0;
  EXPECT_EQ(tjDecompressHeader3(tj.get(), jpeg.data(), jpeg.size(), &w, &h, &ss, &cs), 0);
  Image r;
  r.w = (w + denom - 1) / denom;
  r.h = (h + denom - 1) / denom;
  r.px.resize(std::size_t(r.w) * r.h * 3);
  EXPECT_EQ(tjDecompress2(tj.get(), jpeg.data(), jpeg.size(), r.px.data(), r.w, 0, r.h, TJPF_RGB,
                          TJFLAG_ACCURATEDCT),
            0)
      << tjGetErrorStr2(tj.get());
  return r;
}

// Pixels of `region` that differ from `ref`, over [x0, x1) x [y0, y1) of the scaled image.
long differing(const detail::JpegRegion& region, const Image& ref, int x0, int y0, int x1, int y1) {
  long bad = 0;
  for (int y = y0; y < y1; ++y) {
    for (int x = x0; x < x1; ++x) {
      for (int c = 0; c < 3; ++c) {
        const std::uint8_t a =
            region.data[std::ptrdiff_t(y - region.y0) * region.stride + (x - region.x0) * 3 + c];
        bad += a != ref.px[(std::size_t(y) * ref.w + x) * 3 + c];
      }
    }
  }
  return bad;
}

const int kLayouts[] = {TJSAMP_444, TJSAMP_422, TJSAMP_420, TJSAMP_440, TJSAMP_411, TJSAMP_GRAY};

TEST(JpegEntropy, WholeImagesMatchLibjpegAtEveryScale) {
  const int w = 301, h = 203;
  for (int layout : kLayouts) {
    for (int quality : {30, 90, 100}) {
      const auto jpeg = encode_with(noisy_rgb(w, h, 7, 60), w, h, layout, quality);
      for (int denom : {1, 2, 4, 8}) {
        const Image ref = turbojpeg_decode(jpeg, denom);
        detail::JpegDecoder d(jpeg, "test");
        const detail::JpegRegion r = d.decode(denom, 0, 0, ref.w, ref.h);
        EXPECT_TRUE(d.figures().own_entropy);
        ASSERT_EQ(r.x1 - r.x0, ref.w);
        EXPECT_EQ(differing(r, ref, 0, 0, ref.w, ref.h), 0)
            << "layout " << layout << " quality " << quality << " 1/" << denom;
      }
    }
  }
}

TEST(JpegEntropy, RegionsMatchLibjpegInside) {
  // Regions skip rows above (discarded MCU rows) and columns outside (parsed, not
  // stored): the pixels inside must be libjpeg's. Two pixels in from a region's cut
  // edges, where the decoder's chroma upsampling sees the cut.
  const int w = 517, h = 389;
  std::mt19937 rng(3);
  for (int layout : kLayouts) {
    const auto jpeg = encode_with(noisy_rgb(w, h, 11, 40), w, h, layout, 95);
    for (int denom : {1, 2}) {
      const Image ref = turbojpeg_decode(jpeg, denom);
      for (int trial = 0; trial < 12; ++trial) {
        std::uniform_int_distribution<int> xs(0, ref.w - 1), ys(0, ref.h - 1);
        int x0 = xs(rng), x1 = xs(rng), y0 = ys(rng), y1 = ys(rng);
        if (x0 > x1) std::swap(x0, x1);
        if (y0 > y1) std::swap(y0, y1);
        ++x1;
        ++y1;
        detail::JpegDecoder d(jpeg, "test");
        const detail::JpegRegion r = d.decode(denom, x0, y0, x1, y1);
        EXPECT_TRUE(d.figures().own_entropy);
        const int ix0 = x0 == 0 ? 0 : x0 + 2, iy0 = y0 == 0 ? 0 : y0 + 2;
        const int ix1 = x1 == ref.w ? x1 : x1 - 2, iy1 = y1 == ref.h ? y1 : y1 - 2;
        if (ix0 >= ix1 || iy0 >= iy1) continue;
        EXPECT_EQ(differing(r, ref, ix0, iy0, ix1, iy1), 0)
            << "layout " << layout << " 1/" << denom << " region " << x0 << "," << y0 << " - " << x1
            << "," << y1;
      }
    }
  }
}

TEST(JpegEntropy, ProgressiveFilesKeepLibjpegsDecoder) {
  const int w = 160, h = 120;
  const auto jpeg = encode_with(noisy_rgb(w, h, 5, 30), w, h, TJSAMP_420, 90, TJFLAG_PROGRESSIVE);
  const Image ref = turbojpeg_decode(jpeg, 1);
  detail::JpegDecoder d(jpeg, "test");
  const detail::JpegRegion r = d.decode(1, 0, 0, w, h);
  EXPECT_FALSE(d.figures().own_entropy);
  EXPECT_EQ(differing(r, ref, 0, 0, w, h), 0);
}

TEST(JpegEntropy, ATruncatedScanIsBadDataNamingTheInput) {
  const int w = 240, h = 180;
  auto jpeg = encode_with(noisy_rgb(w, h, 9, 50), w, h, TJSAMP_420, 90);
  jpeg.resize(jpeg.size() * 2 / 3);  // within the scan: the last rows have no data
  detail::JpegDecoder d(jpeg, "cut.jpg");
  try {
    d.decode(1, 0, 0, w, h);
    FAIL() << "a truncated scan decoded";
  } catch (const MediaError& e) {
    EXPECT_EQ(e.code(), ErrorCode::bad_data);
    EXPECT_NE(std::string(e.what()).find("cut.jpg"), std::string::npos) << e.what();
  }
}

TEST(JpegEntropy, CorruptScansFailOrDecodeAsLibjpeg) {
  // Bytes of the scan overwritten at random: each decode either fails with bad_data or
  // gives the pixels libjpeg's decoder gives (a corruption that still parses: values
  // change, no code is missing and no data is lacking). TurboJPEG's decode is lenient
  // here: it also reads the markers after the scan, which the region decoder never does.
  const int w = 200, h = 150;
  const auto clean = encode_with(noisy_rgb(w, h, 13, 50), w, h, TJSAMP_420, 90);
  std::mt19937 rng(17);
  int failed = 0, decoded = 0;
  for (int trial = 0; trial < 60; ++trial) {
    auto jpeg = clean;
    std::uniform_int_distribution<std::size_t> at(jpeg.size() / 3, jpeg.size() - 3);
    for (int k = 0; k < 1 + trial % 4; ++k) jpeg[at(rng)] = std::uint8_t(rng());
    try {
      detail::JpegDecoder d(jpeg, "corrupt.jpg");
      const detail::JpegRegion r = d.decode(1, 0, 0, w, h);
      std::unique_ptr<void, int (*)(void*)> tj(tjInitDecompress(), tjDestroy);
      std::vector<std::uint8_t> px(std::size_t(w) * h * 3);
      // TurboJPEG returns -1 on a warning too, with the image decoded.
      const int rc = tjDecompress2(tj.get(), jpeg.data(), jpeg.size(), px.data(), w, 0, h, TJPF_RGB,
                                   TJFLAG_ACCURATEDCT);
      ASSERT_TRUE(rc == 0 || tjGetErrorCode(tj.get()) == TJERR_WARNING)
          << "trial " << trial << ": " << tjGetErrorStr2(tj.get());
      EXPECT_EQ(differing(r, {px, w, h}, 0, 0, w, h), 0) << "trial " << trial;
      ++decoded;
    } catch (const MediaError& e) {
      EXPECT_EQ(e.code(), ErrorCode::bad_data) << e.what();
      ++failed;
    }
  }
  EXPECT_GT(failed, 0);
  std::fprintf(stderr, "corrupt scans: %d failed, %d decoded as libjpeg\n", failed, decoded);
}

}  // namespace
}  // namespace brigade::media
