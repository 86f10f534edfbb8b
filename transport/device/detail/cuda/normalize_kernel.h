#pragma once
// The launcher of the normalize kernel (normalize.cu). C++17 and no CUDA types, so
// that nvcc compiles only normalize.cu, and this header stays light.

#include <cstdint>

namespace brigade::transport::detail {

inline constexpr int kKernelMaxChannels = 8;  // = kMaxNormalizeChannels

struct NormalizeKernelArgs {
  const std::uint8_t* src;
  void* dst;
  std::int64_t images;
  std::int64_t pixels;  // height × width
  int channels;
  bool half;
  bool nchw;
  float a[kKernelMaxChannels];
  float b[kKernelMaxChannels];
};

/// Launches on `stream` (a cudaStream_t); returns the launch's cudaError_t.
int launch_normalize(const NormalizeKernelArgs& args, void* stream);

}  // namespace brigade::transport::detail
