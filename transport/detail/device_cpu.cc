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

CpuDevice::CpuDevice() : worker_([this] { run(); }) {}

CpuDevice::~CpuDevice() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    paused_ = false;
  }
  wake_.notify_all();
  if (worker_.get_id() == std::this_thread::get_id()) {
    worker_.detach();  // the last reference was dropped by a task: the loop ends by itself
  } else {
    worker_.join();
  }
}

void CpuDevice::run() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock,
                 [&] { return (!paused_ && !queue_.empty()) || (stopping_ && queue_.empty()); });
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      task();
    } catch (...) {
      if (!pending_error_) pending_error_ = std::current_exception();
    }
  }
}

void CpuDevice::submit(std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(task));
  }
  wake_.notify_one();
}

void CpuDevice::pause() {
  std::lock_guard lock(mutex_);
  paused_ = true;
}

void CpuDevice::resume() {
  {
    std::lock_guard lock(mutex_);
    paused_ = false;
  }
  wake_.notify_all();
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
  submit([this, done] {
    if (pending_error_) {
      done->set_exception(std::exchange(pending_error_, nullptr));
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
