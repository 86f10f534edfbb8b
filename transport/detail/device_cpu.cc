#include "transport/detail/device_cpu.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <utility>

#include "transport/device_normalize.h"

namespace brigade::transport::detail {

std::shared_ptr<CpuEvent> CpuEvent::completed() {
  std::promise<void> p;
  p.set_value();
  return std::make_shared<CpuEvent>(p.get_future().share());
}

bool CpuEvent::ready() const {
  return done_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

CpuDevice::CpuDevice() : worker_([q = queue_] { run(*q); }) {}

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

void CpuDevice::run(Queue& q) {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(q.mutex);
      q.wake.wait(
          lock, [&] { return (!q.paused && !q.tasks.empty()) || (q.stopping && q.tasks.empty()); });
      if (q.tasks.empty()) return;
      task = std::move(q.tasks.front());
      q.tasks.pop_front();
    }
    try {
      task();
    } catch (...) {
      if (!q.pending_error) q.pending_error = std::current_exception();
    }
    task = nullptr;  // what it captured goes now, the device's last reference maybe
  }
}

void CpuDevice::submit(std::function<void()> task) {
  {
    std::lock_guard lock(queue_->mutex);
    queue_->tasks.push_back(std::move(task));
  }
  queue_->wake.notify_one();
}

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

std::shared_ptr<void> CpuDevice::allocate(std::size_t nbytes) {
  constexpr std::size_t kAlign = 256;  // as cudaMalloc guarantees
  const std::size_t size = (std::max<std::size_t>(nbytes, 1) + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, size);
  if (p == nullptr) throw std::bad_alloc();
  live_->fetch_add(1);
  return std::shared_ptr<void>(p, [live = live_](void* q) {
    std::free(q);
    live->fetch_sub(1);
  });
}

std::shared_ptr<void> CpuDevice::allocate_host(std::size_t nbytes) { return allocate(nbytes); }
std::shared_ptr<void> CpuDevice::allocate_device(std::size_t nbytes) { return allocate(nbytes); }

void CpuDevice::copy_to_device(void* dst, const void* src, std::size_t nbytes) {
  submit([=] { std::memcpy(dst, src, nbytes); });
}

void CpuDevice::copy_to_host(void* dst, const void* src, std::size_t nbytes) {
  submit([=] { std::memcpy(dst, src, nbytes); });
}

void CpuDevice::normalize(const NormalizeJob& job) {
  submit([job] { normalize_reference(job); });
}

std::shared_ptr<Event> CpuDevice::record() {
  auto done = std::make_shared<std::promise<void>>();
  auto event = std::make_shared<CpuEvent>(done->get_future().share());
  submit([q = queue_.get(), done] {  // runs on the worker, which holds the queue
    if (q->pending_error) {
      done->set_exception(std::exchange(q->pending_error, nullptr));
    } else {
      done->set_value();
    }
  });
  return event;
}

void CpuDevice::wait_for(const std::shared_ptr<Event>& event) {
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

std::shared_ptr<Event> CpuDevice::record_on(ExternalStream) { return CpuEvent::completed(); }

void CpuDevice::wait_on(ExternalStream, const std::shared_ptr<Event>&) {}

void CpuDevice::synchronize() { record()->wait(); }

}  // namespace brigade::transport::detail
