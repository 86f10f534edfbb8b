#pragma once
// PIL's antialiased resampling (Image.resize(..., BILINEAR or BICUBIC)), computed for an
// exact, possibly fractional source window and for any sub-range of the output: the
// engine behind media/transform.h.
//
// EXACTNESS. The taps are PIL's (Pillow's Resample.c, precompute_coeffs and
// normalize_coeffs_8bpc): a triangle filter (bilinear, support 1) or Keys' cubic
// (bicubic, a = -0.5, support 2) stretched by max(1, scale), scale = window / output
// size, so that a shrink filters over that many more input pixels (the antialiasing);
// negative cubic weights are rounded away from zero; output pixel i is centred at
// window_start + (i + 0.5) * scale; taps are clipped to [in_lo, in_hi) and
// renormalised; weights are rounded to 22 fractional bits. The horizontal pass runs
// first, rounding to uint8, then the vertical pass, as PIL does. On the same decoded
// pixels the result is therefore PIL's, bit for bit, up to float rounding in the
// weights (a level at most, rarely).
//
// Thread safety: plain functions; scratch memory is per thread.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "media/transform.h"

namespace brigade::media::detail {

/// One axis of a resample, in the coordinates of the input as given to resample_rgb().
/// The output axis has `out_total` pixels over the window [window0, window1); only
/// pixels [out_first, out_first + out_count) are produced. Taps never reach outside
/// [in_lo, in_hi): that is where the (virtual) image being resized ends, which for a
/// crop-then-resize is the crop and for a resize-then-crop the whole picture.
struct AxisPlan {
  int in_lo = 0, in_hi = 0;
  double window0 = 0, window1 = 0;
  int out_total = 0, out_first = 0, out_count = 0;
};

/// The fixed-point taps of one axis: output pixel i reads input pixels
/// [first[i], first[i] + count[i]) with weights weights[i * width ...].
struct Taps {
  std::vector<int> first, count;
  std::vector<std::int32_t> weights;
  int width = 0;   // taps per output pixel (the largest count)
  int lo() const;  // the first input pixel any output reads
  int hi() const;  // one past the last
};
Taps make_taps(const AxisPlan& plan, Interpolation filter = Interpolation::bilinear);

/// Resamples RGB24 input whose pixel (x, y) is at src + (y - src_y0) * stride +
/// (x - src_x0) * 3, covering at least [tx.lo(), tx.hi()) x [ty.lo(), ty.hi()), into a
/// contiguous out_count_x x out_count_y RGB24 image at dst; `flip` mirrors it
/// horizontally (as a flip after the resize would). Runs resample_rgb_avx2 where the
/// CPU has AVX2 (checked once), else resample_rgb_reference: the same bytes either way.
void resample_rgb(const std::uint8_t* src, std::ptrdiff_t stride, int src_x0, int src_y0,
                  const Taps& tx, const Taps& ty, bool flip, std::uint8_t* dst);

/// The portable implementation: whole-row accumulations over a transposed copy of the
/// region (compiler-vectorized). The reference the AVX2 path is tested against.
void resample_rgb_reference(const std::uint8_t* src, std::ptrdiff_t stride, int src_x0, int src_y0,
                            const Taps& tx, const Taps& ty, bool flip, std::uint8_t* dst);

/// Whether this CPU runs resample_rgb_avx2.
bool cpu_has_avx2();

/// AVX2 intrinsics, bit for bit resample_rgb_reference's result (integer sums do not
/// depend on the order of their terms): the horizontal pass reads each source row in
/// place, an output pixel's taps two pixels per 8-lane multiply, and writes mirrored
/// when flipping; the vertical pass accumulates 32 bytes of a row over all its taps in
/// registers. Reads up to 16 bytes past a row's last tapped pixel where the rows below
/// hold them, else from a padded copy of the row. Only where cpu_has_avx2().
void resample_rgb_avx2(const std::uint8_t* src, std::ptrdiff_t stride, int src_x0, int src_y0,
                       const Taps& tx, const Taps& ty, bool flip, std::uint8_t* dst);

}  // namespace brigade::media::detail
