#pragma once

// The threads that run a Loader's Python stage (see PYTHON STAGE in python/loader.h).
//
// CONTRACT. submit() queues a task; each of `threads` threads takes tasks in order and
// runs them. A task takes the GIL itself, only around the Python call, so the threads
// run in parallel whenever the callable releases the GIL (NumPy, torch, I/O, sleep).
// The destructor waits for the queued and running tasks, so the caller must not hold
// the GIL while destroying a pool with work left (a task waiting for the GIL would
// never finish): Loader drains its pending results first.
//
// THREADING. submit() from one thread; tasks run on the pool's threads.

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace brigade::python {

class StagePool {
 public:
  explicit StagePool(int threads);
  ~StagePool();
  StagePool(const StagePool&) = delete;
  StagePool& operator=(const StagePool&) = delete;

  void submit(std::function<void()> task);
  int threads() const { return static_cast<int>(threads_.size()); }

 private:
  void work(std::stop_token stop);

  std::mutex mutex_;
  std::condition_variable_any ready_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::jthread> threads_;
};

}  // namespace brigade::python
