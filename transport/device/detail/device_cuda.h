#pragma once
// The seam between the device code that every build has and the CUDA part, which is
// compiled only where CMake found the toolkit (transport/device/detail/cuda/). A build
// without CUDA links device_no_cuda.cc instead, whose definitions say so; no #if.

#include <cstdint>
#include <memory>

#include "transport/device/device.h"

namespace brigade::transport::detail {

bool cuda_compiled();
bool nccl_compiled();
CudaAvailability cuda_probe();
/// Throws DeviceError when the build has no CUDA, there is no GPU, or `index` is
/// out of range.
std::shared_ptr<Device> open_cuda_device(int index);
/// ncclGetVersion() of the loaded library (e.g. 22809); throws DeviceError if NCCL
/// cannot be loaded or the build has none.
std::uint32_t nccl_version();
/// ncclGetUniqueId() into `out` (128 bytes).
void nccl_unique_id(std::uint8_t* out);

}  // namespace brigade::transport::detail
