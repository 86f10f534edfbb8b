#pragma once
// CUDA errors → DeviceError, once, where the call is made:
//   BRIGADE_CUDA_CHECK(cudaMalloc(&p, n), device_index);
// throws DeviceError{"CUDA", "cudaErrorMemoryAllocation", "cudaMalloc", cuda:N, "out of memory"}.

#include <cuda_runtime_api.h>

#include "transport/device.h"

namespace brigade::transport::detail {

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, int device);

inline void check_cuda(cudaError_t status, const char* call, int device) {
  if (status != cudaSuccess) throw_cuda_error(status, call, device);
}

// Sets the calling thread's current device for a scope and restores the previous one
// (a consumer thread keeps the device its framework chose).
class DeviceScope {
 public:
  explicit DeviceScope(int device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = -1;
  int device_;
};

}  // namespace brigade::transport::detail

// The text of the call, up to its first parenthesis, names it in the error.
#define BRIGADE_CUDA_CHECK(expr, device) \
  ::brigade::transport::detail::check_cuda((expr), #expr, (device))
