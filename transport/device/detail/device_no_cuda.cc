// Linked into builds without CUDA (see device_cuda.h).
#include "transport/device/detail/device_collective.h"
#include "transport/device/detail/device_cuda.h"

namespace brigade::transport::detail {
namespace {

constexpr const char* kNoCuda =
    "this build has no CUDA (rebuild where CMake finds the CUDA toolkit, with -DBRIGADE_CUDA=ON)";

[[noreturn]] void no_cuda(const char* call, int index = 0) {
  throw DeviceError("device", "no-cuda", call, {DeviceKind::cuda, index}, kNoCuda);
}

}  // namespace

bool cuda_compiled() { return false; }
bool nccl_compiled() { return false; }
CudaAvailability cuda_probe() { return {0, kNoCuda}; }
std::shared_ptr<Device> open_cuda_device(int index) { no_cuda("open_device", index); }
std::uint32_t nccl_version() { no_cuda("ncclGetVersion"); }
void nccl_unique_id(std::uint8_t*) { no_cuda("ncclGetUniqueId"); }
std::unique_ptr<Collective> make_nccl_collective(std::shared_ptr<Device>, const DeviceGroupId&, int,
                                                 const JoinOptions&) {
  no_cuda("ncclCommInitRankConfig");
}

}  // namespace brigade::transport::detail
