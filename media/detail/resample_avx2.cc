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
  std::vector<std::int32_t> weights;  // horizontal taps, expanded (expand_weights)
  std::vector<int> first;             // horizontal first taps, relative to the region
  std::vector<std::uint8_t> tmp, line;
};
Scratch& thread_scratch() {
  thread_local Scratch s;
  return s;
}

// Output pixel i's horizontal taps as `pairs` vectors of 8 lanes: pair k is
// [w(2k) x3, w(2k+1) x3, 0, 0], the multipliers of the 8 bytes at pixel first + 2k;
// taps past the pixel's count are 0.
void expand_weights(const Taps& tx, int pairs, std::vector<std::int32_t>& out) {
  const std::size_t n = tx.first.size();
  out.assign(n * std::size_t(pairs) * 8, 0);
  for (std::size_t i = 0; i < n; ++i) {
    std::int32_t* w = &out[i * std::size_t(pairs) * 8];
    for (int t = 0; t < tx.count[i]; ++t) {
      const std::int32_t v = tx.weights[i * std::size_t(tx.width) + std::size_t(t)];
      for (int c = 0; c < 3; ++c) w[(t / 2) * 8 + (t % 2) * 3 + c] = v;
    }
  }
}

// Pixels p and p + 1 (8 bytes from p) times a pair of taps.
BRIGADE_AVX2 inline __m256i tap_pair(const std::uint8_t* p, const std::int32_t* w) {
  const __m256i px = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  return _mm256_mullo_epi32(px, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w)));
}

// Lanes 0-2 plus lanes 3-5 of `acc`, rounded and clipped to bytes, as 4 bytes at `out`
// (the 4th is garbage: the next pixel overwrites it).
BRIGADE_AVX2 inline void store_pixel(__m256i acc, std::uint8_t* out) {
  const __m256i upper = _mm256_permutevar8x32_epi32(acc, _mm256_setr_epi32(3, 4, 5, 7, 7, 7, 7, 7));
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_castsi256_si128(upper));
  s = _mm_srai_epi32(_mm_add_epi32(s, _mm_set1_epi32(kHalf)), kPrecisionBits);
  const __m128i w16 = _mm_packs_epi32(s, s);
  const std::int32_t v = _mm_cvtsi128_si32(_mm_packus_epi16(w16, w16));
  std::memcpy(out, &v, 4);
}

// One source row (`row`: the region's first column) into out_w output pixels at `out`,
// mirrored when `flip`; in destination order, so that each 4-byte store's garbage byte
// is overwritten by the next.
BRIGADE_AVX2 void horizontal_row(const std::uint8_t* row, const Scratch& s, const Taps& tx,
                                 int pairs, bool flip, std::uint8_t* out) {
  const int out_w = static_cast<int>(tx.first.size());
  const int* first = s.first.data();
  const std::int32_t* weights = s.weights.data();
  if (pairs == 2) {  // at most 4 taps: bilinear up to a 2x shrink, bicubic up to 1x
    for (int k = 0; k < out_w; ++k) {
      const int i = flip ? out_w - 1 - k : k;
      const std::uint8_t* p = row + first[i] * 3;
      const std::int32_t* w = weights + std::size_t(i) * 16;
      store_pixel(_mm256_add_epi32(tap_pair(p, w), tap_pair(p + 6, w + 8)), out + k * 3);
    }
    return;
  }
  for (int k = 0; k < out_w; ++k) {
    const int i = flip ? out_w - 1 - k : k;
    const std::uint8_t* p = row + first[i] * 3;
    const std::int32_t* w = weights + std::size_t(i) * pairs * 8;
    const int n = (tx.count[i] + 1) / 2;
    __m256i acc = _mm256_setzero_si256();
    for (int t = 0; t < n; ++t) acc = _mm256_add_epi32(acc, tap_pair(p + 6 * t, w + 8 * t));
    store_pixel(acc, out + k * 3);
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
      for (int t = 0; t < n; ++t) {
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
  avx2::expand_weights(tx, pairs, s.weights);
  s.first.resize(tx.first.size());
  for (std::size_t i = 0; i < tx.first.size(); ++i) s.first[i] = tx.first[i] - col0;
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
    avx2::horizontal_row(row, s, tx, pairs, flip, s.tmp.data() + std::size_t(r) * tmp_stride);
  }
  avx2::vertical_pass(s.tmp.data(), tmp_stride, row0, ty, row_bytes, dst);
}

}  // namespace brigade::media::detail
