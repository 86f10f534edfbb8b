#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

namespace brigade::actors {

/// The source positions an item carries through the pipeline.
///
/// A source numbers its items 0, 1, 2, … in the order it yields them (a sampler may
/// number them with its own positions instead). A map stage keeps its input's
/// positions, a generator's outputs all share their input's positions, an aggregate
/// carries the concatenation of the positions of the items it contains, in the order
/// they were accumulated; `disaggregate()` gives element i position i of its input
/// when the counts match (an aggregate undone), and all of them otherwise.
///
/// One position is stored inline; more live on the heap. Value type, not thread-safe.
class Positions {
 public:
  Positions() = default;
  explicit Positions(std::uint64_t position) : inline_(position), size_(1) {}
  Positions(std::initializer_list<std::uint64_t> positions);

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const std::uint64_t* begin() const { return size_ <= 1 ? &inline_ : heap_.data(); }
  const std::uint64_t* end() const { return begin() + size_; }
  std::uint64_t operator[](std::size_t i) const { return begin()[i]; }
  std::uint64_t front() const { return *begin(); }

  void push_back(std::uint64_t position);
  void append(const Positions& other);
  void clear();

  friend bool operator==(const Positions& a, const Positions& b);

 private:
  std::uint64_t inline_ = 0;
  std::uint32_t size_ = 0;
  std::vector<std::uint64_t> heap_;  // all positions once size_ > 1
};

/// An item as a positioned source yields it: a source whose `next()` returns
/// std::optional<Positioned<T>> numbers its own items (a sampler reports the index of
/// the sample within this rank's epoch sequence, so a resumed sampler keeps numbering
/// where the checkpoint left off).
template <class T>
struct Positioned {
  std::uint64_t position = 0;
  T value;
};

/// Which source positions are committed: delivered to the consumer, filtered out, or
/// dropped with a recorded failure. Everything below `watermark` is committed, and so
/// is every position in `above` (sorted, all > watermark); nothing else is. A position
/// that a generator split into several items is committed when all of them are.
/// `above` stays small: it holds positions finished out of order while an earlier one
/// is still in flight, so its size is bounded by the pipeline's item bound.
struct CommitState {
  std::uint64_t watermark = 0;
  std::vector<std::uint64_t> above{};

  bool committed(std::uint64_t position) const;
  friend bool operator==(const CommitState&, const CommitState&) = default;
};

}  // namespace brigade::actors
