#pragma once
// The CUDA device: one GPU and one dedicated non-blocking stream (see transport/device/device.h).
// Events are created with cudaEventDisableTiming | cudaEventBlockingSync: a consumer's
// wait() sleeps in the driver instead of spinning a core.

#include <cuda_runtime_api.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "transport/device/device.h"

namespace brigade::transport::detail {

// Where a CudaEvent's cudaEvent_t goes back when the event is dropped: events are
// reused, not created and destroyed per batch. Outlives the device (held by its events).
struct CudaEventPool {
  std::mutex mutex;
  std::vector<cudaEvent_t> free;
  ~CudaEventPool();
};

class CudaEvent final : public Event {
 public:
  CudaEvent(cudaEvent_t event, int device, std::shared_ptr<CudaEventPool> pool = {})
      : event_(event), device_(device), pool_(std::move(pool)) {}
  ~CudaEvent() override;  // back to the pool (cudaEventDestroy without one)
  // An error from cudaEventQuery (sticky: a faulting kernel, CUDA unloading) counts as
  // complete; it is kept and thrown by wait().
  bool ready() const noexcept override;
  void wait() const override;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_;
  int device_;
  std::shared_ptr<CudaEventPool> pool_;
  mutable std::atomic<int> failed_{0};  // the cudaError_t ready() saw, 0 if none
};

class CudaDevice final : public Device, public std::enable_shared_from_this<CudaDevice> {
 public:
  explicit CudaDevice(int index);
  ~CudaDevice() override;

  DeviceSpec spec() const override { return {DeviceKind::cuda, index_}; }
  std::shared_ptr<void> allocate_host(std::size_t nbytes) override;
  std::shared_ptr<void> allocate_device(std::size_t nbytes) override;
  bool page_locked(const void* host) const override;
  void copy_to_device(void* dst, const void* src, std::size_t nbytes) override;
  void copy_to_host(void* dst, const void* src, std::size_t nbytes) override;
  void normalize(const NormalizeJob& job) override;
  std::shared_ptr<Event> record() override;
  void wait_for(const std::shared_ptr<Event>& event) override;
  std::shared_ptr<Event> record_on(ExternalStream stream) override;
  void wait_on(ExternalStream stream, const std::shared_ptr<Event>& event) override;
  void synchronize() override;
  // A new CudaDevice on the same GPU: its own stream (and memory pool, unused by the
  // copy stage's copy queue, which allocates nothing).
  std::shared_ptr<Device> open_queue() override;

  int index() const { return index_; }
  cudaStream_t stream() const { return stream_; }

 private:
  std::shared_ptr<Event> record_event(cudaStream_t stream);
  const CudaEvent& cuda_event(const std::shared_ptr<Event>& event) const;

  int index_;
  cudaStream_t stream_ = nullptr;
  cudaMemPool_t pool_ = nullptr;  // device memory (stream-ordered allocation)
  std::shared_ptr<CudaEventPool> events_ = std::make_shared<CudaEventPool>();
};

}  // namespace brigade::transport::detail
