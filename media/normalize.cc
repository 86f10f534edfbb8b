#include "media/normalize.h"

#include <bit>
#include <cmath>
#include <stdexcept>
#include <string>

namespace brigade::media {
namespace {

[[noreturn]] void reject(const std::string& why) {
  throw std::invalid_argument("normalize: " + why);
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

template <bool Half>
void run_reference(const NormalizeJob& j) {
  const std::int64_t hw = j.height * j.width;
  const std::int64_t c_count = j.channels;
  for (std::int64_t i = 0; i < j.images; ++i) {
    const std::uint8_t* in = j.src + i * hw * c_count;
    for (std::int64_t p = 0; p < hw; ++p) {
      for (std::int64_t c = 0; c < c_count; ++c) {
        const float y = std::fma(static_cast<float>(in[p * c_count + c]), j.a[c], j.b[c]);
        const std::int64_t o =
            j.layout == Layout::nchw ? (i * c_count + c) * hw + p : (i * hw + p) * c_count + c;
        if constexpr (Half) {
          static_cast<std::uint16_t*>(j.dst)[o] = float_to_half(y);
        } else {
          static_cast<float*>(j.dst)[o] = y;
        }
      }
    }
  }
}

}  // namespace

NormalizeJob make_normalize_job(const NormalizeOptions& o, const std::vector<std::int64_t>& shape) {
  if (shape.size() < 3) reject("expected [..., H, W, C], got " + shape_text(shape));
  for (auto d : shape) {
    if (d < 0) reject("negative dimension in " + shape_text(shape));
  }
  const std::int64_t channels = shape.back();
  if (channels < 1 || channels > kMaxNormalizeChannels) {
    reject(std::to_string(channels) + " channels in " + shape_text(shape) + " (1 to " +
           std::to_string(kMaxNormalizeChannels) + " supported)");
  }
  if (o.mean.size() != static_cast<std::size_t>(channels) || o.stddev.size() != o.mean.size()) {
    reject(std::to_string(o.mean.size()) + " means and " + std::to_string(o.stddev.size()) +
           " standard deviations for " + std::to_string(channels) + " channels");
  }
  if (o.dtype != DType::float32 && o.dtype != DType::float16) {
    reject("output dtype must be float32 or float16, not " + std::string(dtype_name(o.dtype)));
  }
  if (!std::isfinite(o.scale)) reject("scale is not finite");
  NormalizeJob job;
  job.images = 1;
  for (std::size_t i = 0; i + 3 < shape.size(); ++i) job.images *= shape[i];
  job.height = shape[shape.size() - 3];
  job.width = shape[shape.size() - 2];
  job.channels = channels;
  job.half = o.dtype == DType::float16;
  job.layout = o.layout;
  for (std::int64_t c = 0; c < channels; ++c) {
    const float s = o.stddev[c];
    const float m = o.mean[c];
    if (!(s > 0) || !std::isfinite(s) || !std::isfinite(m)) {
      reject("channel " + std::to_string(c) + ": mean " + std::to_string(m) + ", stddev " +
             std::to_string(s) + " (stddev must be positive, both finite)");
    }
    job.a[c] = o.scale / s;
    job.b[c] = -m / s;
  }
  return job;
}

std::vector<std::int64_t> normalized_shape(const NormalizeOptions& o,
                                           const std::vector<std::int64_t>& shape) {
  make_normalize_job(o, shape);
  auto out = shape;
  if (o.layout == Layout::nchw) {
    const std::size_t n = out.size();
    out[n - 3] = shape[n - 1];
    out[n - 2] = shape[n - 3];
    out[n - 1] = shape[n - 2];
  }
  return out;
}

std::size_t normalized_bytes(const NormalizeJob& j) {
  return static_cast<std::size_t>(j.images * j.height * j.width * j.channels) * (j.half ? 2 : 4);
}

void normalize_reference(const NormalizeJob& job) {
  if (job.half) {
    run_reference<true>(job);
  } else {
    run_reference<false>(job);
  }
}

std::uint16_t float_to_half(float value) {
  const auto x = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t exponent = (x >> 23) & 0xffu;
  std::uint32_t mantissa = x & 0x7fffffu;
  if (exponent == 0xffu) return mantissa ? 0x7fffu : static_cast<std::uint16_t>(sign | 0x7c00u);
  const int e = static_cast<int>(exponent) - 127 + 15;  // the half's biased exponent
  if (e >= 31) return static_cast<std::uint16_t>(sign | 0x7c00u);
  auto round = [](std::uint32_t kept, std::uint32_t rest, std::uint32_t halfway) {
    return (rest > halfway || (rest == halfway && (kept & 1u))) ? kept + 1 : kept;
  };
  if (e <= 0) {  // a subnormal half (or zero): value = m · 2^-24
    const int shift = 14 - e;
    if (shift > 24) return sign;
    mantissa |= 0x800000u;
    const std::uint32_t m =
        round(mantissa >> shift, mantissa & ((1u << shift) - 1), 1u << (shift - 1));
    return static_cast<std::uint16_t>(sign | m);  // m = 0x400 is the smallest normal
  }
  const std::uint32_t m = round(mantissa >> 13, mantissa & 0x1fffu, 0x1000u);
  // A mantissa that rounds up to 0x400 carries into the exponent (up to infinity).
  return static_cast<std::uint16_t>(sign | ((static_cast<std::uint32_t>(e) << 10) + m));
}

float half_to_float(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1fu;
  const std::uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa · 2^-24, exact in float
    const float v = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -v : v;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
}

}  // namespace brigade::media
