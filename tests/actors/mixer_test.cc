#include "actors/mixer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "tests/actors/resume_chain.h"

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

// A random mix of 1-3 sources for rank r of W (stop first_exhausted, after_count or
// total_count; never when allowed).
struct MixCase {
  std::vector<std::uint64_t> sizes;
  std::vector<bool> random;
  std::vector<TailPolicy> tails;
  MixOptions options;

  WeightedMixSampler make(std::uint32_t rank, std::uint32_t world) const {
    std::vector<DistributedSampler> out;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      if (random[i]) {
        out.push_back(DistributedRandomSampler(
            sizes[i], {.rank = rank, .world_size = world, .seed = 50 + i, .tail = tails[i]}));
      } else {
        out.push_back(DistributedDeterministicSampler(
            sizes[i], {.rank = rank, .world_size = world, .tail = tails[i]}));
      }
    }
    return WeightedMixSampler(std::move(out), options);
  }
};

MixCase random_mix(std::mt19937_64& rng, bool may_never) {
  MixCase c;
  for (std::uint64_t k = 0, m = 1 + rng() % 3; k < m; ++k) {
    c.sizes.push_back(rng() % 5 == 0 ? rng() % 3 : rng() % 30);
    c.random.push_back(rng() % 3 != 0);
    c.tails.push_back(static_cast<TailPolicy>(rng() % 3));
    c.options.weights.push_back(static_cast<double>(rng() % 4));
  }
  c.options.weights[0] += 1;
  c.options.seed = rng();
  constexpr MixStop kStops[] = {MixStop::first_exhausted, MixStop::after_count,
                                MixStop::total_count, MixStop::never};
  c.options.stop = kStops[rng() % (may_never ? 4 : 3)];
  c.options.count = rng() % 50;
  c.options.epoch = rng() % 3;
  return c;
}

std::string describe(const MixCase& c) {
  std::string out = "sizes";
  for (auto s : c.sizes) out += " " + std::to_string(s);
  return out + " stop " + to_string(c.options.stop) + " count " + std::to_string(c.options.count);
}

// As for the samplers: 2 → 2, 2 → 3, 4 → 3 → 5 and random chains over three epochs,
// ranks stopping at, just past or anywhere around their epochs' ends; every epoch's
// draws of all ranks (of the world size it started at) are delivered exactly once.
TEST(WeightedMix, StraddlingChainsDeliverEveryEpochExactlyOnce) {
  std::mt19937_64 rng(4321);
  const std::vector<std::vector<std::uint32_t>> fixed = {{2, 2}, {2, 3}, {4, 3, 5}};
  for (int i = 0; i < 240; ++i) {
    MixCase c = random_mix(rng, false);
    std::vector<std::uint32_t> worlds;
    if (i < 120) {
      worlds = fixed[i % 3];
      constexpr MixStop kCounted[] = {MixStop::first_exhausted, MixStop::after_count,
                                      MixStop::total_count};
      c.options.stop = kCounted[i / 3 % 3];
    } else {
      for (std::size_t k = 0, m = 2 + rng() % 3; k < m; ++k)
        worlds.push_back(1 + static_cast<std::uint32_t>(rng() % 5));
    }
    std::string chain;
    for (auto w : worlds) chain += " " + std::to_string(w);
    SCOPED_TRACE("case " + std::to_string(i) + ": " + describe(c) + ", worlds" + chain);
    testing::ResumeChain<WeightedMixSampler, MixState> job(
        [&](std::uint32_t r, std::uint32_t w) { return c.make(r, w); },
        [](const std::vector<MixState>& saved, std::uint32_t w) {
          if (saved.size() == w) return saved;
          std::vector<MixState> out;
          for (std::uint32_t r = 0; r < w; ++r) out.push_back(repartition(saved, r, w));
          return out;
        },
        c.options.epoch, 3);
    job.run(worlds, rng);
    if (HasFatalFailure()) return;
  }
}

// total_count: N draws in all per epoch, ceil(N / W) on every rank, so ranks deliver
// equal counts; a 2 → 3 re-partition mid-epoch delivers the rest exactly once.
TEST(WeightedMix, TotalCountGivesEveryRankCeilOfTheTotal) {
  MixCase c;
  c.sizes = {20, 7};
  c.random = {true, true};
  c.tails = {TailPolicy::none, TailPolicy::none};
  c.options = {.weights = {1, 3}, .seed = 4, .stop = MixStop::total_count, .count = 27};
  for (std::uint32_t r = 0; r < 2; ++r) {
    auto mix = c.make(r, 2);
    std::uint64_t n = 0;
    while (mix.next()) ++n;
    EXPECT_EQ(n, 14u);  // ceil(27 / 2)
  }
  for (std::uint32_t r = 0; r < 3; ++r) {
    auto mix = c.make(r, 3);
    std::uint64_t n = 0;
    while (mix.next()) ++n;
    EXPECT_EQ(n, 9u);  // 27 / 3
  }
  EXPECT_EQ(rank_draw_count(MixStop::total_count, 27, 4), 7u);
  EXPECT_EQ(rank_draw_count(MixStop::after_count, 27, 4), 27u);
  // Mid-epoch at W = 2 (rank 0 delivered 5, rank 1 delivered 8), resumed at W = 3:
  // every remaining draw once, the shares differ by at most one.
  std::vector<MixState> saved;
  std::multiset<std::pair<std::uint32_t, std::uint64_t>> all, delivered;
  for (std::uint32_t r = 0; r < 2; ++r) {
    auto mix = c.make(r, 2);
    std::uint64_t k = 0;
    while (auto m = mix.next()) {
      all.insert({m->value.source, m->value.sample.id});
      if (k++ < 5 + 3 * r) delivered.insert({m->value.source, m->value.sample.id});
    }
    saved.push_back(c.make(r, 2).state({.watermark = 5 + 3 * r}, 1));
  }
  std::vector<std::uint64_t> shares;
  for (std::uint32_t r = 0; r < 3; ++r) {
    auto mix = c.make(r, 3);
    mix.restore(repartition(saved, r, 3));
    std::uint64_t n = 0;
    while (auto m = mix.next()) {
      delivered.insert({m->value.source, m->value.sample.id});
      ++n;
    }
    shares.push_back(n);
  }
  EXPECT_EQ(delivered, all);
  EXPECT_LE(*std::max_element(shares.begin(), shares.end()) -
                *std::min_element(shares.begin(), shares.end()),
            1u);
}

