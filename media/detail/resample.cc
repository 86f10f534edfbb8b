#include "media/detail/resample.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace brigade::media::detail {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;  // Pillow's PRECISION_BITS for 8-bit images
constexpr std::int32_t kHalf = std::int32_t(1) << (kPrecisionBits - 1);

double triangle(double x) {
  x = std::abs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// Pillow's bicubic_filter: Keys' cubic convolution with a = -0.5.
double cubic(double x) {
  constexpr double a = -0.5;
  x = std::abs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

}  // namespace

int Taps::lo() const { return first.empty() ? 0 : *std::min_element(first.begin(), first.end()); }

int Taps::hi() const {
  int h = 0;
  for (std::size_t i = 0; i < first.size(); ++i) h = std::max(h, first[i] + count[i]);
  return h;
}

Taps make_taps(const AxisPlan& p, Interpolation filter) {
  const bool bicubic = filter == Interpolation::bicubic;
  const double scale = (p.window1 - p.window0) / p.out_total;
  const double filterscale = std::max(scale, 1.0);
  const double support = (bicubic ? 2.0 : 1.0) * filterscale;
  Taps t;
  t.width = static_cast<int>(std::ceil(support)) * 2 + 1;
  t.first.resize(p.out_count);
  t.count.resize(p.out_count);
  t.weights.assign(static_cast<std::size_t>(p.out_count) * t.width, 0);
  std::vector<double> k(t.width);
  for (int i = 0; i < p.out_count; ++i) {
    const double center = p.window0 + (p.out_first + i + 0.5) * scale;
    const int lo = std::max(p.in_lo, static_cast<int>(std::floor(center - support + 0.5)));
    const int hi = std::min(p.in_hi, static_cast<int>(std::floor(center + support + 0.5)));
    const int n = std::clamp(hi - lo, 0, t.width);
    double total = 0;
    for (int x = 0; x < n; ++x) {
      const double at = (x + lo - center + 0.5) / filterscale;
      total += k[x] = bicubic ? cubic(at) : triangle(at);
    }
    for (int x = 0; x < n; ++x) {
      const double w = total != 0.0 ? k[x] / total : 0.0;
      t.weights[std::size_t(i) * t.width + x] = static_cast<std::int32_t>(
          w < 0 ? -0.5 + w * (1 << kPrecisionBits) : 0.5 + w * (1 << kPrecisionBits));
    }
    t.first[i] = lo;
    t.count[i] = n;
  }
  return t;
}

// The passes run as accumulations of whole rows (acc[x] += row[x] * w), which
// vectorize; the horizontal pass works on the region transposed for that. Integer sums
// do not depend on the order of their terms, so the result is the same as PIL's loops.
// Cloned for AVX2 where the CPU has it (chosen once, at load time, by an ifunc resolver).
// Not under ThreadSanitizer: the resolver runs before TSan's runtime is up and crashes
// every binary that links media, before main.
#if defined(__SANITIZE_THREAD__)
#define BRIGADE_VECTOR_CLONES
#else
#define BRIGADE_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#endif

namespace {

// acc[0, n) = kHalf + sum over taps of rows[first + t][0, n) * k[t]; out = clip8(acc).
BRIGADE_VECTOR_CLONES
void accumulate_rows(const std::uint8_t* rows, std::size_t row_stride, int first, int count,
                     const std::int32_t* k, std::size_t n, std::int32_t* acc, std::uint8_t* out) {
  for (std::size_t x = 0; x < n; ++x) acc[x] = kHalf;
  for (int t = 0; t < count; ++t) {
    const std::uint8_t* in = rows + (first + t) * row_stride;
    const std::int32_t w = k[t];
    for (std::size_t x = 0; x < n; ++x) acc[x] += in[x] * w;
  }
  for (std::size_t x = 0; x < n; ++x) {
    const std::int32_t v = acc[x] >> kPrecisionBits;
    out[x] = static_cast<std::uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
  }
}

constexpr int kBand = 16;

inline void copy3(std::uint8_t* to, const std::uint8_t* from) {
  to[0] = from[0];
  to[1] = from[1];
  to[2] = from[2];
}

// Scratch buffers of this thread, reused.
struct Scratch {
  std::vector<std::uint8_t> columns, htmp, tmp;
  std::vector<std::int32_t> acc;
};
Scratch& thread_scratch() {
  thread_local Scratch s;
  return s;
}

}  // namespace

bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2") != 0;
  return has;
}

