#include "actors/mixer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

namespace brigade::actors {
namespace {

std::vector<DistributedSampler> sources(std::vector<std::uint64_t> sizes) {
  std::vector<DistributedSampler> out;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    out.push_back(DistributedRandomSampler(sizes[i], {.seed = 100 + i}));
  }
  return out;
}

std::vector<MixedSample> drain(WeightedMixSampler& mix, std::size_t limit = 1'000'000) {
  std::vector<MixedSample> out;
  while (out.size() < limit) {
    auto d = mix.next();
    if (!d) break;
    EXPECT_EQ(d->position, out.size());
    out.push_back(d->value);
  }
  return out;
}

TEST(WeightedMix, FollowsTheWeights) {
  WeightedMixSampler mix(
      sources({10'000, 10'000, 10'000}),
      {.weights = {1, 2, 1}, .seed = 3, .stop = MixStop::after_count, .count = 8'000});
  const auto out = drain(mix);
  ASSERT_EQ(out.size(), 8'000u);
  std::map<std::uint32_t, double> freq;
  for (const auto& m : out) freq[m.source] += 1.0 / 8'000;
  EXPECT_NEAR(freq[0], 0.25, 0.03);
  EXPECT_NEAR(freq[1], 0.50, 0.03);
  EXPECT_NEAR(freq[2], 0.25, 0.03);
}

TEST(WeightedMix, StopsAtTheFirstExhaustedSource) {
  WeightedMixSampler mix(sources({10, 1'000}), {.weights = {1, 1}, .seed = 4});
  const auto out = drain(mix);
  std::set<std::uint64_t> small;
  for (const auto& m : out) {
    if (m.source == 0) small.insert(m.sample.id);
  }
  EXPECT_EQ(small.size(), 10u);  // all of the small source, each once
  EXPECT_LT(out.size(), 1'010u);
  EXPECT_EQ(mix.epoch(), 0u);
  EXPECT_TRUE(mix.next());  // the next epoch
  EXPECT_EQ(mix.epoch(), 1u);
}

TEST(WeightedMix, NeverStopsAndRestartsExhaustedSources) {
  WeightedMixSampler mix(sources({5, 7, 0}),
                         {.weights = {1, 1, 5}, .seed = 5, .stop = MixStop::never});
  const auto out = drain(mix, 500);
  ASSERT_EQ(out.size(), 500u);
  std::vector<std::uint64_t> firsts;
  for (const auto& m : out) {
    ASSERT_NE(m.source, 2u);  // the empty source is dropped
    if (m.source == 0) firsts.push_back(m.sample.id);
  }
  // Source 0 runs through its epochs: each block of 5 is a permutation of 0 … 4.
  for (std::size_t b = 0; b + 5 <= firsts.size(); b += 5) {
    std::set<std::uint64_t> block(firsts.begin() + b, firsts.begin() + b + 5);
    EXPECT_EQ(block.size(), 5u);
  }
}

TEST(WeightedMix, ReproducibleFromTheSeedAndDifferentPerEpoch) {
  auto run = [](std::uint64_t seed, std::uint64_t epoch) {
    WeightedMixSampler mix(sources({50, 80}), {.weights = {1, 1}, .seed = seed, .epoch = epoch});
    return drain(mix);
  };
  EXPECT_EQ(run(1, 0), run(1, 0));
  EXPECT_NE(run(1, 0), run(2, 0));
  EXPECT_NE(run(1, 0), run(1, 1));
}

TEST(WeightedMix, ResumesExactlyFromACommittedState) {
  std::mt19937_64 rng(11);
  for (int i = 0; i < 250; ++i) {
    std::vector<std::uint64_t> sizes;
    std::vector<double> weights;
    for (std::uint64_t k = 0, m = 1 + rng() % 4; k < m; ++k) {
      sizes.push_back(rng() % 4 == 0 ? 0 : rng() % 60);
      weights.push_back(static_cast<double>(rng() % 4));
    }
    weights[0] += 1;
    const MixOptions options{.weights = weights,
                             .seed = rng(),
                             .stop = static_cast<MixStop>(rng() % 3),
                             .count = rng() % 150,
                             .epoch = rng() % 3};
    SCOPED_TRACE("case " + std::to_string(i));
    WeightedMixSampler mix(sources(sizes), options);
    const auto full = drain(mix, 400);
    CommitState commit;
    const std::uint64_t pulled = full.empty() ? 0 : rng() % (full.size() + 1);
    commit.watermark = pulled == 0 ? 0 : rng() % (pulled + 1);
    for (std::uint64_t p = commit.watermark + 1; p < pulled; ++p) {
      if (rng() % 2) commit.above.push_back(p);
    }
    WeightedMixSampler resumed(sources(sizes), options);
    resumed.set_epoch(options.epoch + 2);
    resumed.restore(mix.state(commit));
    std::vector<Positioned<MixedSample>> got;
    while (got.size() < 400) {
      auto d = resumed.next();
      if (!d || d->position >= full.size()) break;
      got.push_back(*d);
    }
    std::size_t j = 0;
    for (std::uint64_t p = 0; p < full.size(); ++p) {
      if (commit.committed(p)) continue;
      ASSERT_LT(j, got.size());
      ASSERT_EQ(got[j].position, p);
      ASSERT_EQ(got[j].value, full[p]);
      ++j;
    }
    ASSERT_EQ(j, got.size());
  }
}

TEST(WeightedMix, RejectsBadWeights) {
  EXPECT_THROW(WeightedMixSampler(sources({5}), {.weights = {1, 1}}), SamplerStateError);
  EXPECT_THROW(WeightedMixSampler(sources({5, 5}), {.weights = {0, 0}}), SamplerStateError);
  EXPECT_THROW(WeightedMixSampler({}, {}), SamplerStateError);
}

}  // namespace
}  // namespace brigade::actors
