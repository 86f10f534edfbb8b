#pragma once
// Bounded pools of page-locked host buffers and of device buffers.
//
// HOST (Memory::pinned_host). Batches are decoded straight into these buffers
// (allocator() plugs into media::Tensor::empty and the batch pool's allocator hook),
// and the copy stage reads them with one DMA: a batch is never copied twice on the
// host. A buffer goes back to the pool when its last reference is dropped, but is
// handed out again only once every event fenced on it (fence()) is complete: the
// copy that reads it has finished. take() returns a buffer that is free to write.
//
// DEVICE (Memory::device). The copy stage's output buffers. A returned buffer carries
// the events after which it is free (the copy that wrote it, the consumer's stream at
// the time the batch was dropped); take() hands them over in Buffer::fences and the
// taker makes its queue wait for them (Device::wait_for, no host block).
//
// BOUND. At most `max_buffers` buffers exist at once, free or in use. When all are in
// use, take() waits for one to come back: that wait is the backpressure of the copy
// path. It observes `stop` (throws StopRequested). A buffer is reused for any request
// that fits its capacity (the smallest that fits); when none fits and the pool is full,
// a free buffer is freed to make room.
//
// CAPACITY. Buffers are allocated with at least `min_capacity` bytes: set it to a full
// batch, and a smaller batch (failed reads, an epoch's last) followed by a full one
// never frees and reallocates during training (cudaFree waits for the device's queued
// work, the training step's included). reserve() allocates them up front (when a Job is
// built), so that no allocation happens on the hot path at all.
//
// SIZING. A host pool behind a pipeline stage's allocator must hold at least as many
// buffers as the pipeline can hold host batches (decoded, queued, being copied: see
// Pipeline::item_bound()) plus one per copy in flight. Then take() waits only for a
// copy to finish, which the device does on its own; a take() that waited for a buffer
// held inside the pipeline would occupy the stage's thread, and a cpu stage's thread is
// one of the scheduler's: with all of them waiting, nothing moves. The pipeline's
// credit protocol bounds the host side; the device pool bounds the device side.
//
// LIFETIME. Buffers may outlive their pool; a buffer whose pool is gone is freed when
// dropped, after its fences complete. Destroying a pool waits for the fences of its
// free buffers (teardown only).
//
// THREAD SAFETY. All members are thread-safe.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stop_token>
#include <vector>

#include "media/tensor.h"
#include "transport/device/device.h"

namespace brigade::transport {

namespace detail {
struct PoolState;
}  // namespace detail

class BufferPool {
 public:
  enum class Memory : std::uint8_t { pinned_host, device };
  struct Options {
    std::size_t max_buffers = 8;
    std::size_t min_capacity = 0;  // bytes; see CAPACITY
    /// Device pools used from another queue than the pool's device (Device::open_queue):
    /// device memory is stream-ordered, allocated on the pool's device queue, so each
    /// new buffer is fenced with an event recorded there right after its allocation,
    /// and its first taker's queue waits for it like any fence.
    bool fence_allocations = false;
  };
  /// A buffer from take(): `memory.get()` is the data pointer (at least the requested
  /// bytes, aligned to ≥ 256 bytes); dropping every copy of `memory` returns it.
  struct Buffer {
    std::shared_ptr<void> memory;
    std::vector<std::shared_ptr<Event>> fences;  // device pools: wait for these first
  };
  struct Stats {
    std::size_t buffers = 0;  // allocated now, free or in use (≤ max_buffers)
    std::size_t in_use = 0;   // handed out and not yet returned
    std::size_t bytes = 0;    // capacity of all allocated buffers
    std::uint64_t waits = 0;  // take() calls that had to wait for a buffer or a fence
  };

  BufferPool(std::shared_ptr<Device> device, Memory memory, Options options);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  /// A buffer of at least `nbytes` (see BOUND). Host pools return no fences.
  Buffer take(std::size_t nbytes, std::stop_token stop = {});
  /// Allocates free buffers of min_capacity bytes until `buffers` exist (at most
  /// max_buffers). Throws what the device's allocation throws.
  void reserve(std::size_t buffers);
  /// For host pools: a media::Allocator drawing from this pool (it keeps the pool
  /// alive; waits observe `stop`). Throws std::logic_error on a device pool.
  media::Allocator allocator(std::stop_token stop = {});

  /// Adds `event` to the fences of the pooled buffer that `buffer` shares (a take()
  /// result, or any owner sharing its control block, e.g. a Tensor's owner). Returns
  /// false, doing nothing, if `buffer` does not come from a BufferPool.
  static bool fence(const std::shared_ptr<void>& buffer, std::shared_ptr<Event> event);

  Stats stats() const;
  Memory memory() const { return memory_; }
  const std::shared_ptr<Device>& device() const;

 private:
  Memory memory_;
  std::shared_ptr<detail::PoolState> state_;
};

}  // namespace brigade::transport
