#include "transport/device/detail/collective_control.h"

#include <thread>

namespace brigade::transport::detail {

CollectiveControl::CollectiveControl(CommDriver& driver, CollectiveControlOptions options)
    : driver_(driver), options_(options) {}

void CollectiveControl::throw_if_aborted(const char* call) const {
  if (aborted_.load()) {
    throw DeviceError("NCCL", "aborted", call, options_.device, "the group was aborted");
  }
}

void CollectiveControl::settle(const char* name, const std::stop_token& stop,
                               std::chrono::steady_clock::time_point deadline,
                               const char* on_timeout) {
  for (;;) {
    CommStatus status = CommStatus::in_progress;
    {
      std::lock_guard lock(mutex_);
      throw_if_aborted(name);
      status = driver_.status();
    }
    if (status == CommStatus::done) return;
    const bool stopped = stop.stop_requested();
    if (stopped || std::chrono::steady_clock::now() >= deadline) {
      abort();
      if (stopped) throw StopRequested(std::string("stopped during ") + name);
      throw DeviceError("NCCL", "timeout", name, options_.device, on_timeout);
    }
    std::this_thread::sleep_for(options_.poll);
  }
}

void CollectiveControl::check() {
  std::lock_guard lock(mutex_);
  throw_if_aborted("ncclCommGetAsyncError");
  driver_.status();
}

// The flag first: a thread between two polls sees it and never calls the driver again;
// one stuck inside a call holds the lock, and is aborted without it after abort_wait.
void CollectiveControl::abort() noexcept {
  if (aborted_.exchange(true)) return;
  // try_lock polled rather than timed_mutex::try_lock_for: GCC 12's ThreadSanitizer does
  // not intercept pthread_mutex_clocklock, and reports the unlock as of an unlocked mutex.
  std::unique_lock lock(mutex_, std::defer_lock);
  const auto until = std::chrono::steady_clock::now() + options_.abort_wait;
  while (!lock.try_lock() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  driver_.abort();
}

// Each poll under the lock, none across the wait (as settle); an abort from another
// thread meanwhile ends it without touching the communicator again.
void CollectiveControl::close() noexcept {
  const auto deadline = std::chrono::steady_clock::now() + options_.teardown_timeout;
  bool clean = true;
  try {
    bool polling = false;
    {
      std::lock_guard lock(mutex_);
      if (aborted_.load() || closed_) return;  // abort() released the communicator
      closed_ = true;
      polling = driver_.finalize();  // without finalize: destroy at once
    }
    while (polling) {
      {
        std::lock_guard lock(mutex_);
        if (aborted_.load()) return;
        if (driver_.status() == CommStatus::done) break;
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        clean = false;
        break;
      }
      std::this_thread::sleep_for(options_.poll);
    }
  } catch (...) {  // an error in finalize or a poll: the peer is gone or broken
    clean = false;
  }
  std::lock_guard lock(mutex_);
  if (aborted_.exchange(true)) return;
  if (clean) {
    driver_.destroy();
  } else {
    driver_.abort();
  }
}

}  // namespace brigade::transport::detail
