#include "transport/device/detail/device_cpu.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "transport/device/device_normalize.h"

namespace brigade::transport::detail {

void CpuFaultState::check(const char* call) const {
  if (!broken.load()) return;
  try {
    std::rethrow_exception(sticky);
  } catch (const DeviceError& e) {
    throw DeviceError(e.library(), e.code(), call, e.device(), e.message(),
                      static_cast<DeviceErrc>(e.error_code().value()));
  }
}

void CpuFaultState::check_allocated(const void* p, std::size_t n, const char* call) const {
  if (!faults.ordered_allocations || p == nullptr) return;
  const auto start = reinterpret_cast<std::uintptr_t>(p);
  std::lock_guard lock(pending_mutex);
  auto it = pending.upper_bound(start + std::max<std::size_t>(n, 1) - 1);
  if (it == pending.begin()) return;
  --it;
  if (start < it->first + it->second) {
    throw DeviceError("device", "use-before-allocation", call, {DeviceKind::cpu, 0},
                      "injected: device memory used before its stream-ordered allocation ran "
                      "on the allocating queue");
  }
}

std::shared_ptr<CpuEvent> CpuEvent::completed() {
  std::promise<void> p;
  p.set_value();
  return std::make_shared<CpuEvent>(p.get_future().share());
}

// As CudaEvent::ready: the sticky error, which a broken device reports for every event,
// counts as complete; wait() throws it.
bool CpuEvent::ready() const noexcept {
  if (faults_ && faults_->broken.load()) return true;
  return done_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

void CpuEvent::wait() const {
  if (faults_) faults_->check("cudaEventSynchronize (CPU device)");
  done_.get();
}

CpuDevice::CpuDevice(CpuFaults faults) : faults_(std::make_shared<CpuFaultState>()) {
  faults_->faults = faults;
  faults_->sticky = std::make_exception_ptr(
      DeviceError("device", "sticky-error", "", spec(),
                  "injected: the device is broken, as by a faulting kernel"));
  start_worker();
}

CpuDevice::CpuDevice(SameDevice same)
    : host_ranges_(same.device->host_ranges_),
      live_(same.device->live_),
      faults_(same.device->faults_) {
  start_worker();
}

void CpuDevice::start_worker() {
  worker_ = std::thread([q = queue_, f = faults_] { run(*q, *f); });
}

std::shared_ptr<Device> CpuDevice::open_queue() {
  faults_->check("cudaStreamCreateWithFlags (CPU device)");
  return std::make_shared<CpuDevice>(SameDevice{this});
}

CpuDevice::~CpuDevice() {
  {
    std::lock_guard lock(queue_->mutex);
    queue_->stopping = true;
    queue_->paused = false;
  }
  queue_->wake.notify_all();
  if (worker_.get_id() == std::this_thread::get_id()) {
    worker_.detach();  // the last reference was dropped by a task: the loop ends by itself
  } else {
    worker_.join();
  }
}

void CpuDevice::run(Queue& q, const CpuFaultState& faults) {
  {
    std::lock_guard lock(q.mutex);
    q.worker = std::this_thread::get_id();
  }
  for (;;) {
    std::function<void()> task;
    bool control = false;
    {
      std::unique_lock lock(q.mutex);
      q.wake.wait(
          lock, [&] { return (!q.paused && !q.tasks.empty()) || (q.stopping && q.tasks.empty()); });
      if (q.tasks.empty()) return;
      std::tie(task, control) = std::move(q.tasks.front());
      q.tasks.pop_front();
    }
    if (control || !faults.broken.load()) {  // a broken device runs no more work
      try {
        task();
      } catch (...) {
        if (!q.pending_error) q.pending_error = std::current_exception();
      }
    }
    task = nullptr;  // what it captured goes now, the device's last reference maybe
    {
      std::lock_guard lock(q.mutex);
      ++q.finished;
    }
    q.progressed.notify_all();
  }
}

void CpuDevice::enqueue(std::function<void()> task, bool control) {
  {
    std::lock_guard lock(queue_->mutex);
    queue_->tasks.emplace_back(std::move(task), control);
    ++queue_->submitted;
  }
  queue_->wake.notify_one();
}

void CpuDevice::submit(std::function<void()> task) { enqueue(std::move(task), false); }

void CpuDevice::pause() {
  std::lock_guard lock(queue_->mutex);
  queue_->paused = true;
}

void CpuDevice::resume() {
  // Notified under the lock: the work it releases may drop the device's last reference.
  std::lock_guard lock(queue_->mutex);
  queue_->paused = false;
  queue_->wake.notify_all();
}

std::shared_ptr<void> CpuDevice::allocate(std::size_t nbytes, const char* call) {
  faults_->check(call);
  constexpr std::size_t kAlign = 256;  // as cudaMalloc guarantees
  const std::size_t size = (std::max<std::size_t>(nbytes, 1) + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, size);
  if (p == nullptr) throw std::bad_alloc();
  live_->fetch_add(1);
  allocations_.fetch_add(1);
  if (!faults_->faults.free_waits_for_work) {
    return std::shared_ptr<void>(p, [live = live_](void* q) {
      std::free(q);
      live->fetch_sub(1);
    });
  }
  // As cudaFree: the free waits for the work queued before it (not on the worker itself,
  // where that work is what runs the free).
  return std::shared_ptr<void>(p, [live = live_, queue = queue_, faults = faults_](void* q) {
    {
      std::unique_lock lock(queue->mutex);
      if (queue->finished < queue->submitted && queue->worker != std::this_thread::get_id()) {
        faults->frees_that_waited.fetch_add(1);
        const auto target = queue->submitted;
        queue->progressed.wait(lock, [&] { return queue->finished >= target; });
      }
    }
    std::free(q);
    live->fetch_sub(1);
  });
}

std::shared_ptr<void> CpuDevice::allocate_host(std::size_t nbytes) {
  auto memory = allocate(nbytes, "cudaHostAlloc (CPU device)");
  const auto start = reinterpret_cast<std::uintptr_t>(memory.get());
  {
    std::lock_guard lock(host_ranges_->mutex);
    host_ranges_->ranges[start] = std::max<std::size_t>(nbytes, 1);
  }
  // The range leaves the map before the memory is freed (and can be handed out again).
  return std::shared_ptr<void>(memory.get(), [memory, ranges = host_ranges_, start](void*) mutable {
    {
      std::lock_guard lock(ranges->mutex);
      ranges->ranges.erase(start);
    }
    memory.reset();
  });
}

bool CpuDevice::page_locked(const void* host) const {
  const auto p = reinterpret_cast<std::uintptr_t>(host);
  std::lock_guard lock(host_ranges_->mutex);
  auto it = host_ranges_->ranges.upper_bound(p);
  if (it == host_ranges_->ranges.begin()) return false;
  --it;
  return p < it->first + it->second;
}
// ordered_allocations: the memory is pending until this queue's worker reaches the
// allocation (a control task: it runs on a broken device too); freed before then, it
// leaves the pending list with the free.
std::shared_ptr<void> CpuDevice::allocate_device(std::size_t nbytes) {
  auto memory = allocate(nbytes, "cudaMallocFromPoolAsync (CPU device)");
  if (!faults_->faults.ordered_allocations) return memory;
  const auto start = reinterpret_cast<std::uintptr_t>(memory.get());
  {
    std::lock_guard lock(faults_->pending_mutex);
    faults_->pending[start] = std::max<std::size_t>(nbytes, 1);
  }
  auto settled = [faults = faults_, start] {
    std::lock_guard lock(faults->pending_mutex);
    faults->pending.erase(start);
  };
  enqueue(settled, true);
  return std::shared_ptr<void>(memory.get(), [memory, settled](void*) mutable {
    settled();
    memory.reset();
  });
}

void CpuDevice::copy_to_device(void* dst, const void* src, std::size_t nbytes) {
  faults_->check("cudaMemcpyAsync (CPU device)");
  submit([=, faults = faults_.get(), delay = faults_->faults.copy_delay] {
    faults->check_allocated(dst, nbytes, "cudaMemcpyAsync (CPU device)");
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
    std::memcpy(dst, src, nbytes);
  });
}

void CpuDevice::copy_to_host(void* dst, const void* src, std::size_t nbytes) {
  faults_->check("cudaMemcpyAsync (CPU device)");
  submit([=, faults = faults_.get(), delay = faults_->faults.copy_delay] {
    faults->check_allocated(src, nbytes, "cudaMemcpyAsync (CPU device)");
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
    std::memcpy(dst, src, nbytes);
  });
}

void CpuDevice::normalize(const NormalizeJob& job) {
  faults_->check("normalize (CPU device)");
  submit([job, faults = faults_.get()] {
    faults->check_allocated(job.src, 1, "normalize (CPU device)");
    faults->check_allocated(job.dst, 1, "normalize (CPU device)");
    normalize_reference(job);
  });
}

std::shared_ptr<Event> CpuDevice::record() {
  faults_->check("cudaEventRecord (CPU device)");
  const auto n = faults_->records.fetch_add(1) + 1;
  const auto& limit = faults_->faults.sticky_after_events;
  const bool breaks_here = limit && n > *limit;
  auto done = std::make_shared<std::promise<void>>();
  auto event = std::make_shared<CpuEvent>(done->get_future().share(), faults_);
  // Runs on the worker, which holds the queue and the fault state.
  enqueue(
      [q = queue_.get(), f = faults_.get(), done, breaks_here] {
        if (breaks_here) f->broken.store(true);
        if (f->broken.load()) {
          done->set_exception(f->sticky);
        } else if (q->pending_error) {
          done->set_exception(std::exchange(q->pending_error, nullptr));
        } else {
          done->set_value();
        }
      },
      true);
  return event;
}

void CpuDevice::wait_for(const std::shared_ptr<Event>& event) {
  faults_->check("cudaStreamWaitEvent (CPU device)");
  if (!std::dynamic_pointer_cast<CpuEvent>(event)) {
    throw std::invalid_argument("CpuDevice::wait_for: not an event of a CPU device");
  }
  // Orders only: the waited-for work's failure is reported to whoever waits on it.
  submit([event] {
    try {
      event->wait();
    } catch (...) {
    }
  });
}

std::shared_ptr<Event> CpuDevice::record_on(ExternalStream) {
  faults_->check("cudaEventRecord (CPU device)");
  return CpuEvent::completed();
}

void CpuDevice::wait_on(ExternalStream, const std::shared_ptr<Event>&) {
  faults_->check("cudaStreamWaitEvent (CPU device)");
}

void CpuDevice::synchronize() { record()->wait(); }

}  // namespace brigade::transport::detail
