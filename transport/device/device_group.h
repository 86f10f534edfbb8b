#pragma once
// Batches between GPUs with NCCL: (a) broadcast of each batch from one loader rank to
// every rank of a group (ranks that need identical batches, e.g. a tensor-parallel
// group), (b) point-to-point send/recv, e.g. from a decode node that has a GPU to a
// trainer's GPU. On the CPU device the same class runs over an in-process collective
// (ranks are threads of one process), so the protocol is tested without GPUs.
//
// BOOTSTRAP. One rank creates a DeviceGroupId (new_device_group_id: for CUDA, NCCL's
// ncclUniqueId, which holds the creator's bootstrap address) and hands it to every
// rank: as a Cap'n Proto message (encode/decode_device_group_id; transport/device/device.capnp)
// through the cluster's directory, or through a file in a shared folder on one node
// (write_device_group_id writes it atomically; read_device_group_id waits for it).
// Every rank then constructs a DeviceGroup with its rank; construction returns once
// all ranks have joined (or throws on stop or timeout).
//
// WIRE. Each batch travels as a fixed 512-byte header (a Cap'n Proto DeviceBatchHeader:
// dtype, layout, shape, bytes) followed by the payload. NCCL needs the byte count on
// every rank before a transfer, so a receiving rank waits, on the host, for the header
// of each batch (polling, observing `stop`) before it queues the payload into a buffer
// of its pool. The sending rank does not wait for its peers: a broadcast root or a
// sender queues both transfers after the batch's copy event and returns, until it is
// `max_in_flight` batches ahead of them; then the call waits (observing `stop`).
//
// ORDER. Every rank of a group must make the same sequence of calls (NCCL's rule):
// broadcasts in the same order on all ranks, each send matched by its peer's recv.
// Calls on one DeviceGroup are serialized. Two ranks must not both send to each other
// before receiving: a send (header, then payload; not grouped with ncclGroupStart/End)
// holds its rank's queue until the peer posts the matching recv, so crossed sends wait
// for each other for ever. Exchange in a fixed order (the lower rank sends first).
//
// FAILURE AND STOP. NCCL errors become DeviceError (transient() for remote and network
// errors). A peer that never arrives blocks the device queue; a stop request during any
// wait (for room to send, for a header, for a buffer, for NCCL to take a call), a call
// NCCL has not taken within `timeout`, or abort(), aborts the communicator
// (ncclCommAbort), after which every call throws. abort() does not wait for a call in
// progress on another thread. Destroying a group gives its queued transfers
// `teardown_timeout` to complete, then aborts them (a dead peer's never complete), so
// teardown never waits on a dead peer; a clean communicator is finalized, polled and
// destroyed (ncclCommFinalize, ncclCommDestroy).
//
// QUEUE. Transfers run on the group's device queue (its stream): open a Device for the
// group so that collectives, which wait for peers, do not hold up the copy stage.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <stop_token>
#include <string_view>
#include <vector>

#include "transport/device/device.h"
#include "transport/device/device_copy.h"
#include "transport/device/device_pool.h"

namespace brigade::transport {

/// What every rank needs to join one group.
struct DeviceGroupId {
  DeviceKind kind = DeviceKind::cpu;
  int size = 0;                               // ranks in the group
  std::uint32_t nccl_version = 0;             // ncclGetVersion() of the creator (CUDA groups)
  std::array<std::uint8_t, 128> unique_id{};  // ncclUniqueId, or the CPU group's key
  friend bool operator==(const DeviceGroupId&, const DeviceGroupId&) = default;
};

/// A new id for a group of `size` ranks (CUDA: calls ncclGetUniqueId, so NCCL must load).
DeviceGroupId new_device_group_id(DeviceKind kind, int size);

/// The id as a Cap'n Proto message (DeviceGroupId in transport/device/device.capnp), and back.
/// decode throws std::invalid_argument naming `source` and the cause.
std::vector<std::byte> encode_device_group_id(const DeviceGroupId& id);
DeviceGroupId decode_device_group_id(std::span<const std::byte> bytes, std::string_view source);

/// Single node: publishes the id in `file` atomically (temp file, fsync, rename), and
/// reads it, waiting up to `timeout` for it to appear (observing `stop`). Errors name
/// the file.
void write_device_group_id(const std::filesystem::path& file, const DeviceGroupId& id);
DeviceGroupId read_device_group_id(const std::filesystem::path& file,
                                   std::chrono::milliseconds timeout, std::stop_token stop = {});

struct JoinOptions {
  std::stop_token stop{};
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};  // to join; for NCCL to take a call
  std::chrono::milliseconds teardown_timeout{std::chrono::seconds(10)};  // see FAILURE AND STOP
  std::size_t max_in_flight = 64;  // batches a root or sender may queue ahead of its peers
};

namespace detail {
struct GroupState;
}  // namespace detail

class DeviceGroup {
 public:
  /// Joins as `rank` on `device` (of the id's kind); returns when all ranks joined.
  DeviceGroup(std::shared_ptr<Device> device, const DeviceGroupId& id, int rank,
              JoinOptions options = {});
  ~DeviceGroup();
  DeviceGroup(const DeviceGroup&) = delete;
  DeviceGroup& operator=(const DeviceGroup&) = delete;

  int rank() const;
  int size() const;
  const std::shared_ptr<Device>& device() const;

  /// Collective. The root passes its batch (any device batch of this device; other
  /// ranks pass an empty DeviceBatch) and gets it back, complete once sent; every
  /// other rank receives a copy into a buffer of `pool` (a device pool of this device).
  DeviceBatch broadcast(const DeviceBatch& batch, int root, BufferPool& pool,
                        std::stop_token stop = {});
  /// Point to point: `send` queues the batch for `peer` and returns; `recv` waits for
  /// the header from `peer` and returns the batch, complete when its event is.
  void send(const DeviceBatch& batch, int peer, std::stop_token stop = {});
  DeviceBatch recv(int peer, BufferPool& pool, std::stop_token stop = {});

  /// Breaks the group: queued and future transfers fail. Idempotent, thread-safe.
  void abort();

 private:
  std::unique_ptr<detail::GroupState> state_;
};

}  // namespace brigade::transport
