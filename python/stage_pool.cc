#include "python/stage_pool.h"

#include <stdexcept>

namespace brigade::python {

StagePool::StagePool(int threads) {
  if (threads < 1) throw std::invalid_argument("stage_threads must be at least 1");
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this](std::stop_token s) { work(s); });
}

StagePool::~StagePool() {
  for (auto& t : threads_) t.request_stop();
  ready_.notify_all();
  threads_.clear();  // joins; work() finishes the queue before it returns
}

void StagePool::submit(std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
    tasks_.push_back(std::move(task));
  }
  ready_.notify_one();
}

void StagePool::work(std::stop_token stop) {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, stop, [this] { return !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and nothing is left to run
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace brigade::python
