#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <set>

#include "actors/positions.h"

namespace brigade::actors::detail {

/// Maintains a run's CommitState as items are delivered, filtered or failed.
///
/// Every position that entered the pipeline and is not committed is outstanding; a
/// generator that turns one input into k outputs adds k − 1 fragments to each of the
/// input's positions, and a position commits when its last fragment does. Commits of
/// delivered items happen on the consumer thread when it takes the item, so a
/// snapshot taken there matches exactly what the consumer has received.
///
/// Thread safety: all members may be called from any thread (one mutex).
class CommitTracker {
 public:
  explicit CommitTracker(CommitState initial = {});

  /// The item with `positions` became `outputs` items (a generator); 0 commits it.
  void split(const Positions& positions, std::size_t outputs);
  /// One fragment of each position in `positions` is finished.
  void commit(const Positions& positions);
  CommitState snapshot() const;

 private:
  void commit_one_locked(std::uint64_t position);

  mutable std::mutex mutex_;
  std::uint64_t watermark_ = 0;
  std::set<std::uint64_t> above_;
  std::map<std::uint64_t, std::uint64_t> extra_fragments_;
};

}  // namespace brigade::actors::detail
