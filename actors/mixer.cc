#include "actors/mixer.h"

#include <cmath>
#include <numeric>
#include <string>

namespace brigade::actors {
namespace {

constexpr std::uint64_t kMixStream = 0x6d6978;  // "mix": a stream apart from the samplers'

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
  if (!(sum > 0) || !std::isfinite(sum)) throw SamplerStateError("mix: the weights' sum must be positive");
  set_epoch(options_.epoch);
}

void WeightedMixSampler::set_epoch(std::uint64_t epoch) {
  epoch_ = epoch;
  for (auto& s : sources_) s.set_epoch(epoch);
  active_ = options_.weights;
  rng_ = detail::Xoshiro256(detail::mix_seed(options_.seed, epoch, kMixStream));
  drawn_ = 0;
  ended_ = false;
}

std::uint32_t WeightedMixSampler::choose() {
  const double total = std::accumulate(active_.begin(), active_.end(), 0.0);
  double x = rng_.unit() * total;
  std::uint32_t last = 0;
  for (std::uint32_t i = 0; i < active_.size(); ++i) {
    if (active_[i] <= 0) continue;
    last = i;
    if (x < active_[i]) return i;
    x -= active_[i];
  }
  return last;  // rounding at the top end
}

std::optional<Positioned<MixedSample>> WeightedMixSampler::next() {
  if (ended_) set_epoch(epoch_ + 1);
  const bool counted = options_.stop == MixStop::after_count;
  while (!(counted && drawn_ >= options_.count)) {
    if (std::accumulate(active_.begin(), active_.end(), 0.0) <= 0) break;
    const std::uint32_t i = choose();
    auto sample = sources_[i].next();
    if (!sample && options_.stop == MixStop::first_exhausted) break;
    if (!sample) sample = sources_[i].next();  // the source's next epoch
    if (!sample) {
      active_[i] = 0;  // yields nothing at all
      continue;
    }
    return Positioned<MixedSample>{drawn_++, MixedSample{i, sample->value}};
  }
  ended_ = true;
  return std::nullopt;
}

}  // namespace brigade::actors
