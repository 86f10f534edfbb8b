// The normalize kernel: one thread per pixel reads its C bytes and writes C values,
// each to its channel plane (NCHW) or next to each other (NHWC). The arithmetic is
// the contract of transport/device/device_normalize.h: fma(x, a[c], b[c]) in float32, then
// round to nearest even for float16.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "transport/device/detail/cuda/normalize_kernel.h"

namespace brigade::transport::detail {
namespace {

template <bool Half, bool Nchw>
__global__ void normalize_pixels(NormalizeKernelArgs args) {
  const int channels = args.channels;
  for (std::int64_t image = blockIdx.y; image < args.images; image += gridDim.y) {
    const std::uint8_t* in = args.src + image * args.pixels * channels;
    for (std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         p < args.pixels; p += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
#pragma unroll
      for (int c = 0; c < kKernelMaxChannels; ++c) {
        if (c >= channels) break;
        const float y = __fmaf_rn(static_cast<float>(in[p * channels + c]), args.a[c], args.b[c]);
        const std::int64_t o = Nchw ? (image * channels + c) * args.pixels + p
                                    : (image * args.pixels + p) * channels + c;
        if constexpr (Half) {
          static_cast<__half*>(args.dst)[o] = __float2half_rn(y);
        } else {
          static_cast<float*>(args.dst)[o] = y;
        }
      }
    }
  }
}

}  // namespace

int launch_normalize(const NormalizeKernelArgs& args, void* stream) {
  if (args.images == 0 || args.pixels == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const auto blocks_x =
      static_cast<unsigned>(std::min<std::int64_t>((args.pixels + kThreads - 1) / kThreads, 4096));
  const auto blocks_y = static_cast<unsigned>(std::min<std::int64_t>(args.images, 65535));
  const dim3 grid(blocks_x, blocks_y);
  auto s = static_cast<cudaStream_t>(stream);
  if (args.half) {
    if (args.nchw) {
      normalize_pixels<true, true><<<grid, kThreads, 0, s>>>(args);
    } else {
      normalize_pixels<true, false><<<grid, kThreads, 0, s>>>(args);
    }
  } else {
    if (args.nchw) {
      normalize_pixels<false, true><<<grid, kThreads, 0, s>>>(args);
    } else {
      normalize_pixels<false, false><<<grid, kThreads, 0, s>>>(args);
    }
  }
  return cudaGetLastError();
}

}  // namespace brigade::transport::detail
