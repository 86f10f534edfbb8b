// Linked into builds with CUDA but without nccl.h (see transport/device/detail/device_cuda.h).
#include "transport/device/detail/device_collective.h"
#include "transport/device/detail/device_cuda.h"

namespace brigade::transport::detail {
namespace {

[[noreturn]] void no_nccl(const char* call) {
  throw DeviceError("device", "no-nccl", call, {DeviceKind::cuda, 0},
                    "this build has no NCCL (nccl.h was not found under the CUDA toolkit)");
}

}  // namespace

bool nccl_compiled() { return false; }
std::uint32_t nccl_version() { no_nccl("ncclGetVersion"); }
void nccl_unique_id(std::uint8_t*) { no_nccl("ncclGetUniqueId"); }
std::unique_ptr<Collective> make_nccl_collective(std::shared_ptr<Device>, const DeviceGroupId&, int,
                                                 const JoinOptions&) {
  no_nccl("ncclCommInitRankConfig");
}

}  // namespace brigade::transport::detail
