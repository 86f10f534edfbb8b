#include "media/detail/resample.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace brigade::media::detail {
namespace {

struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return s >> 33;
  }
  int in(int lo, int hi) { return lo + int(next() % std::uint64_t(hi - lo + 1)); }  // [lo, hi]
};

// One random resample: an axis of `size` source pixels, cut to a crop (train) or resized
// whole with a sub-range of the output kept (eval), to 1-300 output pixels.
AxisPlan random_axis(Rng& rng, int size) {
  AxisPlan a;
  const int out = rng.in(1, 300);
  if (rng.next() % 2 == 0) {
    const int w = rng.in(1, size), x = rng.in(0, size - w);
    a = {x, x + w, double(x), double(x + w), out, 0, out};
  } else {
    const int total = out + rng.in(0, 80), first = rng.in(0, total - out);
    a = {0, size, 0.0, double(size), total, first, out};
  }
  return a;
}

// The AVX2 path against the portable reference, on input cut exactly to the taps'
// reach (so that a read past it leaves the allocation, which ASan reports), rows
// `pad` bytes apart beyond their pixels, noise or hard edges (bicubic's overshoot is
// clipped), flipped or not, bilinear and bicubic, shrinking and enlarging.
TEST(Resample, Avx2MatchesTheReferenceBitForBit) {
  if (!cpu_has_avx2()) GTEST_SKIP() << "this CPU has no AVX2";
  Rng rng{12345};
  int cases = 0, mismatched = 0;
  for (int c = 0; c < 600; ++c) {
    const int w = rng.in(1, 700), h = rng.in(1, 700);
    const AxisPlan px = random_axis(rng, w), py = random_axis(rng, h);
    const Interpolation filter =
        rng.next() % 3 == 0 ? Interpolation::bicubic : Interpolation::bilinear;
    const bool flip = rng.next() % 2 == 0;
    const Taps tx = make_taps(px, filter), ty = make_taps(py, filter);
    const int cols = tx.hi() - tx.lo(), rows = ty.hi() - ty.lo();
    ASSERT_GT(cols, 0);
    ASSERT_GT(rows, 0);
    const std::ptrdiff_t stride = std::ptrdiff_t(cols) * 3 + rng.in(0, 4);
    std::vector<std::uint8_t> src(std::size_t(stride) * (rows - 1) + std::size_t(cols) * 3);
    const bool edges = rng.next() % 4 == 0;
    for (std::size_t i = 0; i < src.size(); ++i) {
      src[i] = edges ? ((rng.next() % 3) == 0 ? 255 : 0) : std::uint8_t(rng.next());
    }
    const std::size_t n = std::size_t(px.out_count) * std::size_t(py.out_count) * 3;
    std::vector<std::uint8_t> want(n), got(n, 0xAB);
    resample_rgb_reference(src.data(), stride, tx.lo(), ty.lo(), tx, ty, flip, want.data());
    resample_rgb_avx2(src.data(), stride, tx.lo(), ty.lo(), tx, ty, flip, got.data());
    ++cases;
    if (want != got) {
      ++mismatched;
      ADD_FAILURE() << "case " << c << ": " << w << "x" << h << " to " << px.out_count << "x"
                    << py.out_count << (flip ? " flipped" : "")
                    << (filter == Interpolation::bicubic ? " bicubic" : " bilinear");
      if (mismatched > 5) break;
    }
  }
  EXPECT_EQ(cases, 600);
  EXPECT_EQ(mismatched, 0);
}

// A 1-pixel-wide input: rows 3 bytes apart, where a row's reads past its end reach
// several rows down (the copy of the last rows takes those).
TEST(Resample, Avx2HandlesNarrowInputs) {
  if (!cpu_has_avx2()) GTEST_SKIP() << "this CPU has no AVX2";
  for (int h : {1, 2, 5, 40}) {
    for (int out : {1, 3, 224}) {
      const AxisPlan px{0, 1, 0.0, 1.0, out, 0, out}, py{0, h, 0.0, double(h), out, 0, out};
      const Taps tx = make_taps(px), ty = make_taps(py);
      std::vector<std::uint8_t> src(std::size_t(h) * 3);
      for (std::size_t i = 0; i < src.size(); ++i) src[i] = std::uint8_t(i * 37 + 11);
      std::vector<std::uint8_t> want(std::size_t(out) * out * 3), got(want.size());
      resample_rgb_reference(src.data(), 3, 0, 0, tx, ty, false, want.data());
      resample_rgb_avx2(src.data(), 3, 0, 0, tx, ty, false, got.data());
      EXPECT_EQ(want, got) << h << " rows to " << out;
    }
  }
}

}  // namespace
}  // namespace brigade::media::detail
