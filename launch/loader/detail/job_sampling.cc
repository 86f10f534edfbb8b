#include "launch/loader/detail/job_sampling.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <string>

#include "launch/loader/object_reads.h"
#include "launch/loader/shards.h"

namespace brigade::launch::detail {
namespace {

// Source s's seed: the job's seed and the index, so that two sources of equal size are
// not shuffled alike.
std::uint64_t source_seed(std::uint64_t seed, std::size_t s) {
  std::uint64_t x = seed + 0x9e3779b97f4a7c15ULL * (s + 1);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Source `src`'s containers as id ranges of its own (actors::BlockOptions::boundaries).
std::vector<std::uint64_t> source_boundaries(const Dataset& d, const DatasetSource& src) {
  std::vector<std::uint64_t> b(src.containers + 1, 0);
  for (std::uint64_t i = 0; i < src.size; ++i)
    b[d.container_of(src.offset + i) - src.first_container + 1] = i + 1;
  for (std::size_t c = 1; c < b.size(); ++c) b[c] = std::max(b[c], b[c - 1]);
  return b;
}

actors::DistributedSampler source_sampler(const RunConfig& c, const Dataset& d, std::size_t s) {
  const DatasetSource& src = d.sources()[s];
  const auto tail = actors::TailPolicy::pad;  // equal shares on every rank
  if (c.shuffle && c.shuffle_window > 0 && src.containers > 0) {
    return actors::DistributedBlockSampler(src.size, {.rank = *c.rank,
                                                      .world_size = *c.world_size,
                                                      .seed = source_seed(c.seed, s),
                                                      .boundaries = source_boundaries(d, src),
                                                      .window = c.shuffle_window,
                                                      .tail = tail,
                                                      .identity_hash = src.identity_hash});
  }
  if (c.shuffle) {
    return actors::DistributedRandomSampler(src.size, {.rank = *c.rank,
                                                       .world_size = *c.world_size,
                                                       .seed = source_seed(c.seed, s),
                                                       .tail = tail,
                                                       .identity_hash = src.identity_hash});
  }
  return actors::DistributedDeterministicSampler(src.size, {.rank = *c.rank,
                                                            .world_size = *c.world_size,
                                                            .tail = tail,
                                                            .identity_hash = src.identity_hash});
}

// Committed positions of [0, share).
std::uint64_t committed_count(const actors::CommitState& c, std::uint64_t share) {
  const std::uint64_t below = std::min(c.watermark, share);
  return below + static_cast<std::uint64_t>(
                     std::count_if(c.above.begin(), c.above.end(),
                                   [&](std::uint64_t x) { return x >= c.watermark && x < share; }));
}

std::uint64_t count_of(const std::vector<actors::PositionRun>& runs) {
  std::uint64_t n = 0;
  for (const auto& r : runs) n += r.count;
  return n;
}

}  // namespace

JobSampling::JobSampling(const RunConfig& c, const Dataset& d) {
  if (d.sources().empty()) {
    sampler_ = make_sampler(c, d);
    const bool streamed = !c.shuffle || c.shuffle_window > 0;
    if (streamed && !d.containers().empty() && is_object_url(d.containers().front())) {
      dataset_ = &d;
      window_ = c.shuffle ? c.shuffle_window : 0;
    }
    return;
  }
  std::vector<actors::DistributedSampler> sources;
  std::vector<double> weights;
  for (std::size_t s = 0; s < d.sources().size(); ++s) {
    sources.push_back(source_sampler(c, d, s));
    weights.push_back(s < c.sources.size() ? c.sources[s].weight : 1.0);
    offsets_.push_back(d.sources()[s].offset);
  }
  epoch_draws_ = c.epoch_samples > 0 ? c.epoch_samples : d.size();
  try {
    mix_ = std::make_unique<actors::WeightedMixSampler>(
        std::move(sources), actors::MixOptions{.weights = std::move(weights),
                                               .seed = c.seed,
                                               .stop = actors::MixStop::total_count,
                                               .count = epoch_draws_});
  } catch (const actors::SamplerStateError& e) {
    throw ConfigError(fmt::format("sources: {}", e.what()), "sources");
  }
}

void JobSampling::look_ahead(std::uint64_t position) {
  if (!planned_ || sampler_->epoch() != planned_epoch_) {
    planned_ = true;
    planned_epoch_ = sampler_->epoch();
    clear_object_prefetches();
    ahead_.clear();
    ahead_next_ = 0;
    const auto containers = dataset_->containers().size();
    std::vector<bool> seen(containers);
    const auto share = sampler_->size();
    // A rank of several reads part of each shard: its members, per container.
    const bool part = sampler_->world_size() > 1;
    std::vector<std::vector<std::uint64_t>> wanted(part ? containers : 0);
    for (std::uint64_t p = 0; p < share; ++p) {
      const auto id = sampler_->at(p).id;
      const auto c = dataset_->container_of(id);
      if (part) wanted[c].push_back(dataset_->location(id).offset);
      if (seen[c]) continue;
      seen[c] = true;
      ahead_.emplace_back(p, c);
    }
    for (std::size_t c = 0; c < wanted.size(); ++c)
      want_object_members(dataset_->containers()[c], wanted[c]);
    // Two windows (two shards in order): a window's round trips overlap the one before
    // it and half of the one before that, also when a rank's share of a window is read
    // in less than a round trip (several ranks).
    const auto ahead = 2 * std::max<std::uint64_t>(window_, 1);
    distance_ = (share * std::min<std::uint64_t>(ahead, containers) + containers - 1) /
                std::max<std::uint64_t>(containers, 1);
  }
  while (ahead_next_ < ahead_.size() && ahead_[ahead_next_].first <= position + distance_) {
    prefetch_object_stream(dataset_->containers()[ahead_[ahead_next_].second]);
    ++ahead_next_;
  }
}

std::optional<actors::Positioned<actors::SampleId>> JobSampling::next() {
  if (!mix_) {
    auto s = sampler_->next();
    if (s && dataset_) look_ahead(s->position);
    return s;
  }
  auto m = mix_->next();
  if (!m) return std::nullopt;
  return actors::Positioned<actors::SampleId>{
      m->position, {offsets_[m->value.source] + m->value.sample.id, m->value.sample.is_padding}};
}

void JobSampling::set_epoch(std::uint64_t epoch) {
  planned_ = false;
  if (mix_) {
    mix_->set_epoch(epoch);
  } else {
    sampler_->set_epoch(epoch);
  }
}

std::uint64_t JobSampling::size_of(std::uint64_t epoch) const {
  if (!mix_) return sampler_->size_of(epoch);
  const auto s = mix_->state({});
  const auto fresh =
      actors::rank_draw_count(actors::MixStop::total_count, epoch_draws_, mix_->world_size());
  if (epoch == s.epoch) return s.own_sequence ? fresh : count_of(s.owned);
  if (epoch > s.epoch && epoch - s.epoch <= s.planned.size())
    return count_of(s.planned[epoch - s.epoch - 1].owned);
  return fresh;
}

std::uint64_t JobSampling::remaining(const JobState& state) const {
  if (const auto* s = std::get_if<actors::SamplerState>(&state)) return s->remaining();
  const auto& m = std::get<actors::MixState>(state);
  const std::uint64_t share =
      m.own_sequence
          ? actors::rank_draw_count(m.fingerprint.stop, m.fingerprint.count, m.epoch_world_size)
          : count_of(m.owned);
  return share - committed_count(m.committed, share);
}

JobState JobSampling::state(const actors::CommitState& committed, std::uint64_t generation) const {
  if (mix_) return mix_->state(committed, generation);
  return sampler_->state(committed, generation);
}

void JobSampling::restore(const JobState& state) {
  if (mix_) {
    const auto* m = std::get_if<actors::MixState>(&state);
    if (!m) {
      throw actors::SamplerStateError(
          "the checkpoint is of a single dataset's sampler; this job mixes [[sources]]");
    }
    mix_->restore(*m);
    return;
  }
  const auto* s = std::get_if<actors::SamplerState>(&state);
  if (!s) {
    throw actors::SamplerStateError(
        "the checkpoint is of a mix of [[sources]]; this job reads a single dataset");
  }
  planned_ = false;
  sampler_->restore(*s);
}

JobResume JobSampling::load(const std::filesystem::path& dir, std::uint32_t rank,
                            std::uint32_t world_size) const {
  if (mix_)
    return transport::load_mix_checkpoint(dir, rank, world_size, {.expected = mix_->fingerprint()});
  return transport::load_checkpoint(dir, rank, world_size, {.expected = sampler_->fingerprint()});
}

transport::RunId JobSampling::fresh_run(std::uint32_t world_size, std::string_view launch) const {
  if (mix_) return transport::fresh_run(mix_->fingerprint(), world_size, launch);
  return transport::fresh_run(sampler_->fingerprint(), world_size, launch);
}

}  // namespace brigade::launch::detail
