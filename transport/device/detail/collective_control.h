#pragma once
// The host-side rules of a non-blocking communicator (NCCL with ncclConfig_t::blocking
// = 0), kept apart from NCCL so that they are tested in every build: nccl.cc drives the
// library through a CommDriver, tests through a scripted one
// (tests/transport/device/collective_control_test.cc).
//
// RULES (issue 22 items 3 and 4).
// - A call runs under the control's lock, one at a time, and is refused once aborted.
//   When the library answers "in progress" (ncclInProgress), settle() polls status()
//   until done: the lock is held for each poll only, never across the wait, and the
//   wait observes the caller's stop token (abort, StopRequested) and a deadline
//   (abort, DeviceError "timeout").
// - abort() is lock-free for the caller: an atomic flag, then the driver's abort taken
//   between two calls of another thread; a call stuck inside the library past
//   `abort_wait` is aborted without the lock (how NCCL unblocks a hung call). Every
//   later call, poll and check throws DeviceError "aborted" without touching the driver.
// - close() (teardown) finalizes and polls until done or `teardown_timeout`, then
//   destroys; an error or the timeout aborts instead (a dead peer would hold the
//   destroy for ever); after an abort it does nothing.
//
// THREAD SAFETY. All members may be called from any thread; abort() also while another
// thread is inside a call. The driver's methods are called under the lock, except
// abort() (see above).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <stop_token>
#include <string>

#include "transport/device/device.h"

namespace brigade::transport::detail {

/// What a non-blocking communicator says of its last call (ncclCommGetAsyncError).
enum class CommStatus : std::uint8_t { done, in_progress };

/// One library call per method on one communicator. Errors are thrown as DeviceError
/// (the library's code and text).
class CommDriver {
 public:
  virtual ~CommDriver() = default;
  /// ncclCommGetAsyncError: done, in progress, or throws the communicator's error.
  virtual CommStatus status() = 0;
  /// ncclCommFinalize: false where the library has none (NCCL < 2.14); throws on error.
  virtual bool finalize() = 0;
  virtual void destroy() noexcept = 0;  // ncclCommDestroy
  virtual void abort() noexcept = 0;    // ncclCommAbort
};

struct CollectiveControlOptions {
  DeviceSpec device{};                                // named in errors
  std::chrono::milliseconds timeout{30000};           // a call's host-side completion
  std::chrono::milliseconds teardown_timeout{10000};  // close()'s finalize
  std::chrono::microseconds poll{200};                // between two status() polls
  std::chrono::milliseconds abort_wait{100};          // abort()'s wait for the lock
};

class CollectiveControl {
 public:
  CollectiveControl(CommDriver& driver, CollectiveControlOptions options);
  CollectiveControl(const CollectiveControl&) = delete;
  CollectiveControl& operator=(const CollectiveControl&) = delete;

  /// Runs `call` (one library call: returns its CommStatus or throws) under the lock,
  /// then settles it within `timeout` (see RULES). `on_timeout` is the timeout's text.
  template <class Call>
  void run(const char* name, Call call, const std::stop_token& stop,
           const char* on_timeout = "the library did not take the call within the timeout") {
    CommStatus status = CommStatus::done;
    {
      std::lock_guard lock(mutex_);
      throw_if_aborted(name);
      status = call();
    }
    if (status == CommStatus::in_progress) {
      settle(name, stop, std::chrono::steady_clock::now() + options_.timeout, on_timeout);
    }
  }
  /// Polls until the last call is done; a stop or the deadline aborts (see RULES).
  void settle(const char* name, const std::stop_token& stop,
              std::chrono::steady_clock::time_point deadline, const char* on_timeout);
  /// Throws the communicator's asynchronous error, or "aborted".
  void check();
  /// See RULES. Idempotent; never throws.
  void abort() noexcept;
  bool aborted() const noexcept { return aborted_.load(); }
  /// Teardown (see RULES); never throws.
  void close() noexcept;

 private:
  void throw_if_aborted(const char* call) const;

  CommDriver& driver_;
  CollectiveControlOptions options_;
  std::mutex mutex_;                  // one driver call at a time; never held while waiting
  std::atomic<bool> aborted_{false};  // set for good by abort() and by close()
  bool closed_ = false;               // under mutex_
};

}  // namespace brigade::transport::detail
