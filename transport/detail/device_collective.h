#pragma once
// What DeviceGroup needs from a communicator: transfers queued on the group's device
// queue, in call order, on raw device buffers. Two implementations: NCCL
// (cuda/nccl.cc) and an in-process one over CPU devices (device_collective_cpu.cc),
// where ranks are threads and a transfer is a memcpy between their "device" buffers.

#include <cstddef>
#include <memory>

#include "transport/device.h"
#include "transport/device_group.h"

namespace brigade::transport::detail {

class Collective {
 public:
  virtual ~Collective() = default;
  /// Queued on the device; `buffer` is read on the root and written on the others.
  virtual void broadcast(void* buffer, std::size_t nbytes, int root) = 0;
  virtual void send(const void* buffer, std::size_t nbytes, int peer) = 0;
  virtual void recv(void* buffer, std::size_t nbytes, int peer) = 0;
  /// Throws the DeviceError the communicator reported asynchronously, if any.
  virtual void check() = 0;
  /// Breaks the communicator: queued and later transfers fail. Idempotent.
  virtual void abort() = 0;
};

/// Joins the group; returns when every rank has joined. Throws StopRequested on stop,
/// DeviceError on timeout or a library error.
std::unique_ptr<Collective> make_cpu_collective(std::shared_ptr<Device> device,
                                                const DeviceGroupId& id, int rank,
                                                const JoinOptions& options);
std::unique_ptr<Collective> make_nccl_collective(std::shared_ptr<Device> device,
                                                 const DeviceGroupId& id, int rank,
                                                 const JoinOptions& options);

}  // namespace brigade::transport::detail
