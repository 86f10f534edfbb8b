#pragma once

// Lists of strided position runs and the elastic re-partition of epoch plans, shared by
// the samplers (actors/sampler.cc) and the weighted mix (actors/mixer.cc). Header-only.
//
// A rank's work is a list of epochs, each with a "descriptor" that fixes the epoch's set
// of global positions (a sampler's epoch length L', a mix's starting world size) and the
// global positions of it that the rank still has to deliver. See "STRADDLING SETS" in
// actors/sampler.h for the rule that repartition_work() implements.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "actors/positions.h"
#include "actors/sampler.h"

namespace brigade::actors::detail {

/// Appends a run, merging it into the last one when together they form one stride.
inline void push_run(std::vector<PositionRun>& runs, PositionRun r) {
  if (r.count == 0) return;
  if (r.count == 1) r.stride = 1;
  if (!runs.empty()) {
    PositionRun& last = runs.back();
    const std::uint64_t last_end = last.start + (last.count - 1) * last.stride;
    if (r.start > last_end) {
      const std::uint64_t stride = last.count > 1 ? last.stride : r.start - last.start;
      if (r.start == last_end + stride && (r.count == 1 || r.stride == stride)) {
        last.stride = stride;
        last.count += r.count;
        return;
      }
    }
  }
  runs.push_back(r);
}

inline std::uint64_t count_of(const std::vector<PositionRun>& runs) {
  std::uint64_t total = 0;
  for (const auto& r : runs) total += r.count;
  return total;
}

/// Walks a list of runs by increasing local position, appending the sub-runs that
/// cover local intervals [a, b) given in increasing order.
class RunSlicer {
 public:
  explicit RunSlicer(const std::vector<PositionRun>& runs) : runs_(runs) {}
  void append(std::uint64_t a, std::uint64_t b, std::vector<PositionRun>& out) {
    while (a < b && run_ < runs_.size()) {
      const PositionRun& r = runs_[run_];
      const std::uint64_t end = begin_ + r.count;
      if (a >= end) {
        begin_ = end;
        ++run_;
        continue;
      }
      const std::uint64_t from = std::max(a, begin_) - begin_;
      const std::uint64_t to = std::min(b, end) - begin_;
      push_run(out, {r.start + from * r.stride, r.stride, to - from});
      a = begin_ + to;
    }
  }

 private:
  const std::vector<PositionRun>& runs_;
  std::size_t run_ = 0;
  std::uint64_t begin_ = 0;  // local position of runs_[run_]'s first entry
};

/// The owned positions that `committed` (over local positions) leaves, as global runs.
inline std::vector<PositionRun> uncommitted(const std::vector<PositionRun>& owned,
                                            const CommitState& committed) {
  std::vector<PositionRun> out;
  const std::uint64_t share = count_of(owned);
  RunSlicer slicer(owned);
  std::uint64_t cur = std::min(committed.watermark, share);
  for (std::uint64_t x : committed.above) {
    if (x < cur) continue;
    if (x >= share) break;
    slicer.append(cur, x, out);
    cur = x + 1;
  }
  slicer.append(cur, share, out);
  return out;
}

/// One epoch of one rank's work: the descriptor that fixes the epoch's positions and
/// the global positions of it left to deliver, in the rank's order.
struct EpochWork {
  std::uint64_t descriptor = 0;
  std::vector<PositionRun> positions{};
};

/// What one old rank (of a consistent set) still has to do: from its current `epoch`
/// on, parts[j] is epoch + j (parts[0]: the uncommitted rest of the current epoch;
/// later parts: planned epochs, nothing committed). Epochs after the last part start
/// fresh at the set's world size.
struct RankWork {
  std::uint64_t epoch = 0;
  std::vector<EpochWork> parts{};
};

/// The fresh work of rank `rank` in `epoch` at the set's world size.
using FreshWork = std::function<EpochWork(std::uint64_t epoch, std::uint32_t rank)>;

/// The new rank's plan: parts[j] is epoch `epoch + j`, the last part the last epoch any
/// old rank had touched.
struct Repartitioned {
  std::uint64_t epoch = 0;
  std::vector<EpochWork> parts{};
};

/// The re-partition of STRADDLING SETS (actors/sampler.h): for every epoch from the
/// oldest current epoch to the newest epoch any rank has started or planned, the
/// positions left by the ranks that have not finished it (their part of it, or their
/// fresh work when they have none), in rank order, cut into `new_world_size`
/// contiguous slices whose sizes differ by at most one. `ranks` is indexed by rank.
/// Throws SamplerStateError when two ranks disagree on an epoch's descriptor.
inline Repartitioned repartition_work(std::span<const RankWork> ranks, const FreshWork& fresh,
                                      std::uint32_t new_rank, std::uint32_t new_world_size,
                                      const char* descriptor_name) {
  Repartitioned out;
  if (ranks.empty()) return out;
  std::uint64_t lo = ranks.front().epoch, top = 0;
  for (const auto& r : ranks) {
    lo = std::min(lo, r.epoch);
    top = std::max(top, r.epoch + (r.parts.empty() ? 0 : r.parts.size() - 1));
  }
  out.epoch = lo;
  for (std::uint64_t e = lo; e <= top; ++e) {
    EpochWork all;
    bool have_descriptor = false, planned = false, fresh_started = false;
    std::uint32_t from_rank = 0;
    for (std::uint32_t r = 0; r < ranks.size(); ++r) {
      const RankWork& w = ranks[r];
      if (w.epoch > e) continue;  // finished this epoch
      const std::uint64_t j = e - w.epoch;
      if (j > 0) (j < w.parts.size() ? planned : fresh_started) = true;
      if (planned && fresh_started) {
        throw SamplerStateError(
            "repartition: of the ranks that have not started epoch " + std::to_string(e) +
            ", some carry a planned share of it and some do not (rank " + std::to_string(r) + ")");
      }
      const EpochWork part = j < w.parts.size() ? w.parts[j] : fresh(e, r);
      if (!have_descriptor) {
        all.descriptor = part.descriptor;
        have_descriptor = true;
        from_rank = r;
      } else if (part.descriptor != all.descriptor) {
        throw SamplerStateError(
            "repartition: epoch " + std::to_string(e) + " has " + descriptor_name + " " +
            std::to_string(part.descriptor) + " at rank " + std::to_string(r) + " but " +
            std::to_string(all.descriptor) + " at rank " + std::to_string(from_rank));
      }
      for (const auto& run : part.positions) push_run(all.positions, run);
    }
    const std::uint64_t m = count_of(all.positions);
    const std::uint64_t base = m / new_world_size, extra = m % new_world_size;
    const std::uint64_t a = new_rank * base + std::min<std::uint64_t>(new_rank, extra);
    const std::uint64_t b = a + base + (new_rank < extra ? 1 : 0);
    EpochWork mine{all.descriptor, {}};
    RunSlicer(all.positions).append(a, b, mine.positions);
    out.parts.push_back(std::move(mine));
  }
  return out;
}

}  // namespace brigade::actors::detail
