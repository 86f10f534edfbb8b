#include "actors/detail/handoff_queue.h"

namespace brigade::actors::detail {

HandoffQueue::HandoffQueue(std::size_t capacity, const Clock& clock)
    : capacity_(capacity), clock_(clock) {
  stats_.buffer_size = static_cast<int>(capacity);
}

std::size_t HandoffQueue::reserve(std::size_t min_grant) {
  std::lock_guard lock(mutex_);
  const std::size_t free = capacity_ - items_.size() - reserved_;
  if (closed_ || free == 0 || free < min_grant) {
    notify_at_ = closed_ ? 0 : std::max<std::size_t>(min_grant, 1);
    return 0;
  }
  reserved_ += free;
  notify_at_ = 0;
  return free;
}

void HandoffQueue::push(std::vector<Item>& items) {
  {
    std::lock_guard lock(mutex_);
    reserved_ -= std::min(reserved_, items.size());
    if (!closed_) {
      for (auto& item : items) items_.push_back(std::move(item));
    }
  }
  items.clear();
  ready_.notify_one();
}

void HandoffQueue::close(std::exception_ptr failure) {
  {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    closed_ = true;
    failure_ = std::move(failure);
    notify_at_ = 0;
  }
  ready_.notify_all();
}

NextStatus HandoffQueue::pop(Item& out, std::optional<std::chrono::nanoseconds> timeout,
                             bool& notify_producer) {
  notify_producer = false;
  std::unique_lock lock(mutex_);
  ++stats_.requests;
  if (!items_.empty()) {
    ++stats_.ready;
  } else if (!closed_) {
    const auto start = clock_.now();
    auto has_work = [this] { return !items_.empty() || closed_; };
    if (timeout) {
      ready_.wait_for(lock, *timeout, has_work);
    } else {
      ready_.wait(lock, has_work);
    }
    wait_ += clock_.now() - start;
  }
  if (items_.empty()) {
    if (!closed_) return NextStatus::timeout;
    if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
    return NextStatus::end;
  }
  out = std::move(items_.front());
  items_.pop_front();
  ++stats_.delivered;
  if (notify_at_ != 0 && capacity_ - items_.size() - reserved_ >= notify_at_) {
    notify_at_ = 0;
    notify_producer = true;
  }
  return NextStatus::item;
}

SinkStats HandoffQueue::stats() const {
  std::lock_guard lock(mutex_);
  SinkStats s = stats_;
  s.consumer_wait_s = std::chrono::duration<double>(wait_).count();
  s.data_readiness = s.requests ? static_cast<double>(s.ready) / s.requests : 0.0;
  return s;
}

}  // namespace brigade::actors::detail
