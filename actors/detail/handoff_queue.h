#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <vector>

#include "actors/clock.h"
#include "actors/detail/spec.h"
#include "actors/stats.h"

namespace brigade::actors::detail {

/// The bounded hand-off between the sink actor and the consumer thread.
///
/// Credit protocol: the producer (the sink actor) may push only items it reserved
/// with `reserve`, so `size() + reserved` never exceeds `capacity`. When `reserve`
/// cannot grant at least `min_grant` slots it arms a notification: the consumer's
/// `pop` then reports (through `notify_producer`) the moment enough slots are free,
/// and the consumer sends the producer one wake-up message. So the consumer costs the
/// producer one message per `min_grant` items, not one per item.
///
/// Thread safety: one producer thread and one consumer thread at a time (any thread
/// may `close`); all members are guarded by one mutex. The consumer's wait is timed
/// by `clock` (SinkStats::consumer_wait_s), which must outlive the queue.
class HandoffQueue {
 public:
  explicit HandoffQueue(std::size_t capacity, const Clock& clock = *Clock::steady());

  std::size_t capacity() const { return capacity_; }

  // -- producer ---------------------------------------------------------------
  /// Reserves up to every free slot if at least `min_grant` are free; returns the
  /// number reserved (0 arms the notification).
  std::size_t reserve(std::size_t min_grant);
  /// Appends items that were reserved; `items` is left empty.
  void push(std::vector<Item>& items);
  /// Ends the stream: the consumer drains what is queued, then gets `end` (or the
  /// failure rethrown, once). Later pushes are dropped; the first close wins.
  void close(std::exception_ptr failure = nullptr);

  // -- consumer ---------------------------------------------------------------
  /// Waits up to `timeout` (forever when empty) for an item. Rethrows the failure
  /// given to close() once, after the queued items. `notify_producer` is set when
  /// the producer asked to be woken and enough slots are now free.
  NextStatus pop(Item& out, std::optional<std::chrono::nanoseconds> timeout, bool& notify_producer);

  SinkStats stats() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  const std::size_t capacity_;
  const Clock& clock_;
  std::deque<Item> items_;
  std::size_t reserved_ = 0;
  std::size_t notify_at_ = 0;  // 0: producer not waiting; else free slots that wake it
  bool closed_ = false;
  std::exception_ptr failure_;
  SinkStats stats_;
  std::chrono::nanoseconds wait_{0};
};

}  // namespace brigade::actors::detail
