#pragma once
// The copy stage: host batches in, device batches out, without a host wait per item.
//
//   auto device = open_device(parse_device("cuda:0"));
//   auto host_pool = std::make_shared<BufferPool>(device, BufferPool::Memory::pinned_host,
//                                                 BufferPool::Options{.max_buffers = 8});
//   // decode into tensors from host_pool->allocator(), then, as the last stage:
//   CopyStage to_device(device, {.device_buffers = 4, .normalize = imagenet});
//   builder.pipe([to_device](media::Tensor t) { return to_device(t); },
//                {.concurrency = 1, .executor = actors::Executor::io, .name = "to_device"});
//   for (DeviceBatch& b : pipeline) { b.use_on(stream); train_step(b.data(), stream); }
//
// WHAT A CALL DOES. Takes an output buffer from the stage's device pool (waiting while
// all `device_buffers` are in use: the backpressure of the copy path), queues a
// cudaMemcpyAsync of the host bytes on the device's own non-blocking stream (and the
// normalize kernel, if asked), records one event, fences the host buffer with it (the
// buffer goes back to its pinned pool only after the copy completes) and returns. It
// never waits for the copy. Order is preserved: batches complete in call order.
//
// OVERLAP (normalize). The uint8 batch is copied into one of two device staging
// buffers on a second queue of the device (Device::open_queue: a copy stream), and the
// normalize kernel runs on the device's queue after an event recorded there: batch
// i + 1's copy runs while batch i is normalized. A staging buffer is reused after the
// normalize that read it (its fence); its first use on the copy queue waits for its
// stream-ordered allocation on the device's queue (BufferPool fence_allocations).
//
// PINNED STAGING (CopyOptions::pinned_staging = N > 0). A host tensor in pageable
// memory (not page-locked: decoded into ordinary memory) is copied on the calling
// thread into one of N page-locked buffers, and the DMA reads that: the pinned
// footprint is N buffers (full-batch capacity with `full_batch`) however many batches
// decode holds upstream, at the price of one host memcpy per batch on the copy
// stage's thread. The host tensor is free as soon as the call returns. A staging
// buffer is reused once the DMA that read it has completed (take() waits for it).
// With N = 0 a pageable tensor is copied from where it is (slow and synchronous on
// CUDA; counted by pageable_copies()).
//
// CONSUMER CONTRACT (DeviceBatch). The consumer, and only the consumer, waits: either
// on the host, `batch.wait()` (or polls `batch.ready()`), or device-side with
// `batch.use_on(stream)`, which orders its stream after the copy without blocking. The
// device memory returns to the pool when the last copy of the DeviceBatch is dropped;
// it is reused only after the consumer's stream has run the work queued on it before
// that drop (an event is recorded on it then), so a training step may still be reading
// the batch when the loop moves on. A consumer that uses a stream other than the
// legacy default stream must name it with use_on(); the CPU device needs neither.
// Not cudaStreamPerThread (2, which DLPack's __dlpack__(stream=2) passes): the reuse
// event is recorded on the stream named in use_on() when the batch is dropped, and 2
// then names the dropping thread's per-thread stream, not the consumer's; the memory
// could be reused while the consumer's work still reads it. Use an explicit stream
// (the Python export refuses __dlpack__(stream=2): python/tensor_export.h, STREAMS).
//
// Host tensors whose memory does not come from a BufferPool are kept alive by the stage
// until their copy completes (checked at each call and when the stage is destroyed).
// Those in pageable memory (Device::page_locked) are counted: pageable_copies().
//
// THREAD SAFETY. A CopyStage is a cheap, copyable handle; calls are serialized (one
// copy stage per device, concurrency 1). DeviceBatch is a copyable value; its members
// are thread-safe.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>
#include <vector>

#include "media/tensor.h"
#include "transport/device/device.h"
#include "transport/device/device_normalize.h"
#include "transport/device/device_pool.h"

