#include "transport/detail/cuda/error.h"

#include <string>

namespace brigade::transport::detail {

void throw_cuda_error(cudaError_t status, const char* call, int device) {
  std::string name(call);
  name = name.substr(0, name.find('('));
  cudaGetLastError();  // clears a non-sticky error so that later calls are unaffected
  throw DeviceError("CUDA", cudaGetErrorName(status), name, {DeviceKind::cuda, device},
                    cudaGetErrorString(status));
}

DeviceScope::DeviceScope(int device) : device_(device) {
  BRIGADE_CUDA_CHECK(cudaGetDevice(&previous_), device);
  if (previous_ != device) BRIGADE_CUDA_CHECK(cudaSetDevice(device), device);
}

DeviceScope::~DeviceScope() {
  if (previous_ >= 0 && previous_ != device_) cudaSetDevice(previous_);
}

}  // namespace brigade::transport::detail
