#pragma once
// The CPU device: host memory stands in for device memory, one worker thread for the
// stream, std::shared_future for events. It runs the same code paths as the CUDA
// device (pools, fences, the copy stage, collectives), so their ordering and lifetime
// rules are tested without a GPU, under ThreadSanitizer and AddressSanitizer too.
//
// Work runs on the worker in submission order, after the call returns. A task that
// throws makes the next recorded event fail with that exception (as a failed kernel
// makes CUDA's next synchronization fail). Tests can pause the worker to hold work in
// the queue (pause/resume) and count live allocations.

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

#include "transport/device.h"

namespace brigade::transport::detail {

class CpuEvent final : public Event {
 public:
  explicit CpuEvent(std::shared_future<void> done) : done_(std::move(done)) {}
  static std::shared_ptr<CpuEvent> completed();
  bool ready() const override;
  void wait() const override { done_.get(); }

 private:
  std::shared_future<void> done_;
};

class CpuDevice final : public Device {
 public:
  CpuDevice();
  // Runs what is queued, then joins the worker. Dropped by a task on the worker itself
  // (the last reference held by something a task released), it detaches the worker,
  // which runs the rest of the queue and ends: the queue is shared with the worker, so
  // nothing there touches the destroyed device.
  ~CpuDevice() override;

  DeviceSpec spec() const override { return {DeviceKind::cpu, 0}; }
  std::shared_ptr<void> allocate_host(std::size_t nbytes) override;
  std::shared_ptr<void> allocate_device(std::size_t nbytes) override;
  void copy_to_device(void* dst, const void* src, std::size_t nbytes) override;
  void copy_to_host(void* dst, const void* src, std::size_t nbytes) override;
  void normalize(const NormalizeJob& job) override;
  std::shared_ptr<Event> record() override;
  void wait_for(const std::shared_ptr<Event>& event) override;
  std::shared_ptr<Event> record_on(ExternalStream stream) override;
  void wait_on(ExternalStream stream, const std::shared_ptr<Event>& event) override;
  void synchronize() override;

  /// Queues any task (the CPU collective queues its transfers here).
  void submit(std::function<void()> task);

  /// Test hooks: while paused, queued work does not start.
  void pause();
  void resume();
  /// Allocations (host and device) not yet freed, including those outliving the device.
  long live_allocations() const { return live_->load(); }

 private:
  // The stream: what the worker and the queued tasks use (never the device itself).
  struct Queue {
    std::mutex mutex;
    std::condition_variable wake;
    std::deque<std::function<void()>> tasks;
    bool paused = false;
    bool stopping = false;
    std::exception_ptr pending_error;  // worker only
  };
  static void run(Queue& q);
  std::shared_ptr<void> allocate(std::size_t nbytes);

  std::shared_ptr<Queue> queue_ = std::make_shared<Queue>();
  std::shared_ptr<std::atomic<long>> live_ = std::make_shared<std::atomic<long>>(0);
  std::thread worker_;
};

}  // namespace brigade::transport::detail
