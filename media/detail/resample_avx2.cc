// resample_rgb_avx2 (resample.h): functions compiled for AVX2 by their target attribute,
// called only where the CPU has it.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "media/detail/resample.h"

#define BRIGADE_AVX2 __attribute__((target("avx2")))

namespace brigade::media::detail {
namespace {
namespace avx2 {  // (named: a unity build puts resample.cc's anonymous names beside these)

constexpr int kPrecisionBits = 32 - 8 - 2;  // as resample.cc
constexpr std::int32_t kHalf = std::int32_t(1) << (kPrecisionBits - 1);
// A horizontal tap pair loads 8 bytes for its 6: past a row's last tapped pixel, the
// loads reach at most this many bytes (13 with the 4-tap path's zero taps).
constexpr std::ptrdiff_t kOverread = 16;

struct Scratch {
  // The horizontal taps in destination order (mirrored when flipping): expanded
  // weights (expand_taps), the byte offset of the first tapped pixel in the region's
  // row, and the number of tap pairs.
  std::vector<std::int32_t> weights;
  std::vector<int> offset, pairs;
  std::vector<std::uint8_t> tmp, line;
};
Scratch& thread_scratch() {
  thread_local Scratch s;
  return s;
}

// Destination pixel k's horizontal taps (output pixel i = k, or out_w - 1 - k when
// flipping) as `pairs` vectors of 8 lanes: pair j is [w(2j) x3, w(2j+1) x3, 0, 0], the
// multipliers of the 8 bytes at pixel first + 2j; taps past the pixel's count are 0.
void expand_taps(const Taps& tx, int col0, int pairs, bool flip, Scratch& s) {
  const int n = static_cast<int>(tx.first.size());
  s.weights.assign(std::size_t(n) * std::size_t(pairs) * 8, 0);
  s.offset.resize(std::size_t(n));
  s.pairs.resize(std::size_t(n));
  for (int k = 0; k < n; ++k) {
    const std::size_t i = std::size_t(flip ? n - 1 - k : k);
    std::int32_t* w = &s.weights[std::size_t(k) * std::size_t(pairs) * 8];
    for (int t = 0; t < tx.count[i]; ++t) {
      const std::int32_t v = tx.weights[i * std::size_t(tx.width) + std::size_t(t)];
      for (int c = 0; c < 3; ++c) w[(t / 2) * 8 + (t % 2) * 3 + c] = v;
    }
    s.offset[std::size_t(k)] = (tx.first[i] - col0) * 3;
    s.pairs[std::size_t(k)] = (tx.count[i] + 1) / 2;
  }
}

// Pixels p and p + 1 (8 bytes from p) times a pair of taps.
BRIGADE_AVX2 inline __m256i tap_pair(const std::uint8_t* p, const std::int32_t* w) {
  const __m256i px = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  return _mm256_mullo_epi32(px, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w)));
}

// Destination pixel k's sums (before rounding) in lanes 0-2: its tap pairs' products,
// the first pixel's lanes 0-2 plus the second's 3-5. kFour: at most 4 taps (2 pairs).
template <bool kFour>
BRIGADE_AVX2 inline __m256i pixel_sums(const std::uint8_t* row, const Scratch& s, int pairs,
                                       int k) {
  const std::uint8_t* p = row + s.offset[std::size_t(k)];
  const std::int32_t* w = s.weights.data() + std::size_t(k) * std::size_t(pairs) * 8;
  __m256i acc;
  if constexpr (kFour) {
    acc = _mm256_add_epi32(tap_pair(p, w), tap_pair(p + 6, w + 8));
  } else {
    const int n = s.pairs[std::size_t(k)];
    acc = _mm256_setzero_si256();
    for (int t = 0; t < n; ++t) acc = _mm256_add_epi32(acc, tap_pair(p + 6 * t, w + 8 * t));
  }
  return _mm256_add_epi32(
      acc, _mm256_permutevar8x32_epi32(acc, _mm256_setr_epi32(3, 4, 5, 7, 7, 7, 7, 7)));
}

// One source row (`row`: the region's first column) into out_w output pixels at `out`
// (mirrored when the taps are). Four pixels are rounded and stored together (16 bytes, the
// last 4 garbage); all in destination order, so that the next store overwrites the
// garbage, and the intermediate row has 4 bytes of slack.
template <bool kFour>
BRIGADE_AVX2 void horizontal_row(const std::uint8_t* row, const Scratch& s, int out_w, int pairs,
                                 std::uint8_t* out) {
  const __m256i half = _mm256_set1_epi32(kHalf);
  const __m128i compact = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
  int k = 0;
  for (; k + 4 <= out_w; k += 4) {
    const __m256i f0 = pixel_sums<kFour>(row, s, pairs, k);
    const __m256i f1 = pixel_sums<kFour>(row, s, pairs, k + 1);
    const __m256i f2 = pixel_sums<kFour>(row, s, pairs, k + 2);
    const __m256i f3 = pixel_sums<kFour>(row, s, pairs, k + 3);
    // [f0 | f1] and [f2 | f3] (lanes 0-2 of each half), rounded, to 16 then 8 bits.
    const __m256i g01 = _mm256_srai_epi32(
        _mm256_add_epi32(_mm256_inserti128_si256(f0, _mm256_castsi256_si128(f1), 1), half),
        kPrecisionBits);
    const __m256i g23 = _mm256_srai_epi32(
        _mm256_add_epi32(_mm256_inserti128_si256(f2, _mm256_castsi256_si128(f3), 1), half),
        kPrecisionBits);
    const __m256i w16 = _mm256_packs_epi32(g01, g23);  // [f0 f2 | f1 f3]
    const __m256i b8 = _mm256_packus_epi16(w16, w16);  // bytes: [f0 f2 .. | f1 f3 ..]
    const __m128i px = _mm_unpacklo_epi32(_mm256_castsi256_si128(b8),
                                          _mm256_extracti128_si256(b8, 1));  // f0 f1 f2 f3
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + k * 3), _mm_shuffle_epi8(px, compact));
  }
  for (; k < out_w; ++k) {
    const __m256i f = pixel_sums<kFour>(row, s, pairs, k);
    __m128i v = _mm_srai_epi32(
        _mm_add_epi32(_mm256_castsi256_si128(f), _mm256_castsi256_si128(half)), kPrecisionBits);
    v = _mm_packs_epi32(v, v);
    const std::int32_t bytes = _mm_cvtsi128_si32(_mm_packus_epi16(v, v));
    std::memcpy(out + k * 3, &bytes, 4);
  }
}