TEST(WeightedMix, ElasticSharesAreBalancedAndStateRoundTrips) {
  MixCase c;
  c.sizes = {100, 37};
  c.random = {true, false};
  c.tails = {TailPolicy::none, TailPolicy::pad};
  c.options = {.weights = {2, 1}, .seed = 9, .stop = MixStop::after_count, .count = 40};
  std::vector<MixState> saved;
  for (std::uint32_t r = 0; r < 4; ++r) {
    auto mix = c.make(r, 4);
    saved.push_back(mix.state({.watermark = 5 * r, .above = {5 * r + 2}}, 3));
  }
  std::uint64_t total = 0;
  for (std::uint32_t r = 0; r < 3; ++r) {
    const MixState s = repartition(saved, r, 3);
    EXPECT_FALSE(s.own_sequence);
    EXPECT_EQ(s.epoch_world_size, 4u);
    EXPECT_EQ(s.generation, 3u);
    auto mix = c.make(r, 3);
    mix.restore(s);
    EXPECT_EQ(mix.state(s.committed, 3), s);
    std::uint64_t n = 0;
    while (mix.next()) ++n;
    EXPECT_EQ(n, 42u);
    total += n;
  }
  EXPECT_EQ(total, 126u);  // 4 × 40 draws; 0 + 5 + 10 + 15 below the watermarks and 4 above
}

TEST(WeightedMix, ANeverStoppingMixResumesOnlyAtItsWorldSize) {
  MixCase c;
  c.sizes = {5, 9};
  c.random = {true, true};
  c.tails = {TailPolicy::none, TailPolicy::none};
  c.options = {.weights = {1, 1}, .seed = 2, .stop = MixStop::never};
  std::vector<MixState> saved;
  for (std::uint32_t r = 0; r < 2; ++r) saved.push_back(c.make(r, 2).state({.watermark = 7}));
  try {
    repartition(saved, 0, 3);
    FAIL() << "a never-stopping mix was re-partitioned";
  } catch (const SamplerStateError& e) {
    EXPECT_NE(std::string(e.what()).find("resume it at its saved world size 2"), std::string::npos)
        << e.what();
  }
  auto mix = c.make(1, 2);
  auto full = c.make(1, 2);
  mix.restore(saved[1]);
  for (int k = 0; k < 7; ++k) full.next();
  for (int k = 0; k < 100; ++k) ASSERT_EQ(mix.next()->value, full.next()->value);
}

TEST(WeightedMix, RestoreRejectsAnotherMix) {
  MixCase c;
  c.sizes = {20, 30};
  c.random = {true, true};
  c.tails = {TailPolicy::none, TailPolicy::none};
  c.options = {.weights = {1, 2}, .seed = 5};
  const MixState state = c.make(0, 2).state({.watermark = 3});
  auto expect_conflict = [&](const MixCase& other, const std::string& text) {
    auto mix = other.make(0, 2);
    try {
      mix.restore(state);
      ADD_FAILURE() << "restored another mix; expected " << text;
    } catch (const SamplerStateError& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  MixCase other = c;
  other.options.weights = {1, 3};
  expect_conflict(other, "mix weight 1: checkpoint has 2");
  other = c;
  other.options.seed = 6;
  expect_conflict(other, "mix seed: checkpoint has 5, caller has 6");
  other = c;
  other.sizes = {20, 31};
  expect_conflict(other, "mix source 1: dataset size n: checkpoint has 30, caller has 31");
  auto rank1 = c.make(1, 2);
  EXPECT_THROW(rank1.restore(state), SamplerStateError);
  EXPECT_THROW(WeightedMixSampler({DistributedRandomSampler(5, {.rank = 0, .world_size = 2}),
                                   DistributedRandomSampler(5, {.rank = 1, .world_size = 2})},
                                  {.weights = {1, 1}}),
               SamplerStateError);
}

TEST(WeightedMix, RejectsBadWeights) {
  EXPECT_THROW(WeightedMixSampler(sources({5}), {.weights = {1, 1}}), SamplerStateError);
  EXPECT_THROW(WeightedMixSampler(sources({5, 5}), {.weights = {0, 0}}), SamplerStateError);
  EXPECT_THROW(WeightedMixSampler({}, {}), SamplerStateError);
}

}  // namespace
}  // namespace brigade::actors
