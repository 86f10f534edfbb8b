#include "actors/mixer.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "actors/detail/permutation.h"

namespace brigade::actors {
namespace {

constexpr std::uint64_t kMixStream = 0x6d6978;  // "mix": a stream apart from the samplers'

double unit_hash(std::uint64_t seed, std::uint64_t draw) {
  std::uint64_t state = seed ^ (draw * 0xd1b54a32d192ed03ULL);
  return static_cast<double>(detail::splitmix64(state) >> 11) * 0x1.0p-53;
}

}  // namespace

WeightedMixSampler::WeightedMixSampler(std::vector<DistributedSampler> sources, MixOptions options)
    : sources_(std::move(sources)), options_(std::move(options)) {
  if (sources_.empty()) throw SamplerStateError("mix: no sources");
  if (options_.weights.size() != sources_.size()) {
    throw SamplerStateError("mix: " + std::to_string(options_.weights.size()) + " weights for " +
                            std::to_string(sources_.size()) + " sources");
  }
  double sum = 0;
  for (double w : options_.weights) {
    if (!std::isfinite(w) || w < 0) throw SamplerStateError("mix: weights must be finite and >= 0");
    sum += w;
  }
  if (!(sum > 0) || !std::isfinite(sum))
    throw SamplerStateError("mix: the weights' sum must be positive");
  set_epoch(options_.epoch);
}

void WeightedMixSampler::set_epoch(std::uint64_t epoch) {
  epoch_ = epoch;
  pick_seed_ = detail::mix_seed(options_.seed, epoch, kMixStream);
  sizes_.clear();
  cumulative_.clear();
  double total = 0;
  for (std::size_t i = 0; i < sources_.size(); ++i) {
    sources_[i].set_epoch(epoch);
    sizes_.push_back(sources_[i].size());
    // first_exhausted may pick an empty source (and end); the others never do.
    const bool pickable = sizes_[i] > 0 || options_.stop == MixStop::first_exhausted;
    total += pickable ? options_.weights[i] : 0.0;
    cumulative_.push_back(total);
  }
  draw_ = 0;
  picks_.assign(sources_.size(), 0);
  skip_.clear();
  skip_index_ = 0;
  ended_ = false;
}

void WeightedMixSampler::restore(const MixState& state) {
  set_epoch(state.epoch);
  while (draw_ < state.committed.watermark && advance()) ++draw_;
  for (auto x : state.committed.above) {
    if (x >= draw_) skip_.push_back(x);
  }
}

std::uint32_t WeightedMixSampler::pick(std::uint64_t draw) const {
  const double x = unit_hash(pick_seed_, draw) * cumulative_.back();
  // A zero-weight entry repeats the previous total, so upper_bound skips it.
  auto i = static_cast<std::size_t>(std::upper_bound(cumulative_.begin(), cumulative_.end(), x) -
                                    cumulative_.begin());
  if (i == cumulative_.size()) {  // x rounded up to the total: the last pickable source
    while (i > 1 && cumulative_[i - 1] == cumulative_[i - 2]) --i;
    --i;
  }
  return static_cast<std::uint32_t>(i);
}

std::optional<std::uint32_t> WeightedMixSampler::advance() {
  if (options_.stop == MixStop::after_count && draw_ >= options_.count) return std::nullopt;
  if (cumulative_.back() <= 0) return std::nullopt;
  const std::uint32_t i = pick(draw_);
  if (picks_[i] >= sizes_[i] && options_.stop == MixStop::first_exhausted) return std::nullopt;
  ++picks_[i];
  return i;
}

std::optional<Positioned<MixedSample>> WeightedMixSampler::next() {
  if (ended_) set_epoch(epoch_ + 1);
  while (auto source = advance()) {
    const std::uint64_t position = draw_++;
    if (skip_index_ < skip_.size() && skip_[skip_index_] == position) {
      ++skip_index_;
      continue;
    }
    const std::uint64_t c = picks_[*source] - 1;  // this source's c-th sample
    auto& s = sources_[*source];
    const std::uint64_t epoch = epoch_ + c / sizes_[*source];
    if (s.epoch() != epoch) s.set_epoch(epoch);
    return Positioned<MixedSample>{position, MixedSample{*source, s.at(c % sizes_[*source])}};
  }
  ended_ = true;
  return std::nullopt;
}

}  // namespace brigade::actors
