#pragma once
// What DeviceGroup needs from a communicator: transfers queued on the group's device
// queue, in call order, on raw device buffers. Two implementations: NCCL
// (cuda/nccl.cc) and an in-process one over CPU devices (device_collective_cpu.cc),
// where ranks are threads and a transfer is a memcpy between their "device" buffers.

#include <cstddef>
#include <memory>
#include <stop_token>

#include "transport/device/device.h"
#include "transport/device/device_group.h"

namespace brigade::transport::detail {

class Collective {
 public:
  virtual ~Collective() = default;
  /// Queued on the device; `buffer` is read on the root and written on the others. A
  /// call may wait on the host until the library has taken it (NCCL's ncclInProgress):
  /// that wait observes `stop` (aborts, throws StopRequested) and the join timeout
  /// (aborts, throws DeviceError "timeout").
  virtual void broadcast(void* buffer, std::size_t nbytes, int root,
                         const std::stop_token& stop) = 0;
  virtual void send(const void* buffer, std::size_t nbytes, int peer,
                    const std::stop_token& stop) = 0;
  virtual void recv(void* buffer, std::size_t nbytes, int peer, const std::stop_token& stop) = 0;
  /// Throws the DeviceError the communicator reported asynchronously, if any.
  virtual void check() = 0;
  /// Breaks the communicator: queued and later transfers fail. Idempotent, and callable
  /// from any thread while another is inside a call (it does not wait for that call).
  virtual void abort() = 0;
  // The destructor releases the communicator without waiting on a dead peer: queued
  // work is flushed within JoinOptions::teardown_timeout, else aborted.
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
