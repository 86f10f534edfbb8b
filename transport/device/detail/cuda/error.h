#pragma once
// CUDA errors → DeviceError, once, where the call is made:
//   BRIGADE_CUDA_CHECK(cudaMalloc(&p, n), device_index);
// throws DeviceError{"CUDA", "cudaErrorMemoryAllocation", "cudaMalloc", cuda:N, "out of memory"}.

#include <cuda_runtime_api.h>

#include <optional>

#include "transport/device/device.h"

namespace brigade::transport::detail {

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, int device);

inline void check_cuda(cudaError_t status, const char* call, int device) {
  if (status != cudaSuccess) throw_cuda_error(status, call, device);
}

// Makes `device` the calling thread's current device for a scope. Restores the previous
// context (cuCtxSetCurrent: exactly the one the thread had) only where it had one; a
// thread without one keeps `device` (THE RULE in transport/device/detail/device_scope.h:
// never create GPU 0's context).
class DeviceScope {
 public:
  explicit DeviceScope(int device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  void* restore_ = nullptr;  // the CUcontext to make current again, if any
};

/// The device of the calling thread's current context (cuCtxGetCurrent, through the
/// runtime's driver entry point: no link to libcuda), nullopt when it has none.
std::optional<int> current_context_device();

}  // namespace brigade::transport::detail

// The text of the call, up to its first parenthesis, names it in the error.
#define BRIGADE_CUDA_CHECK(expr, device) \
  ::brigade::transport::detail::check_cuda((expr), #expr, (device))
