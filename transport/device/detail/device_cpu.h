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
//
// FAULTS (a test hook, per device: CpuDevice(CpuFaults{...})). The CPU device can fail
// the way a GPU does, so that the code above it is tested against those failures here:
//   sticky_after_events  the event recorded after this many is where the device breaks,
//                        as a CUDA context does after a faulting kernel (a "sticky"
//                        error): when the worker reaches it, every later host call
//                        (allocate, copy, normalize, record, wait_for, record_on,
//                        synchronize) throws DeviceError{"device", "sticky-error"}, every
//                        event's query reports that error (CudaEvent: cudaEventQuery
//                        returns it even for events that had completed) and queued work
//                        no longer runs.
//   free_waits_for_work  freeing memory waits until the work queued before the free has
//                        run, as cudaFree and cudaFreeHost wait for the device
//                        (frees_that_waited() counts the frees that found work queued).
//   copy_delay           each copy occupies the worker at least this long (a slow link).
//   ordered_allocations  device memory is stream-ordered, as cudaMallocFromPoolAsync's:
//                        it exists only once the allocating queue's worker reaches the
//                        allocation; a copy or normalize on any queue (open_queue) that
//                        touches it before then fails with DeviceError{"device",
//                        "use-before-allocation"} (its next event reports it), where
//                        CUDA would read or write memory not yet (or no longer) owned.
// Without faults (the default) none of this costs anything.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "transport/device/device.h"

namespace brigade::transport::detail {

/// See FAULTS above.
struct CpuFaults {
  std::optional<std::size_t> sticky_after_events{};
  bool free_waits_for_work = false;
  std::chrono::microseconds copy_delay{0};
  bool ordered_allocations = false;
};

// What the device's faults share with its events and its memory's deleters, which may
// outlive it.
struct CpuFaultState {
  CpuFaults faults;
  std::atomic<bool> broken{false};
  std::exception_ptr sticky;  // set before `broken`, never changed after
  std::atomic<std::size_t> records{0};
  std::atomic<long> frees_that_waited{0};
  void check(const char* call) const;  // throws the sticky error once broken
  // ordered_allocations: device ranges (start → bytes) whose allocation has not run yet.
  mutable std::mutex pending_mutex;
  std::map<std::uintptr_t, std::size_t> pending;
  // Throws use-before-allocation if [p, p + n) touches a pending range.
  void check_allocated(const void* p, std::size_t n, const char* call) const;
};

class CpuEvent final : public Event {
 public:
  explicit CpuEvent(std::shared_future<void> done, std::shared_ptr<const CpuFaultState> faults = {})
      : done_(std::move(done)), faults_(std::move(faults)) {}
  static std::shared_ptr<CpuEvent> completed();
  bool ready() const noexcept override;
  void wait() const override;

 private:
  std::shared_future<void> done_;
  std::shared_ptr<const CpuFaultState> faults_;
};

class CpuDevice final : public Device {
 public:
  explicit CpuDevice(CpuFaults faults = {});
  // A second queue of `device` (open_queue): its faults, pinned ranges and live count.
  struct SameDevice {
    const CpuDevice* device;
  };
  explicit CpuDevice(SameDevice same);
  // Runs what is queued, then joins the worker. Dropped by a task on the worker itself
  // (the last reference held by something a task released), it detaches the worker,
  // which runs the rest of the queue and ends: the queue is shared with the worker, so
  // nothing there touches the destroyed device.
  ~CpuDevice() override;

  DeviceSpec spec() const override { return {DeviceKind::cpu, 0}; }
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
  std::shared_ptr<Device> open_queue() override;

  /// Queues any task (the CPU collective queues its transfers here).
  void submit(std::function<void()> task);

  /// Test hooks: while paused, queued work does not start.
  void pause();
  void resume();
  /// Allocations (host and device) not yet freed, including those outliving the device.
  long live_allocations() const { return live_->load(); }
  /// Allocations made so far (host and device), freed or not.
  long allocations() const { return allocations_.load(); }
  /// FAULTS: whether the sticky error has happened; frees that found work queued.
  bool broken() const { return faults_->broken.load(); }
  long frees_that_waited() const { return faults_->frees_that_waited.load(); }

 private:
  // The stream: what the worker and the queued tasks use (never the device itself).
  struct Queue {
    std::mutex mutex;
    std::condition_variable wake;
    // A control task (an event's) still runs once the device is broken, to fail it.
    std::deque<std::pair<std::function<void()>, bool>> tasks;
    bool paused = false;
    bool stopping = false;
    std::exception_ptr pending_error;  // worker only
    std::uint64_t submitted = 0;       // tasks ever queued
    std::uint64_t finished = 0;        // tasks ever run (or skipped)
    std::condition_variable progressed;
    std::thread::id worker;
  };
  void enqueue(std::function<void()> task, bool control);
  static void run(Queue& q, const CpuFaultState& faults);
  std::shared_ptr<void> allocate(std::size_t nbytes, const char* call);
  void start_worker();
  // Live allocate_host ranges (start → bytes), shared with their deleters.
  struct HostRanges {
    mutable std::mutex mutex;
    std::map<std::uintptr_t, std::size_t> ranges;
  };
  std::shared_ptr<HostRanges> host_ranges_ = std::make_shared<HostRanges>();

  std::shared_ptr<Queue> queue_ = std::make_shared<Queue>();
  std::shared_ptr<std::atomic<long>> live_ = std::make_shared<std::atomic<long>>(0);
  std::atomic<long> allocations_{0};
  std::shared_ptr<CpuFaultState> faults_;
  std::thread worker_;
};

}  // namespace brigade::transport::detail
