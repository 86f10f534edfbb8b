#pragma once
// Normalize: uint8 images → float32 or float16, per-channel mean and standard deviation,
// optionally moving channels in front of rows (NHWC → NCHW). The one CPU reference:
// the decode stage normalizing on the host (media::normalize_into, transform.h) and the
// CPU device (transport/device) run normalize_reference; the CUDA kernel
// (transport/device/detail/cuda) keeps the same arithmetic bit for bit. Part of
// brigade_tensor: no dependency.
//
// ARITHMETIC (the contract the CUDA kernel and the CPU reference share, bit for bit):
//   a[c] = scale / stddev[c],  b[c] = -mean[c] / stddev[c]      (float32, on the host)
//   y    = fma(x, a[c], b[c])                                   (float32, one rounding)
//   out  = y, or y rounded to float16 (round to nearest, ties to even; overflow → ±inf)
// so out = (x · scale − mean[c]) / stddev[c] up to float32 rounding. `mean` and
// `stddev` are in the units of x · scale: torchvision's ImageNet values (0.485, …) with
// scale = 1/255, or pixel values (123.675, …) with scale = 1.
//
// SHAPES. The input is uint8 [..., H, W, C] (any leading dimensions: [N, H, W, C]
// images, [N, T, H, W, C] clips), C = mean.size() ≤ kMaxNormalizeChannels. The output
// keeps the leading dimensions and is [..., C, H, W] (Layout::nchw) or [..., H, W, C].

#include <cstdint>
#include <vector>

#include "media/tensor.h"

namespace brigade::media {

inline constexpr int kMaxNormalizeChannels = 8;

/// What a job asks for (see the header comment).
struct NormalizeOptions {
  std::vector<float> mean{};     // one per channel
  std::vector<float> stddev{};   // one per channel, each > 0 and finite
  float scale = 1.0f;            // x is multiplied by scale before mean and stddev apply
  DType dtype = DType::float32;  // float32 or float16
  Layout layout = Layout::nchw;  // of the output
};

/// One queued normalize: what Device::normalize receives. Plain data, no ownership.
struct NormalizeJob {
  const std::uint8_t* src = nullptr;  // [images, height, width, channels] uint8
  void* dst = nullptr;                // float32 or float16, per `half` and `layout`
  std::int64_t images = 0;            // product of the leading dimensions
  std::int64_t height = 0;
  std::int64_t width = 0;
  std::int64_t channels = 0;
  bool half = false;  // float16 output
  Layout layout = Layout::nchw;
  float a[kMaxNormalizeChannels] = {};  // scale / stddev
  float b[kMaxNormalizeChannels] = {};  // -mean / stddev
};

/// Checks `options` against an input of `shape` (uint8, [..., H, W, C]) and returns
/// the job without src/dst. Throws std::invalid_argument naming what is wrong.
NormalizeJob make_normalize_job(const NormalizeOptions& options,
                                const std::vector<std::int64_t>& shape);
/// The output shape for an input of `shape` (validated as above).
std::vector<std::int64_t> normalized_shape(const NormalizeOptions& options,
                                           const std::vector<std::int64_t>& shape);
/// Output bytes of a job.
std::size_t normalized_bytes(const NormalizeJob& job);

/// The CPU reference: runs `job` on host memory (the CPU device uses it).
void normalize_reference(const NormalizeJob& job);

/// float32 → float16 bits, round to nearest even (the CUDA __float2half_rn rule);
/// and back, exactly.
std::uint16_t float_to_half(float value);
float half_to_float(std::uint16_t bits);

}  // namespace brigade::media
