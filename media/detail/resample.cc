#include "media/detail/resample.h"

#include <algorithm>
#include <cmath>
#include <memory>

namespace brigade::media::detail {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;  // Pillow's PRECISION_BITS for 8-bit images
constexpr std::int32_t kHalf = std::int32_t(1) << (kPrecisionBits - 1);

double triangle(double x) {
  x = std::abs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

std::uint8_t clip8(std::int32_t v) {
  v >>= kPrecisionBits;
  return static_cast<std::uint8_t>(std::clamp(v, 0, 255));
}

// Reused per thread: the intermediate rows of the horizontal pass.
std::uint8_t* scratch(std::size_t n) {
  thread_local std::unique_ptr<std::uint8_t[]> buf;
  thread_local std::size_t capacity = 0;
  if (capacity < n) {
    capacity = n + n / 4;
    buf = std::make_unique_for_overwrite<std::uint8_t[]>(capacity);
  }
  return buf.get();
}

}  // namespace

int Taps::lo() const { return first.empty() ? 0 : *std::min_element(first.begin(), first.end()); }

int Taps::hi() const {
  int h = 0;
  for (std::size_t i = 0; i < first.size(); ++i) h = std::max(h, first[i] + count[i]);
  return h;
}

Taps make_taps(const AxisPlan& p) {
  const double scale = (p.window1 - p.window0) / p.out_total;
  const double filterscale = std::max(scale, 1.0);
  const double support = filterscale;  // the triangle's support is 1
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
    for (int x = 0; x < n; ++x) total += k[x] = triangle((x + lo - center + 0.5) / filterscale);
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

void resample_rgb(const std::uint8_t* src, std::ptrdiff_t stride, int src_x0, int src_y0,
                  const Taps& tx, const Taps& ty, bool flip, std::uint8_t* dst) {
  const int out_w = static_cast<int>(tx.first.size());
  const int out_h = static_cast<int>(ty.first.size());
  const int row0 = ty.lo(), rows = ty.hi() - row0;
  const std::size_t tmp_stride = static_cast<std::size_t>(out_w) * 3;
  std::uint8_t* tmp = scratch(tmp_stride * std::max(rows, 1));
  // Horizontal pass over the rows the vertical pass reads.
  for (int r = 0; r < rows; ++r) {
    const std::uint8_t* in = src + (row0 + r - src_y0) * stride - std::ptrdiff_t(src_x0) * 3;
    std::uint8_t* out = tmp + r * tmp_stride;
    for (int i = 0; i < out_w; ++i) {
      const std::int32_t* k = &tx.weights[std::size_t(i) * tx.width];
      const std::uint8_t* p = in + std::ptrdiff_t(tx.first[i]) * 3;
      std::int32_t s0 = kHalf, s1 = kHalf, s2 = kHalf;
      for (int x = 0; x < tx.count[i]; ++x, p += 3) {
        s0 += p[0] * k[x];
        s1 += p[1] * k[x];
        s2 += p[2] * k[x];
      }
      std::uint8_t* o = out + (flip ? out_w - 1 - i : i) * 3;
      o[0] = clip8(s0);
      o[1] = clip8(s1);
      o[2] = clip8(s2);
    }
  }
  // Vertical pass: each output row is a weighted sum of intermediate rows.
  thread_local std::vector<std::int32_t> acc;
  acc.resize(tmp_stride);
  for (int j = 0; j < out_h; ++j) {
    std::fill(acc.begin(), acc.end(), kHalf);
    const std::int32_t* k = &ty.weights[std::size_t(j) * ty.width];
    for (int y = 0; y < ty.count[j]; ++y) {
      const std::uint8_t* in = tmp + (ty.first[j] + y - row0) * tmp_stride;
      const std::int32_t w = k[y];
      std::int32_t* a = acc.data();
      for (std::size_t x = 0; x < tmp_stride; ++x) a[x] += in[x] * w;
    }
    std::uint8_t* out = dst + j * tmp_stride;
    for (std::size_t x = 0; x < tmp_stride; ++x) out[x] = clip8(acc[x]);
  }
}

}  // namespace brigade::media::detail
