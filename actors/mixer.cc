#include "actors/mixer.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "actors/detail/permutation.h"
#include "actors/detail/runs.h"

namespace brigade::actors {
namespace {

constexpr std::uint64_t kMixStream = 0x6d6978;  // "mix": a stream apart from the samplers'

double unit_hash(std::uint64_t seed, std::uint64_t draw) {
  std::uint64_t state = seed ^ (draw * 0xd1b54a32d192ed03ULL);
  return static_cast<double>(detail::splitmix64(state) >> 11) * 0x1.0p-53;
}

std::uint64_t pick_seed(const MixFingerprint& f, std::uint64_t epoch) {
  return detail::mix_seed(f.seed, epoch, kMixStream);
}

// The source that draw `draw` picks among the cumulative weights (total > 0).
std::uint32_t pick(std::uint64_t seed, std::uint64_t draw, const std::vector<double>& cumulative) {
  const double x = unit_hash(seed, draw) * cumulative.back();
  // A zero-weight entry repeats the previous total, so upper_bound skips it.
  auto i = static_cast<std::size_t>(std::upper_bound(cumulative.begin(), cumulative.end(), x) -
                                    cumulative.begin());
  if (i == cumulative.size()) {  // x rounded up to the total: the last pickable source
    while (i > 1 && cumulative[i - 1] == cumulative[i - 2]) --i;
    --i;
  }
  return static_cast<std::uint32_t>(i);
}

// Rank r's share of one epoch of a source at world size W (the fresh partition).
std::uint64_t share_at(const DatasetFingerprint& f, std::uint32_t rank, std::uint32_t world) {
  const std::uint64_t length = epoch_length(f.num_draws, f.tail, world);
  return rank < length ? (length - rank + world - 1) / world : 0;
}

// Rank r of W's shard sizes and the cumulative weights of the sources it may pick.
std::pair<std::vector<std::uint64_t>, std::vector<double>> rank_draws(const MixFingerprint& f,
                                                                      std::uint32_t rank,
                                                                      std::uint32_t world) {
  std::vector<std::uint64_t> sizes;
  std::vector<double> cumulative;
  double total = 0;
  for (std::size_t i = 0; i < f.sources.size(); ++i) {
    sizes.push_back(share_at(f.sources[i], rank, world));
    // first_exhausted may pick an empty source (and end); the others never do.
    const bool pickable = sizes.back() > 0 || f.stop == MixStop::first_exhausted;
    total += pickable ? f.weights[i] : 0.0;
    cumulative.push_back(total);
  }
  return {std::move(sizes), std::move(cumulative)};
}

// How many draws rank r of W makes in `epoch`; std::nullopt under `never`.
std::optional<std::uint64_t> rank_epoch_length(const MixFingerprint& f, std::uint64_t epoch,
                                               std::uint32_t rank, std::uint32_t world) {
  const auto [sizes, cumulative] = rank_draws(f, rank, world);
  if (f.stop == MixStop::never) return std::nullopt;
  if (cumulative.back() <= 0) return 0;
  if (f.stop == MixStop::after_count || f.stop == MixStop::total_count)
    return rank_draw_count(f.stop, f.count, world);
  const std::uint64_t seed = pick_seed(f, epoch);
  std::vector<std::uint64_t> picks(sizes.size(), 0);
  for (std::uint64_t k = 0;; ++k) {
    const std::uint32_t i = pick(seed, k, cumulative);
    if (picks[i] >= sizes[i]) return k;
    ++picks[i];
  }
}

void check_weights(const std::vector<double>& weights, std::size_t sources) {
  if (weights.size() != sources) {
    throw SamplerStateError("mix: " + std::to_string(weights.size()) + " weights for " +
                            std::to_string(sources) + " sources");
  }
  double sum = 0;
  for (double w : weights) {
    if (!std::isfinite(w) || w < 0) throw SamplerStateError("mix: weights must be finite and >= 0");
    sum += w;
  }
  if (!(sum > 0) || !std::isfinite(sum))
    throw SamplerStateError("mix: the weights' sum must be positive");
}

}  // namespace

const char* to_string(MixStop stop) {
  switch (stop) {
    case MixStop::first_exhausted:
      return "first_exhausted";
    case MixStop::after_count:
      return "after_count";
    case MixStop::never:
      return "never";
    case MixStop::total_count:
      return "total_count";
  }
  return "unknown";
}

std::uint64_t rank_draw_count(MixStop stop, std::uint64_t count, std::uint32_t world_size) {
  if (stop != MixStop::total_count) return count;
  const std::uint64_t w = std::max<std::uint32_t>(world_size, 1);
  return count / w + (count % w != 0);
}

std::string describe_conflict(const MixFingerprint& saved, const MixFingerprint& caller) {
  auto num = [](const std::string& name, auto a, auto b) {
    return name + ": checkpoint has " + std::to_string(a) + ", caller has " + std::to_string(b);
  };
  if (saved.sources.size() != caller.sources.size())
    return num("mix sources", saved.sources.size(), caller.sources.size());
  for (std::size_t i = 0; i < saved.sources.size(); ++i) {
    if (auto c = describe_conflict(saved.sources[i], caller.sources[i]); !c.empty())
      return "mix source " + std::to_string(i) + ": " + c;
  }
  for (std::size_t i = 0; i < saved.weights.size() && i < caller.weights.size(); ++i) {
    if (saved.weights[i] != caller.weights[i])
      return num("mix weight " + std::to_string(i), saved.weights[i], caller.weights[i]);
  }
  if (saved.weights.size() != caller.weights.size())
    return num("mix weights", saved.weights.size(), caller.weights.size());
  if (saved.seed != caller.seed) return num("mix seed", saved.seed, caller.seed);
  if (saved.stop != caller.stop) {
    return std::string("mix stop: checkpoint has ") + to_string(saved.stop) + ", caller has " +
           to_string(caller.stop);
  }
  if (saved.count != caller.count) return num("mix count", saved.count, caller.count);
  return {};
}

void validate(const MixState& s) {
  auto fail = [&](const std::string& what) {
    throw SamplerStateError("mix state of rank " + std::to_string(s.rank) + " of " +
                            std::to_string(s.world_size) + ": " + what);
  };
  if (s.world_size == 0) fail("world_size is 0");
  if (s.rank >= s.world_size) fail("rank is not below world_size");
  if (s.fingerprint.sources.empty()) fail("no sources");
  try {
    check_weights(s.fingerprint.weights, s.fingerprint.sources.size());
  } catch (const SamplerStateError& e) {
    fail(e.what());
  }
  if (s.epoch_world_size == 0) fail("epoch_world_size is 0");
  if (s.own_sequence && (s.epoch_world_size != s.world_size || !s.owned.empty()))
    fail("an own sequence with owned positions or of another world size");
  const auto check = [&](const std::vector<PositionRun>& runs) {
    for (const auto& r : runs) {
      if (r.count > 1 && r.stride == 0) fail("an owned run has stride 0");
      if (r.count > 0 && (r.count - 1) > (~0ULL - r.start) / std::max<std::uint64_t>(r.stride, 1))
        fail("an owned run overflows");
    }
  };
  check(s.owned);
  for (const auto& p : s.planned) {
    if (p.epoch_world_size == 0) fail("a planned epoch has epoch_world_size 0");
    check(p.owned);
  }
  const auto& above = s.committed.above;
  for (std::size_t i = 1; i < above.size(); ++i) {
    if (above[i] <= above[i - 1]) fail("committed positions are not sorted and unique");
  }
}

MixState repartition(std::span<const MixState> ranks, std::uint32_t new_rank,
                     std::uint32_t new_world_size) {
  if (new_world_size == 0 || new_rank >= new_world_size) {
    throw SamplerStateError("repartition: rank " + std::to_string(new_rank) +
                            " is not below world size " + std::to_string(new_world_size));
  }
  if (ranks.empty()) throw SamplerStateError("repartition: no mix states");
  const MixState& first = ranks.front();
  const std::uint32_t world = first.world_size;
  if (ranks.size() != world) {
    throw SamplerStateError("repartition: " + std::to_string(ranks.size()) +
                            " mix states for world size " + std::to_string(world));
  }
  if (first.fingerprint.stop == MixStop::never) {
    throw SamplerStateError(
        "repartition: a mix with stop policy 'never' has no end to divide among other ranks; "
        "resume it at its saved world size " +
        std::to_string(world));
  }
  std::vector<const MixState*> states(world, nullptr);
  for (const auto& s : ranks) {
    validate(s);
    auto mismatch = [&](const std::string& what) {
      throw SamplerStateError("repartition: mix rank " + std::to_string(s.rank) +
                              " differs from rank " + std::to_string(first.rank) + " in " + what);
    };
    if (s.world_size != world) mismatch("world_size");
    if (s.generation != first.generation) mismatch("generation");
    if (auto c = describe_conflict(first.fingerprint, s.fingerprint); !c.empty()) mismatch(c);
    if (states[s.rank])
      throw SamplerStateError("repartition: rank " + std::to_string(s.rank) + " appears twice");
    states[s.rank] = &s;
  }
  const MixFingerprint& f = first.fingerprint;
  // Rank r's whole draw sequence of `epoch` at W, as mix positions r, r + W, …. Ranks
  // with the same shard sizes draw alike: their lengths are computed once.
  std::map<std::pair<std::uint64_t, std::vector<std::uint64_t>>, std::uint64_t> lengths;
  const auto own_runs = [&](std::uint64_t epoch, std::uint32_t rank, std::uint32_t w) {
    auto key = std::make_pair(epoch, rank_draws(f, rank, w).first);
    auto it = lengths.find(key);
    if (it == lengths.end())
      it = lengths.emplace(std::move(key), *rank_epoch_length(f, epoch, rank, w)).first;
    std::vector<PositionRun> runs;
    detail::push_run(runs, {rank, w, it->second});
    return runs;
  };
  std::vector<detail::RankWork> work;
  for (const auto* s : states) {
    const auto owned = s->own_sequence ? own_runs(s->epoch, s->rank, world) : s->owned;
    detail::RankWork w{s->epoch, {{s->epoch_world_size, detail::uncommitted(owned, s->committed)}}};
    for (const auto& p : s->planned) w.parts.push_back({p.epoch_world_size, p.owned});
    work.push_back(std::move(w));
  }
  const auto fresh = [&](std::uint64_t epoch, std::uint32_t rank) {
    return detail::EpochWork{world, own_runs(epoch, rank, world)};
  };
  auto plan =
      detail::repartition_work(work, fresh, new_rank, new_world_size, "starting world size");
  MixState out;
  out.generation = first.generation;
  out.fingerprint = f;
  out.epoch = plan.epoch;
  out.epoch_world_size = static_cast<std::uint32_t>(plan.parts.front().descriptor);
  out.world_size = new_world_size;
  out.rank = new_rank;
  out.own_sequence = false;
  out.owned = std::move(plan.parts.front().positions);
  for (std::size_t i = 1; i < plan.parts.size(); ++i) {
    out.planned.push_back({0, static_cast<std::uint32_t>(plan.parts[i].descriptor),
                           std::move(plan.parts[i].positions)});
  }
  return out;
}

WeightedMixSampler::PickCounter::PickCounter(std::uint64_t seed, std::vector<double> cumulative)
    : seed_(seed), cumulative_(std::move(cumulative)), counts_(cumulative_.size(), 0) {}

std::pair<std::uint32_t, std::uint64_t> WeightedMixSampler::PickCounter::at(std::uint64_t k) {
  if (k < k_) {  // back to the last snapshot at or before k
    const std::uint64_t s = k / kSnapshot;
    counts_ = snapshots_[s];
    k_ = s * kSnapshot;
  }
  while (k_ < k) {
    if (k_ % kSnapshot == 0 && snapshots_.size() == k_ / kSnapshot) snapshots_.push_back(counts_);
    ++counts_[pick(seed_, k_, cumulative_)];
    ++k_;
  }
  const std::uint32_t i = pick(seed_, k, cumulative_);
  return {i, counts_[i]};
}

WeightedMixSampler::WeightedMixSampler(std::vector<DistributedSampler> sources, MixOptions options)
    : sources_(std::move(sources)), options_(std::move(options)) {
  if (sources_.empty()) throw SamplerStateError("mix: no sources");
  check_weights(options_.weights, sources_.size());
  rank_ = sources_.front().rank();
  world_size_ = sources_.front().world_size();
  for (const auto& s : sources_) {
    if (s.rank() != rank_ || s.world_size() != world_size_) {
      throw SamplerStateError("mix: the sources are of different ranks or world sizes (rank " +
                              std::to_string(s.rank()) + " of " + std::to_string(s.world_size()) +
                              " and rank " + std::to_string(rank_) + " of " +
                              std::to_string(world_size_) + ")");
    }
    fingerprint_.sources.push_back(s.fingerprint());
  }
  fingerprint_.weights = options_.weights;
  fingerprint_.seed = options_.seed;
  fingerprint_.stop = options_.stop;
  fingerprint_.count = options_.count;
  set_epoch(options_.epoch);
}

void WeightedMixSampler::set_epoch(std::uint64_t epoch) {
  if (epoch >= plan_first_ && epoch - plan_first_ < plan_.size()) {
    const PlannedEpoch& p = plan_[epoch - plan_first_];
    start(epoch, p.epoch_world_size, false, p.owned, {});
    return;
  }
  plan_.clear();  // past the plan (or away from it): every later epoch starts fresh
  start(epoch, world_size_, true, {}, {});
}

void WeightedMixSampler::restore(const MixState& state) {
  validate(state);
  if (auto c = describe_conflict(state.fingerprint, fingerprint_); !c.empty())
    throw SamplerStateError("restore: " + c);
  if (state.world_size != world_size_ || state.rank != rank_) {
    throw SamplerStateError("restore: the mix state is for rank " + std::to_string(state.rank) +
                            " of " + std::to_string(state.world_size) + ", this mix is rank " +
                            std::to_string(rank_) + " of " + std::to_string(world_size_));
  }
  plan_ = state.planned;
  plan_first_ = state.epoch + 1;
  start(state.epoch, state.epoch_world_size, state.own_sequence, state.owned, state.committed);
}

MixState WeightedMixSampler::state(const CommitState& committed, std::uint64_t generation) const {
  MixState s;
  s.generation = generation;
  s.fingerprint = fingerprint_;
  s.epoch = epoch_;
  s.epoch_world_size = epoch_world_size_;
  s.world_size = world_size_;
  s.rank = rank_;
  s.own_sequence = own_sequence_;
  if (!own_sequence_) s.owned = owned_;
  s.committed = committed;
  for (std::uint64_t e = epoch_ + 1; e >= plan_first_ && e - plan_first_ < plan_.size(); ++e)
    s.planned.push_back(plan_[e - plan_first_]);
  return s;
}

void WeightedMixSampler::start(std::uint64_t epoch, std::uint32_t epoch_world_size,
                               bool own_sequence, const std::vector<PositionRun>& owned,
                               const CommitState& committed) {
  epoch_ = epoch;
  epoch_world_size_ = epoch_world_size;
  pick_seed_ = pick_seed(fingerprint_, epoch);
  own_sequence_ = own_sequence;
  skip_.clear();
  skip_index_ = 0;
  ended_ = false;
  counters_.clear();
  old_ranks_.clear();
  owned_.clear();
  if (own_sequence) {
    auto [sizes, cumulative] = rank_draws(fingerprint_, rank_, world_size_);
    own_ = {std::move(sizes), std::move(cumulative)};
    draw_ = 0;
    picks_.assign(sources_.size(), 0);
    while (draw_ < committed.watermark && advance()) ++draw_;
    for (auto x : committed.above) {
      if (x >= draw_) skip_.push_back(x);
    }
    return;
  }
  for (const auto& r : owned) detail::push_run(owned_, r);
  share_ = detail::count_of(owned_);
  // Position the cursor at the watermark.
  local_ = std::min(committed.watermark, share_);
  run_ = 0;
  offset_ = local_;
  while (run_ < owned_.size() && offset_ >= owned_[run_].count) offset_ -= owned_[run_++].count;
  for (auto x : committed.above) {
    if (x >= local_ && x < share_) skip_.push_back(x);
  }
}

std::optional<std::uint32_t> WeightedMixSampler::advance() {
  const bool counted =
      options_.stop == MixStop::after_count || options_.stop == MixStop::total_count;
  if (counted && draw_ >= rank_draw_count(options_.stop, options_.count, world_size_))
    return std::nullopt;
  if (own_.cumulative.back() <= 0) return std::nullopt;
  const std::uint32_t i = pick(pick_seed_, draw_, own_.cumulative);
  if (picks_[i] >= own_.sizes[i] && options_.stop == MixStop::first_exhausted) return std::nullopt;
  ++picks_[i];
  return i;
}

SampleId WeightedMixSampler::sample(std::uint32_t old_rank, std::uint32_t source, std::uint64_t c,
                                    std::uint64_t size) {
  auto& s = sources_[source];
  const std::uint64_t epoch = epoch_ + c / size;
  if (s.epoch() != epoch) s.set_epoch(epoch);
  return s.at_global(old_rank + (c % size) * epoch_world_size_);
}

std::optional<Positioned<MixedSample>> WeightedMixSampler::next_owned() {
  while (local_ < share_) {
    const std::uint64_t position = local_++;
    const PositionRun& r = owned_[run_];
    const std::uint64_t g = r.start + offset_ * r.stride;
    if (++offset_ == r.count) {
      ++run_;
      offset_ = 0;
    }
    if (skip_index_ < skip_.size() && skip_[skip_index_] == position) {
      ++skip_index_;
      continue;
    }
    const auto old_rank = static_cast<std::uint32_t>(g % epoch_world_size_);
    const std::uint64_t k = g / epoch_world_size_;
    auto known = old_ranks_.find(old_rank);
    if (known == old_ranks_.end()) {
      auto [sizes, cumulative] = rank_draws(fingerprint_, old_rank, epoch_world_size_);
      known =
          old_ranks_.emplace(old_rank, RankDraws{std::move(sizes), std::move(cumulative)}).first;
    }
    const RankDraws& d = known->second;
    const bool counted =
        options_.stop == MixStop::after_count || options_.stop == MixStop::total_count;
    const bool past_count =
        counted && k >= rank_draw_count(options_.stop, options_.count, epoch_world_size_);
    if (past_count || d.cumulative.back() <= 0) {
      throw SamplerStateError("mix: position " + std::to_string(g) + " is past the epoch of rank " +
                              std::to_string(old_rank));
    }
    auto it = counters_.find(d.cumulative);
    if (it == counters_.end())
      it = counters_.emplace(d.cumulative, PickCounter(pick_seed_, d.cumulative)).first;
    const auto [source, c] = it->second.at(k);
    if (c >= d.sizes[source] && options_.stop == MixStop::first_exhausted) {  // the end
      throw SamplerStateError("mix: position " + std::to_string(g) + " is past the epoch of rank " +
                              std::to_string(old_rank));
    }
    return Positioned<MixedSample>{
        position, MixedSample{source, sample(old_rank, source, c, d.sizes[source])}};
  }
  ended_ = true;
  return std::nullopt;
}

std::optional<Positioned<MixedSample>> WeightedMixSampler::next() {
  if (ended_) set_epoch(epoch_ + 1);
  if (!own_sequence_) return next_owned();
  while (auto source = advance()) {
    const std::uint64_t position = draw_++;
    if (skip_index_ < skip_.size() && skip_[skip_index_] == position) {
      ++skip_index_;
      continue;
    }
    const std::uint64_t c = picks_[*source] - 1;  // this source's c-th sample
    return Positioned<MixedSample>{
        position, MixedSample{*source, sample(rank_, *source, c, own_.sizes[*source])}};
  }
  ended_ = true;
  return std::nullopt;
}

}  // namespace brigade::actors
