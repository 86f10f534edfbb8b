#include "actors/positions.h"

#include <algorithm>

namespace brigade::actors {

Positions::Positions(std::initializer_list<std::uint64_t> positions) {
  for (auto p : positions) push_back(p);
}

void Positions::push_back(std::uint64_t position) {
  if (size_ == 0) {
    inline_ = position;
  } else {
    if (size_ == 1) heap_.assign(1, inline_);
    heap_.push_back(position);
  }
  ++size_;
}

void Positions::append(const Positions& other) {
  if (size_ + other.size_ <= 1) {
    if (other.size_ == 1) push_back(other.inline_);
    return;
  }
  if (size_ <= 1) heap_.assign(begin(), end());
  heap_.insert(heap_.end(), other.begin(), other.end());
  size_ += other.size_;
}

void Positions::clear() {
  size_ = 0;
  heap_.clear();
}

bool operator==(const Positions& a, const Positions& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

bool CommitState::committed(std::uint64_t position) const {
  return position < watermark || std::binary_search(above.begin(), above.end(), position);
}

}  // namespace brigade::actors