namespace brigade::transport {

namespace detail {
struct DeviceBatchState;
struct CopyState;
}  // namespace detail

/// A batch in device memory. See CONSUMER CONTRACT.
class DeviceBatch {
 public:
  DeviceBatch() = default;
  explicit DeviceBatch(std::shared_ptr<detail::DeviceBatchState> state);

  bool defined() const { return state_ != nullptr; }
  DeviceSpec device() const;
  void* data() const;  // device pointer (CPU device: host memory)
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data());
  }
  media::DType dtype() const;
  const std::vector<std::int64_t>& shape() const;  // C-contiguous
  Layout layout() const;
  std::size_t nbytes() const;

  bool ready() const;  // the copy (and normalize) has completed; never blocks
  void wait() const;   // blocks until ready; throws DeviceError if the copy failed
  /// Orders `stream` after the copy (device-side) and makes `stream` the one whose
  /// work the memory's reuse waits for. Call before launching work that reads it.
  void use_on(ExternalStream stream) const;

  /// The event that completes with the copy, and the device memory's handle.
  const std::shared_ptr<Event>& event() const;
  /// The event after which the host bytes have been read: event() without normalize;
  /// with it, the copy queue's event before the kernel (OVERLAP). wait() waits on both
  /// and throws either's error (the CPU device's queues do not share errors).
  const std::shared_ptr<Event>& copied() const;
  const std::shared_ptr<void>& memory() const;

 private:
  std::shared_ptr<detail::DeviceBatchState> state_;
};

/// Makes a DeviceBatch of memory already on the device (from a device BufferPool),
/// complete when `ready` completes. For other transports (NCCL receives).
DeviceBatch make_device_batch(std::shared_ptr<Device> device, std::shared_ptr<void> memory,
                              std::shared_ptr<Event> ready, media::DType dtype,
                              std::vector<std::int64_t> shape, Layout layout);

struct CopyOptions {
  std::size_t device_buffers = 4;  // output buffers on the device (delivered + in flight)
  Layout layout = Layout::nhwc;    // of the host tensors (recorded in each DeviceBatch)
  std::optional<NormalizeOptions> normalize{};  // uint8 → float on the device
  /// The host shape of a full uint8 batch, if known: the device buffers are then allocated
  /// with its capacity when the stage is made (BufferPool CAPACITY), so that no batch,
  /// smaller or full, allocates or frees device memory on the hot path.
  std::vector<std::int64_t> full_batch{};
  /// Page-locked buffers that pageable host tensors are copied into first (see PINNED
  /// STAGING); 0: none, pageable tensors are copied from where they are.
  std::size_t pinned_staging = 0;
};

/// Device staging buffers (uint8 input of normalize): two, so that one batch's copy
/// overlaps the previous batch's normalize (OVERLAP).
inline constexpr std::size_t kNormalizeStaging = 2;

class CopyStage {
 public:
  CopyStage(std::shared_ptr<Device> device, CopyOptions options = {});

  /// Copies a contiguous host tensor to the device (see WHAT A CALL DOES). Throws
  /// std::invalid_argument for a non-contiguous tensor or one normalize cannot take,
  /// StopRequested when `stop` is requested while waiting for a buffer, DeviceError
  /// when the device refuses the work.
  DeviceBatch operator()(const media::Tensor& host, std::stop_token stop = {}) const;

  const std::shared_ptr<Device>& device() const;
  BufferPool& pool() const;  // the output buffers
  /// Host tensors not from a BufferPool that are still waiting for their copy.
  std::size_t foreign_in_flight() const;
  /// Copies made so far from pageable host memory (slow, synchronous on CUDA): a
  /// producer that should decode into a pinned pool does not.
  std::uint64_t pageable_copies() const;
  /// Copies made through the pinned staging buffers (PINNED STAGING), and their pool
  /// (nullptr without pinned_staging).
  std::uint64_t staged_copies() const;
  const BufferPool* pinned_staging() const;

 private:
  std::shared_ptr<detail::CopyState> state_;
};

}  // namespace brigade::transport
