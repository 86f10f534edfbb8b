#include "actors/mixer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
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
  WeightedMixSampler mix(sources({10'000, 10'000, 10'000}),
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
  WeightedMixSampler mix(sources({5, 7, 0}), {.weights = {1, 1, 5}, .seed = 5, .stop = MixStop::never});
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

TEST(WeightedMix, RejectsBadWeights) {
  EXPECT_THROW(WeightedMixSampler(sources({5}), {.weights = {1, 1}}), SamplerStateError);
  EXPECT_THROW(WeightedMixSampler(sources({5, 5}), {.weights = {0, 0}}), SamplerStateError);
  EXPECT_THROW(WeightedMixSampler({}, {}), SamplerStateError);
}

}  // namespace
}  // namespace brigade::actors
