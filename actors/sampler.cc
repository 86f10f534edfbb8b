#include "actors/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "actors/detail/permutation.h"
#include "actors/detail/runs.h"

namespace brigade::actors {
namespace {

constexpr std::uint64_t kMaxUint32Ids = std::uint64_t{1} << 32;

using detail::count_of;
using detail::push_run;

}  // namespace

const char* to_string(TailPolicy tail) {
  switch (tail) {
    case TailPolicy::none:
      return "none";
    case TailPolicy::drop_last:
      return "drop_last";
    case TailPolicy::pad:
      return "pad";
  }
  return "unknown";
}

const char* to_string(SamplerKind kind) {
  switch (kind) {
    case SamplerKind::deterministic:
      return "deterministic";
    case SamplerKind::random:
      return "random";
    case SamplerKind::weighted:
      return "weighted";
    case SamplerKind::blocks:
      return "blocks";
  }
  return "unknown";
}

std::string describe_conflict(const DatasetFingerprint& saved, const DatasetFingerprint& caller) {
  auto num = [](const char* name, std::uint64_t a, std::uint64_t b) {
    return std::string(name) + ": checkpoint has " + std::to_string(a) + ", caller has " +
           std::to_string(b);
  };
  if (saved.n != caller.n) return num("dataset size n", saved.n, caller.n);
  if (saved.identity_hash != caller.identity_hash) {
    return num("dataset identity hash", saved.identity_hash, caller.identity_hash);
  }
  if (saved.kind != caller.kind) {
    return std::string("sampler kind: checkpoint has ") + to_string(saved.kind) + ", caller has " +
           to_string(caller.kind);
  }
  if (saved.seed != caller.seed) return num("seed", saved.seed, caller.seed);
  if (saved.num_draws != caller.num_draws)
    return num("num_draws", saved.num_draws, caller.num_draws);
  if (saved.weights_hash != caller.weights_hash) {
    return num(saved.kind == SamplerKind::blocks ? "blocks hash (the containers' sizes, the window)"
                                                 : "weights hash",
               saved.weights_hash, caller.weights_hash);
  }
  if (saved.tail != caller.tail) {
    return std::string("tail policy: checkpoint has ") + to_string(saved.tail) + ", caller has " +
           to_string(caller.tail);
  }
  return {};
}

IdentityHasher::IdentityHasher(std::uint64_t count)
    : hash_(detail::hash_bytes(nullptr, 0, count)) {}

void IdentityHasher::add(std::string_view identity) {
  hash_ = detail::hash_bytes(identity.data(), identity.size(), hash_);
}

std::uint64_t hash_sample_identities(std::span<const std::string> identities) {
  IdentityHasher h(identities.size());
  for (const auto& s : identities) h.add(s);
  return h.value();
}

namespace {

// Fails unless every run lies inside [0, length).
template <class Fail>
void check_runs(const std::vector<PositionRun>& runs, std::uint64_t length, const std::string& what,
                const Fail& fail) {
  for (const auto& r : runs) {
    if (r.count == 0) continue;
    if (r.stride == 0 && r.count > 1) fail(what + " has stride 0");
    if (r.start >= length ||
        (r.count - 1) > (length - 1 - r.start) / std::max<std::uint64_t>(r.stride, 1)) {
      fail(what + " reaches beyond the epoch length " + std::to_string(length));
    }
  }
}

}  // namespace

void validate(const SamplerState& s) {
  auto fail = [&](const std::string& what) {
    throw SamplerStateError("sampler state of rank " + std::to_string(s.rank) + " of " +
                            std::to_string(s.world_size) + ": " + what);
  };
  if (s.format_version < SamplerState::kOldestFormatVersion ||
      s.format_version > SamplerState::kFormatVersion) {
    fail("format version " + std::to_string(s.format_version) + " is not supported (expected " +
         std::to_string(SamplerState::kOldestFormatVersion) + " to " +
         std::to_string(SamplerState::kFormatVersion) + ")");
  }
  if (s.world_size == 0) fail("world_size is 0");
  if (s.rank >= s.world_size) fail("rank is not below world_size");
  if (s.format_version < 2 && !s.planned.empty()) fail("planned epochs need format version 2");
  check_runs(s.owned, s.epoch_length, "an owned run", fail);
  for (std::size_t i = 0; i < s.planned.size(); ++i) {
    check_runs(s.planned[i].owned, s.planned[i].epoch_length,
               "a run planned for epoch " + std::to_string(s.epoch + 1 + i), fail);
  }
  const auto& above = s.committed.above;
  for (std::size_t i = 1; i < above.size(); ++i) {
    if (above[i] <= above[i - 1]) fail("committed positions are not sorted and unique");
  }
}

std::uint64_t SamplerState::share() const { return count_of(owned); }

std::uint64_t SamplerState::remaining() const {
  return count_of(detail::uncommitted(owned, committed));
}

std::uint64_t epoch_length(std::uint64_t length, TailPolicy tail, std::uint32_t world_size) {
  const std::uint64_t w = std::max<std::uint32_t>(world_size, 1);
  switch (tail) {
    case TailPolicy::none:
      return length;
    case TailPolicy::drop_last:
      return length / w * w;
    case TailPolicy::pad:
      return (length + w - 1) / w * w;
  }
  return length;
}

std::vector<PositionRun> initial_partition(std::uint64_t epoch_length, std::uint32_t rank,
                                           std::uint32_t world_size) {
  if (rank >= epoch_length) return {};
  const std::uint64_t count = (epoch_length - rank + world_size - 1) / world_size;
  std::vector<PositionRun> runs;
  push_run(runs, {rank, world_size, count});
  return runs;
}

namespace {

// The states of ranks 0 … W-1, indexed by rank, after checking that they are one
// consistent checkpoint (their epochs may differ: STRADDLING SETS).
std::vector<const SamplerState*> by_rank(std::span<const SamplerState> ranks) {
  if (ranks.empty()) throw SamplerStateError("repartition: no rank states");
  const SamplerState& first = ranks.front();
  if (ranks.size() != first.world_size) {
    throw SamplerStateError("repartition: " + std::to_string(ranks.size()) +
                            " rank states for world size " + std::to_string(first.world_size));
  }
  std::vector<const SamplerState*> out(first.world_size, nullptr);
  std::map<std::uint64_t, std::uint64_t> owned;  // epoch -> positions owned in it
  for (const auto& s : ranks) {
    validate(s);
    auto mismatch = [&](const std::string& what) {
      throw SamplerStateError("repartition: rank " + std::to_string(s.rank) +
                              " differs from rank " + std::to_string(first.rank) + " in " + what);
    };
    if (s.world_size != first.world_size) mismatch("world_size");
    if (s.generation != first.generation) mismatch("generation");
    if (auto c = describe_conflict(first.fingerprint, s.fingerprint); !c.empty()) mismatch(c);
    if (out[s.rank])
      throw SamplerStateError("repartition: rank " + std::to_string(s.rank) + " appears twice");
    out[s.rank] = &s;
    owned[s.epoch] += s.share();
  }
  for (const auto* s : out) {
    if (owned[s->epoch] > s->epoch_length) {
      throw SamplerStateError("repartition: the ranks in epoch " + std::to_string(s->epoch) +
                              " own more positions than the epoch has");
    }
  }
  return out;
}

}  // namespace

SamplerState repartition(std::span<const SamplerState> ranks, std::uint32_t new_rank,
                         std::uint32_t new_world_size) {
  if (new_world_size == 0 || new_rank >= new_world_size) {
    throw SamplerStateError("repartition: rank " + std::to_string(new_rank) +
                            " is not below world size " + std::to_string(new_world_size));
  }
  const auto states = by_rank(ranks);
  const SamplerState& first = *states.front();
  std::vector<detail::RankWork> work;
  for (const auto* s : states) {
    detail::RankWork w{s->epoch, {{s->epoch_length, detail::uncommitted(s->owned, s->committed)}}};
    for (const auto& p : s->planned) w.parts.push_back({p.epoch_length, p.owned});
    work.push_back(std::move(w));
  }
  const std::uint32_t old_world = first.world_size;
  const std::uint64_t fresh_length =
      epoch_length(first.fingerprint.num_draws, first.fingerprint.tail, old_world);
  const auto fresh = [&](std::uint64_t, std::uint32_t rank) {
    return detail::EpochWork{fresh_length, initial_partition(fresh_length, rank, old_world)};
  };
  auto plan = detail::repartition_work(work, fresh, new_rank, new_world_size, "length");

  SamplerState out;
  out.generation = first.generation;
  out.fingerprint = first.fingerprint;
  out.epoch = plan.epoch;
  out.epoch_length = plan.parts.front().descriptor;
  out.world_size = new_world_size;
  out.rank = new_rank;
  out.owned = std::move(plan.parts.front().positions);
  for (std::size_t i = 1; i < plan.parts.size(); ++i) {
    out.planned.push_back({plan.parts[i].descriptor, 0, std::move(plan.parts[i].positions)});
  }
  return out;
}

DistributedSampler::DistributedSampler(DatasetFingerprint fingerprint, std::uint32_t rank,
                                       std::uint32_t world_size, std::uint64_t epoch,
                                       std::vector<double> weights)
    : fingerprint_(fingerprint),
      rank_(rank),
      world_size_(world_size),
      weights_(std::move(weights)) {
  if (world_size_ == 0) throw SamplerStateError("sampler: world_size must be at least 1");
  if (rank_ >= world_size_) {
    throw SamplerStateError("sampler: rank " + std::to_string(rank_) + " is not below world_size " +
                            std::to_string(world_size_));
  }
  set_epoch(epoch);
}

void DistributedSampler::set_epoch(std::uint64_t epoch) {
  if (epoch >= plan_first_ && epoch - plan_first_ < plan_.size()) {
    const PlannedEpoch& p = plan_[epoch - plan_first_];
    start_epoch(epoch, p.epoch_length, p.owned, CommitState{});
    return;
  }
  plan_.clear();  // past the plan (or away from it): every later epoch starts fresh
  const std::uint64_t length = epoch_length(fingerprint_.num_draws, fingerprint_.tail, world_size_);
  start_epoch(epoch, length, initial_partition(length, rank_, world_size_), CommitState{});
}

std::uint64_t DistributedSampler::size_of(std::uint64_t epoch) const {
  if (epoch == epoch_) return share_;
  if (epoch >= plan_first_ && epoch - plan_first_ < plan_.size())
    return count_of(plan_[epoch - plan_first_].owned);
  const std::uint64_t length = epoch_length(fingerprint_.num_draws, fingerprint_.tail, world_size_);
  return count_of(initial_partition(length, rank_, world_size_));
}

void DistributedSampler::restore(const SamplerState& state) {
  validate(state);
  if (auto c = describe_conflict(state.fingerprint, fingerprint_); !c.empty()) {
    throw SamplerStateError("restore: " + c);
  }
  if (state.world_size != world_size_ || state.rank != rank_) {
    throw SamplerStateError("restore: the state is for rank " + std::to_string(state.rank) +
                            " of " + std::to_string(state.world_size) + ", this sampler is rank " +
                            std::to_string(rank_) + " of " + std::to_string(world_size_));
  }
  const std::uint64_t base = fingerprint_.num_draws;
  const auto check_length = [&](std::uint64_t length) {
    const bool ok = length == base ||
                    (fingerprint_.tail == TailPolicy::drop_last && length <= base) ||
                    (fingerprint_.tail == TailPolicy::pad && length >= base);
    if (!ok) {
      throw SamplerStateError("restore: epoch length " + std::to_string(length) + " does not fit " +
                              std::to_string(base) + " draws under tail policy " +
                              to_string(fingerprint_.tail));
    }
  };
  check_length(state.epoch_length);
  for (const auto& p : state.planned) check_length(p.epoch_length);
  plan_ = state.planned;
  plan_first_ = state.epoch + 1;
  start_epoch(state.epoch, state.epoch_length, state.owned, state.committed);
}

void DistributedSampler::start_epoch(std::uint64_t epoch, std::uint64_t epoch_length,
                                     std::vector<PositionRun> owned, const CommitState& committed) {
  if (epoch != epoch_ || !sequence_ready_) {
    sequence_ready_ = false;
    sequence32_ = {};
    sequence64_ = {};
  }
  epoch_ = epoch;
  epoch_length_ = epoch_length;
  owned_.clear();
  for (const auto& r : owned) push_run(owned_, r);
  run_offsets_.clear();
  share_ = 0;
  for (const auto& r : owned_) {
    run_offsets_.push_back(share_);
    share_ += r.count;
  }
  local_ = std::min(committed.watermark, share_);
  const auto it = std::upper_bound(run_offsets_.begin(), run_offsets_.end(), local_);
  run_ = it == run_offsets_.begin() ? 0 : static_cast<std::size_t>(it - run_offsets_.begin() - 1);
  offset_ = run_ < owned_.size() ? local_ - run_offsets_[run_] : 0;
  skip_.clear();
  for (auto x : committed.above) {
    if (x >= local_ && x < share_) skip_.push_back(x);
  }
  skip_index_ = 0;
  ended_ = false;
}

namespace {

// The streams of a block sequence: the containers' order, then one per window.
constexpr std::uint64_t kBlockStreams = std::uint64_t{1} << 63;

// BLOCKS in sampler.h: the containers permuted, their ids in windows of `window`
// containers, each window's ids permuted.
template <class I>
std::vector<I> block_sequence(const std::vector<std::uint64_t>& b, std::uint64_t window,
                              std::uint64_t seed, std::uint64_t epoch) {
  const std::uint64_t containers = b.size() - 1;
  const auto order = detail::permutation<std::uint64_t>(
      containers, containers, detail::mix_seed(seed, epoch, kBlockStreams));
  std::vector<I> out, ids;
  out.reserve(b.back());
  for (std::uint64_t w = 0; w * window < containers; ++w) {
    ids.clear();
    for (std::uint64_t k = w * window; k < std::min(containers, (w + 1) * window); ++k)
      for (std::uint64_t id = b[order[k]]; id < b[order[k] + 1]; ++id)
        ids.push_back(static_cast<I>(id));
    const auto p = detail::permutation<I>(ids.size(), ids.size(),
                                          detail::mix_seed(seed, epoch, kBlockStreams + 1 + w));
    for (const auto i : p) out.push_back(ids[i]);
  }
  return out;
}

}  // namespace

void DistributedSampler::use_blocks(std::vector<std::uint64_t> boundaries, std::uint64_t window) {
  blocks_ = std::move(boundaries);
  window_ = window;
}

void DistributedSampler::ensure_sequence() const {
  if (sequence_ready_) return;
  const auto& f = fingerprint_;
  if (f.kind != SamplerKind::deterministic && f.n > 0) {
    const bool narrow = f.n <= kMaxUint32Ids;
    if (f.kind == SamplerKind::blocks) {
      if (narrow)
        sequence32_ = block_sequence<std::uint32_t>(blocks_, window_, f.seed, epoch_);
      else
        sequence64_ = block_sequence<std::uint64_t>(blocks_, window_, f.seed, epoch_);
    } else if (f.kind == SamplerKind::weighted) {
      const auto seed = detail::mix_seed(f.seed, epoch_);
      if (narrow)
        sequence32_ = detail::weighted_draws<std::uint32_t>(weights_, f.num_draws, seed);
      else
        sequence64_ = detail::weighted_draws<std::uint64_t>(weights_, f.num_draws, seed);
    } else {
      // More draws than n: independent permutations back to back, one stream each.
      for (std::uint64_t block = 0, done = 0; done < f.num_draws; ++block) {
        const std::uint64_t count = std::min(f.n, f.num_draws - done);
        const auto seed = detail::mix_seed(f.seed, epoch_, block);
        if (narrow) {
          auto p = detail::permutation<std::uint32_t>(f.n, count, seed);
          if (block == 0)
            sequence32_ = std::move(p);
          else
            sequence32_.insert(sequence32_.end(), p.begin(), p.end());
        } else {
          auto p = detail::permutation<std::uint64_t>(f.n, count, seed);
          if (block == 0)
            sequence64_ = std::move(p);
          else
            sequence64_.insert(sequence64_.end(), p.begin(), p.end());
        }
        done += count;
      }
    }
  }
  sequence_ready_ = true;
}

SampleId DistributedSampler::at_global(std::uint64_t global) const {
  ensure_sequence();
  return sequence_at(global);
}

SampleId DistributedSampler::sequence_at(std::uint64_t global) const {
  const std::uint64_t length = fingerprint_.num_draws;
  const std::uint64_t j = global < length ? global : global % length;
  SampleId s;
  s.is_padding = global >= length;
  if (fingerprint_.kind == SamplerKind::deterministic)
    s.id = j;
  else
    s.id = sequence32_.empty() ? sequence64_[j] : sequence32_[j];
  return s;
}

SampleId DistributedSampler::at(std::uint64_t position) const {
  if (position >= share_) {
    throw std::out_of_range("sampler: position " + std::to_string(position) +
                            " is beyond this rank's " + std::to_string(share_) + " positions");
  }
  ensure_sequence();
  const auto it = std::upper_bound(run_offsets_.begin(), run_offsets_.end(), position);
  const auto& r = owned_[static_cast<std::size_t>(it - run_offsets_.begin() - 1)];
  return sequence_at(r.start + (position - *(it - 1)) * r.stride);
}

std::optional<Positioned<SampleId>> DistributedSampler::next() {
  if (ended_) set_epoch(epoch_ + 1);
  ensure_sequence();
  while (local_ < share_) {
    const std::uint64_t position = local_++;
    const PositionRun& r = owned_[run_];
    const std::uint64_t global = r.start + offset_ * r.stride;
    if (++offset_ == r.count) {
      ++run_;
      offset_ = 0;
    }
    if (skip_index_ < skip_.size() && skip_[skip_index_] == position) {
      ++skip_index_;
      continue;
    }
    return Positioned<SampleId>{position, sequence_at(global)};
  }
  ended_ = true;
  return std::nullopt;
}

SamplerState DistributedSampler::state(const CommitState& committed,
                                       std::uint64_t generation) const {
  SamplerState s;
  s.generation = generation;
  s.fingerprint = fingerprint_;
  s.epoch = epoch_;
  s.epoch_length = epoch_length_;
  s.world_size = world_size_;
  s.rank = rank_;
  s.owned = owned_;
  s.committed = committed;
  for (std::uint64_t e = epoch_ + 1; e >= plan_first_ && e - plan_first_ < plan_.size(); ++e)
    s.planned.push_back(plan_[e - plan_first_]);
  return s;
}

DistributedDeterministicSampler::DistributedDeterministicSampler(std::uint64_t n,
                                                                 const DeterministicOptions& o)
    : DistributedSampler(DatasetFingerprint{.n = n,
                                            .identity_hash = o.identity_hash,
                                            .kind = SamplerKind::deterministic,
                                            .seed = 0,
                                            .num_draws = n,
                                            .weights_hash = 0,
                                            .tail = o.tail},
                         o.rank, o.world_size, o.epoch, {}) {}

namespace {

DatasetFingerprint random_fingerprint(std::uint64_t n, const RandomOptions& o) {
  DatasetFingerprint f{.n = n,
                       .identity_hash = o.identity_hash,
                       .kind = SamplerKind::random,
                       .seed = o.seed,
                       .num_draws = o.num_draws == 0 ? n : o.num_draws,
                       .weights_hash = 0,
                       .tail = o.tail};
  if (!o.weights.empty()) {
    if (o.weights.size() != n) {
      throw SamplerStateError("sampler: " + std::to_string(o.weights.size()) + " weights for " +
                              std::to_string(n) + " samples");
    }
    double sum = 0;
    for (double w : o.weights) {
      if (!std::isfinite(w) || w < 0)
        throw SamplerStateError("sampler: weights must be finite and >= 0");
      sum += w;
    }
    if (!(sum > 0) || !std::isfinite(sum))
      throw SamplerStateError("sampler: the weights' sum must be positive");
    f.kind = SamplerKind::weighted;
    f.weights_hash = detail::hash_bytes(o.weights.data(), o.weights.size() * sizeof(double), n) | 1;
  }
  if (n == 0) f.num_draws = 0;
  return f;
}

}  // namespace

DistributedRandomSampler::DistributedRandomSampler(std::uint64_t n, const RandomOptions& o)
    : DistributedSampler(random_fingerprint(n, o), o.rank, o.world_size, o.epoch, o.weights) {}

namespace {

DatasetFingerprint block_fingerprint(std::uint64_t n, const BlockOptions& o) {
  const auto& b = o.boundaries;
  if (b.size() < 2 || b.front() != 0 || b.back() != n || !std::is_sorted(b.begin(), b.end())) {
    throw SamplerStateError("sampler: block boundaries must run from 0 to n = " +
                            std::to_string(n) + ", non-decreasing, with at least one block");
  }
  if (o.window == 0) throw SamplerStateError("sampler: the block window must be at least 1");
  const std::uint64_t window = std::min<std::uint64_t>(o.window, b.size() - 1);
  return {
      .n = n,
      .identity_hash = o.identity_hash,
      .kind = SamplerKind::blocks,
      .seed = o.seed,
      .num_draws = n,
      .weights_hash = detail::hash_bytes(b.data(), b.size() * sizeof(std::uint64_t), window) | 1,
      .tail = o.tail};
}

}  // namespace

DistributedBlockSampler::DistributedBlockSampler(std::uint64_t n, const BlockOptions& o)
    : DistributedSampler(block_fingerprint(n, o), o.rank, o.world_size, o.epoch, {}) {
  use_blocks(o.boundaries, std::min<std::uint64_t>(o.window, o.boundaries.size() - 1));
}

}  // namespace brigade::actors
