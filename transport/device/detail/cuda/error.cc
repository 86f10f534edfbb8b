#include "transport/device/detail/cuda/error.h"

#include <cuda.h>

#include <string>

#include "transport/device/detail/device_scope.h"

namespace brigade::transport::detail {

void throw_cuda_error(cudaError_t status, const char* call, int device) {
  std::string name(call);
  name = name.substr(0, name.find('('));
  cudaGetLastError();  // clears a non-sticky error so that later calls are unaffected
  throw DeviceError("CUDA", cudaGetErrorName(status), name, {DeviceKind::cuda, device},
                    cudaGetErrorString(status));
}

namespace {

using CtxGetCurrent = CUresult (*)(CUcontext*);
using CtxSetCurrent = CUresult (*)(CUcontext);

// A driver function through the runtime's entry point (no link to libcuda), or null.
void* driver_function(const char* name) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return p;
}

CtxGetCurrent ctx_get_current() {
  static const auto fn = reinterpret_cast<CtxGetCurrent>(driver_function("cuCtxGetCurrent"));
  return fn;
}

CtxSetCurrent ctx_set_current() {
  static const auto fn = reinterpret_cast<CtxSetCurrent>(driver_function("cuCtxSetCurrent"));
  return fn;
}

CUcontext current_context() {
  const auto get = ctx_get_current();
  CUcontext context = nullptr;
  // Without the entry point, as without a context: never restore (THE RULE).
  if (get == nullptr || get(&context) != CUDA_SUCCESS) return nullptr;
  return context;
}

}  // namespace

std::optional<int> current_context_device() {
  if (current_context() == nullptr) return std::nullopt;
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return std::nullopt;
  }
  return device;
}

DeviceScope::DeviceScope(int device) {
  CUcontext previous = current_context();
  std::optional<int> current;
  if (previous != nullptr) current = current_context_device();
  const auto plan = plan_device_scope(device, current);
  if (plan.set) BRIGADE_CUDA_CHECK(cudaSetDevice(device), device);
  if (plan.restore) restore_ = previous;
}

// The exact context the thread had (a framework's own, not only a primary context),
// which exists: nothing is created.
DeviceScope::~DeviceScope() {
  if (restore_ == nullptr) return;
  if (const auto set = ctx_set_current(); set != nullptr) set(static_cast<CUcontext>(restore_));
}

}  // namespace brigade::transport::detail
