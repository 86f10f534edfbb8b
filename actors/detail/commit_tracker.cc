#include "actors/detail/commit_tracker.h"

namespace brigade::actors::detail {

CommitTracker::CommitTracker(CommitState initial)
    : watermark_(initial.watermark), above_(initial.above.begin(), initial.above.end()) {
  while (above_.erase(watermark_) > 0) ++watermark_;
}

void CommitTracker::split(const Positions& positions, std::size_t outputs) {
  if (outputs == 1) return;
  std::lock_guard lock(mutex_);
  for (auto p : positions) {
    if (outputs == 0) {
      commit_one_locked(p);
    } else {
      extra_fragments_[p] += outputs - 1;
    }
  }
}

void CommitTracker::commit(const Positions& positions) {
  std::lock_guard lock(mutex_);
  for (auto p : positions) commit_one_locked(p);
}

void CommitTracker::commit_one_locked(std::uint64_t position) {
  if (auto it = extra_fragments_.find(position); it != extra_fragments_.end()) {
    if (--it->second == 0) extra_fragments_.erase(it);
    return;
  }
  if (position < watermark_) return;  // committed already (a repeated position)
  if (position != watermark_) {
    above_.insert(position);
    return;
  }
  ++watermark_;
  while (above_.erase(watermark_) > 0) ++watermark_;
}

CommitState CommitTracker::snapshot() const {
  std::lock_guard lock(mutex_);
  return CommitState{watermark_, {above_.begin(), above_.end()}};
}

}  // namespace brigade::actors::detail