BRIGADE_AVX2 inline __m256i load8(const std::uint8_t* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

// Output rows from the intermediate rows (`tmp`, row `row0` first, `tmp_stride` apart,
// readable to a multiple of 32 bytes), 32 bytes of a row at a time, all taps in registers.
BRIGADE_AVX2 void vertical_pass(const std::uint8_t* tmp, std::size_t tmp_stride, int row0,
                                const Taps& ty, int row_bytes, std::uint8_t* dst) {
  const int out_h = static_cast<int>(ty.first.size());
  const __m256i half = _mm256_set1_epi32(kHalf);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int j = 0; j < out_h; ++j) {
    const std::uint8_t* rows = tmp + std::size_t(ty.first[j] - row0) * tmp_stride;
    const std::int32_t* w = &ty.weights[std::size_t(j) * ty.width];
    const int n = ty.count[j];
    std::uint8_t* out = dst + std::size_t(j) * row_bytes;
    for (int x = 0; x < row_bytes; x += 32) {
      __m256i a0 = half, a1 = half, a2 = half, a3 = half;
      // Two taps a step (an odd one last).
      int t = 0;
      for (; t + 2 <= n; t += 2) {
        const std::uint8_t* r = rows + std::size_t(t) * tmp_stride + x;
        const std::uint8_t* q = r + tmp_stride;
        const __m256i k = _mm256_set1_epi32(w[t]), l = _mm256_set1_epi32(w[t + 1]);
        a0 = _mm256_add_epi32(
            a0, _mm256_add_epi32(_mm256_mullo_epi32(load8(r), k), _mm256_mullo_epi32(load8(q), l)));
        a1 = _mm256_add_epi32(a1, _mm256_add_epi32(_mm256_mullo_epi32(load8(r + 8), k),
                                                   _mm256_mullo_epi32(load8(q + 8), l)));
        a2 = _mm256_add_epi32(a2, _mm256_add_epi32(_mm256_mullo_epi32(load8(r + 16), k),
                                                   _mm256_mullo_epi32(load8(q + 16), l)));
        a3 = _mm256_add_epi32(a3, _mm256_add_epi32(_mm256_mullo_epi32(load8(r + 24), k),
                                                   _mm256_mullo_epi32(load8(q + 24), l)));
      }
      if (t < n) {
        const std::uint8_t* r = rows + std::size_t(t) * tmp_stride + x;
        const __m256i k = _mm256_set1_epi32(w[t]);
        a0 = _mm256_add_epi32(a0, _mm256_mullo_epi32(load8(r), k));
        a1 = _mm256_add_epi32(a1, _mm256_mullo_epi32(load8(r + 8), k));
        a2 = _mm256_add_epi32(a2, _mm256_mullo_epi32(load8(r + 16), k));
        a3 = _mm256_add_epi32(a3, _mm256_mullo_epi32(load8(r + 24), k));
      }
      const __m256i p01 = _mm256_packs_epi32(_mm256_srai_epi32(a0, kPrecisionBits),
                                             _mm256_srai_epi32(a1, kPrecisionBits));
      const __m256i p23 = _mm256_packs_epi32(_mm256_srai_epi32(a2, kPrecisionBits),
                                             _mm256_srai_epi32(a3, kPrecisionBits));
      const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(p01, p23), order);
      if (x + 32 <= row_bytes) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + x), bytes);
      } else {
        alignas(32) std::uint8_t last[32];
        _mm256_store_si256(reinterpret_cast<__m256i*>(last), bytes);
        std::memcpy(out + x, last, std::size_t(row_bytes - x));
      }
    }
  }
}

}  // namespace avx2
}  // namespace