void resample_rgb(const std::uint8_t* src, std::ptrdiff_t stride, int src_x0, int src_y0,
                  const Taps& tx, const Taps& ty, bool flip, std::uint8_t* dst) {
  if (cpu_has_avx2()) {
    resample_rgb_avx2(src, stride, src_x0, src_y0, tx, ty, flip, dst);
  } else {
    resample_rgb_reference(src, stride, src_x0, src_y0, tx, ty, flip, dst);
  }
}

void resample_rgb_reference(const std::uint8_t* src, std::ptrdiff_t stride, int src_x0, int src_y0,
                            const Taps& tx, const Taps& ty, bool flip, std::uint8_t* dst) {
  const int out_w = static_cast<int>(tx.first.size());
  const int out_h = static_cast<int>(ty.first.size());
  const int row0 = ty.lo(), rows = std::max(ty.hi() - row0, 0);
  const int col0 = tx.lo(), cols = std::max(tx.hi() - col0, 0);
  const std::size_t column = static_cast<std::size_t>(rows) * 3;  // one transposed column
  const std::size_t tmp_stride = static_cast<std::size_t>(out_w) * 3;
  Scratch& s = thread_scratch();
  s.columns.resize(column * cols + 1);
  s.htmp.resize(column * out_w + 1);
  s.tmp.resize(tmp_stride * rows + 1);
  s.acc.resize(std::max(column, tmp_stride) + 1);
  // The region, transposed: column x is rows * 3 contiguous bytes. In bands of kBand
  // rows, so that each column's writes stay contiguous.
  for (int r0 = 0; r0 < rows; r0 += kBand) {
    const int band = std::min(kBand, rows - r0);
    const std::uint8_t* line[kBand];
    for (int r = 0; r < band; ++r)
      line[r] = src + (row0 + r0 + r - src_y0) * stride + (col0 - src_x0) * 3;
    for (int x = 0; x < cols; ++x) {
      std::uint8_t* out = s.columns.data() + std::size_t(x) * column + std::size_t(r0) * 3;
      for (int r = 0; r < band; ++r, out += 3) copy3(out, line[r] + x * 3);
    }
  }
  // Horizontal pass: output column i from the columns its taps read.
  for (int i = 0; i < out_w; ++i) {
    accumulate_rows(s.columns.data(), column, tx.first[i] - col0, tx.count[i],
                    &tx.weights[std::size_t(i) * tx.width], column, s.acc.data(),
                    s.htmp.data() + std::size_t(flip ? out_w - 1 - i : i) * column);
  }
  // Back to rows, in bands of kBand output columns.
  for (int i0 = 0; i0 < out_w; i0 += kBand) {
    const int band = std::min(kBand, out_w - i0);
    for (int r = 0; r < rows; ++r) {
      std::uint8_t* out = s.tmp.data() + std::size_t(r) * tmp_stride + std::size_t(i0) * 3;
      const std::uint8_t* in = s.htmp.data() + std::size_t(i0) * column + std::size_t(r) * 3;
      for (int i = 0; i < band; ++i, out += 3, in += column) copy3(out, in);
    }
  }
  // Vertical pass: output row j from the intermediate rows its taps read.
  for (int j = 0; j < out_h; ++j) {
    accumulate_rows(s.tmp.data(), tmp_stride, ty.first[j] - row0, ty.count[j],
                    &ty.weights[std::size_t(j) * ty.width], tmp_stride, s.acc.data(),
                    dst + std::size_t(j) * tmp_stride);
  }
}

}  // namespace brigade::media::detail
