#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace brigade::actors::detail {

/// A FIFO of T in one circular buffer that only grows: a stage's queue, reorder window
/// and outputs hold at most its capacity, so after the first items it allocates
/// nothing (std::deque allocates and frees a block every few pushes: a malloc and a
/// free per item or two, per stage). T must be default-constructible and movable; a
/// popped slot is reset to T{} so that it releases what it held at once.
///
/// Not thread-safe: owned by one actor.
template <class T>
class Ring {
 public:
  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }

  /// The i-th element from the front (i < size()).
  T& operator[](std::size_t i) { return slots_[(head_ + i) & (slots_.size() - 1)]; }
  T& front() { return slots_[head_]; }

  /// Appends a slot and returns it, in the T{} state, for the caller to fill (no
  /// temporary T to move in).
  T& emplace_back() {
    if (size_ == slots_.size()) grow();
    T& slot = slots_[(head_ + size_) & (slots_.size() - 1)];
    ++size_;
    return slot;
  }

  void pop_front() {
    slots_[head_] = T{};
    head_ = (head_ + 1) & (slots_.size() - 1);
    --size_;
  }

 private:
  void grow() {
    std::vector<T> bigger(slots_.empty() ? 16 : 2 * slots_.size());  // a power of two
    for (std::size_t i = 0; i < size_; ++i) bigger[i] = std::move((*this)[i]);
    slots_ = std::move(bigger);
    head_ = 0;
  }

  std::vector<T> slots_;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

}  // namespace brigade::actors::detail