void resample_rgb_avx2(const std::uint8_t* src, std::ptrdiff_t stride, int src_x0, int src_y0,
                       const Taps& tx, const Taps& ty, bool flip, std::uint8_t* dst) {
  const int out_w = static_cast<int>(tx.first.size());
  const int row0 = ty.lo(), rows = std::max(ty.hi() - row0, 0);
  const int col0 = tx.lo(), cols = std::max(tx.hi() - col0, 0);
  if (out_w == 0 || ty.first.empty()) return;
  const int row_bytes = out_w * 3;
  const std::size_t tmp_stride = (std::size_t(row_bytes) + 31) / 32 * 32;
  avx2::Scratch& s = avx2::thread_scratch();
  int widest = 0;
  for (int c : tx.count) widest = std::max(widest, c);
  const int pairs = std::max((widest + 1) / 2, 2);
  avx2::expand_taps(tx, col0, pairs, flip, s);
  s.tmp.resize(tmp_stride * std::size_t(rows) + 64);
  s.line.resize(std::size_t(cols) * 3 + avx2::kOverread);
  // Horizontal pass, row by row in place. A row whose loads past its end could reach
  // beyond the last row the input guarantees is read from a copy instead.
  const std::uint8_t* last = src + std::ptrdiff_t(row0 + rows - 1 - src_y0) * stride;
  for (int r = 0; r < rows; ++r) {
    const std::uint8_t* row =
        src + std::ptrdiff_t(row0 + r - src_y0) * stride + std::ptrdiff_t(col0 - src_x0) * 3;
    if ((last - (row - std::ptrdiff_t(col0 - src_x0) * 3)) < avx2::kOverread) {
      std::memcpy(s.line.data(), row, std::size_t(cols) * 3);
      row = s.line.data();
    }
    std::uint8_t* out = s.tmp.data() + std::size_t(r) * tmp_stride;
    if (pairs == 2) {  // at most 4 taps: bilinear up to a 2x shrink, bicubic up to 1x
      avx2::horizontal_row<true>(row, s, out_w, pairs, out);
    } else {
      avx2::horizontal_row<false>(row, s, out_w, pairs, out);
    }
  }
  avx2::vertical_pass(s.tmp.data(), tmp_stride, row0, ty, row_bytes, dst);
}

}  // namespace brigade::media::detail
