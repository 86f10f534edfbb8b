#include "transport/detail/cuda/error.h"

#include <cuda.h>

#include <string>

#include "transport/detail/device_scope.h"

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

CtxGetCurrent ctx_get_current() {
  static const CtxGetCurrent fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &p, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      p = nullptr;
    }
    return reinterpret_cast<CtxGetCurrent>(p);
  }();
  return fn;
}

}  // namespace

std::optional<int> current_context_device() {
  const auto get = ctx_get_current();
  CUcontext context = nullptr;
  // Without the entry point, as without a context: never restore (THE RULE).
  if (get == nullptr || get(&context) != CUDA_SUCCESS || context == nullptr) return std::nullopt;
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return std::nullopt;
  }
  return device;
}

DeviceScope::DeviceScope(int device) {
  const auto plan = plan_device_scope(device, current_context_device());
  if (plan.set) BRIGADE_CUDA_CHECK(cudaSetDevice(device), device);
  restore_ = plan.restore;
}

DeviceScope::~DeviceScope() {
  if (restore_) cudaSetDevice(*restore_);  // that device has its context: nothing created
}

}  // namespace brigade::transport::detail
