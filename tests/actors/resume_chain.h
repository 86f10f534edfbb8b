#pragma once

// A job simulated over checkpoint chains: W0 ranks run from fresh samplers, each
// stops on its own (often at or just past an epoch boundary, so that the ranks of one
// set straddle epochs), saves; the next W1 ranks resume from the set (the caller's
// `resume`: own states, repartition(), or files), stop again, …; the last ranks run to
// the end of the job. The union of everything committed must be each epoch's sequence
// exactly once. Works for DistributedSampler and WeightedMixSampler alike.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "actors/mixer.h"
#include "actors/positions.h"
#include "actors/sampler.h"

namespace brigade::actors::testing {

// A delivered sample, comparable: (source, id, is_padding).
using ChainItem = std::tuple<std::uint32_t, std::uint64_t, bool>;
inline ChainItem chain_item(const SampleId& s) { return {0, s.id, s.is_padding}; }
inline ChainItem chain_item(const MixedSample& m) {
  return {m.source, m.sample.id, m.sample.is_padding};
}

// The CommitState that holds exactly the positions of `committed`.
inline CommitState commit_of(const std::set<std::uint64_t>& committed) {
  CommitState c;
  auto it = committed.begin();
  while (it != committed.end() && *it == c.watermark) {
    ++c.watermark;
    ++it;
  }
  c.above.assign(it, committed.end());
  return c;
}

// The positions `c` commits below `end`.
inline std::set<std::uint64_t> positions_of(const CommitState& c, std::uint64_t end) {
  std::set<std::uint64_t> out;
  for (std::uint64_t p = 0; p < std::min(c.watermark, end); ++p) out.insert(p);
  for (auto p : c.above) out.insert(p);
  return out;
}

template <class Sampler, class State>
class ResumeChain {
  using Item = ChainItem;

 public:
  using Make = std::function<Sampler(std::uint32_t rank, std::uint32_t world)>;
  // The states of the new ranks 0 … world-1 from the saved set (by rank).
  using Resume =
      std::function<std::vector<State>(const std::vector<State>& saved, std::uint32_t world)>;

  ResumeChain(Make make, Resume resume, std::uint64_t first_epoch, std::uint64_t epochs)
      : make_(std::move(make)),
        resume_(std::move(resume)),
        first_(first_epoch),
        last_(first_epoch + epochs - 1) {}

  // Runs the chain over `worlds`; a gtest failure if an epoch's deliveries differ from
  // its sequence.
  void run(const std::vector<std::uint32_t>& worlds, std::mt19937_64& rng) {
    std::vector<State> states;
    for (std::uint32_t r = 0; r < worlds[0]; ++r) states.push_back(make_(r, worlds[0]).state({}));
    started_.clear();
    delivered_.clear();
    for (std::size_t k = 0; k < worlds.size(); ++k) {
      if (k > 0) states = resume_(states, worlds[k]);
      ASSERT_EQ(states.size(), worlds[k]);
      const bool last_run = k + 1 == worlds.size();
      std::vector<State> saved;
      std::uint64_t started = first_;
      for (std::uint32_t r = 0; r < worlds[k]; ++r) {
        auto s = make_(r, worlds[k]);
        s.restore(states[r]);
        saved.push_back(run_rank(s, states[r].committed, last_run, rng, k + 1));
        started = std::max(started, saved.back().epoch);
      }
      started_.push_back({started, worlds[k]});
      states = saved;
    }
    for (std::uint64_t e = first_; e <= last_; ++e) {
      SCOPED_TRACE("epoch " + std::to_string(e));
      std::uint32_t world = worlds.back();
      for (const auto& [started, w] : started_) {
        if (started >= e) {
          world = w;
          break;
        }
      }
      std::multiset<Item> expected;
      for (std::uint32_t r = 0; r < world; ++r) {
        auto s = make_(r, world);
        s.set_epoch(e);
        while (auto d = s.next()) expected.insert(chain_item(d->value));
      }
      const auto& got = delivered_[e];
      ASSERT_EQ(std::multiset<Item>(got.begin(), got.end()), expected)
          << got.size() << " delivered, " << expected.size() << " expected";
    }
  }

 private:
  // One rank: pulls up to a budget (often the rest of its epoch, or one or two past
  // it), moving into the next epoch at the end of one; commits all of the epochs it
  // finishes and a random part of what it pulled in the epoch it stops in (on top of
  // `restored` there). Returns its saved state.
  State run_rank(Sampler& s, const CommitState& restored, bool to_the_end, std::mt19937_64& rng,
                 std::uint64_t generation) {
    std::uint64_t budget = ~0ULL;
    if (!to_the_end) {
      auto probe = s;
      std::uint64_t left = 0;
      while (probe.next()) ++left;
      switch (rng() % 4) {
        case 0:
          budget = left;  // stops at the end of its epoch
          break;
        case 1:
          budget = left + 1 + rng() % 2;  // one or two into the next
          break;
        default:
          budget = rng() % (2 * left + 4);
      }
    }
    std::set<std::uint64_t> committed = positions_of(restored, ~0ULL);
    std::vector<std::pair<std::uint64_t, Item>> pulled;
    for (std::uint64_t n = 0; n < budget;) {
      auto d = s.next();
      if (d) {
        pulled.emplace_back(d->position, chain_item(d->value));
        ++n;
        continue;
      }
      // The epoch is over: everything pulled in it is committed.
      std::uint64_t end = committed.empty() ? 0 : *committed.rbegin() + 1;
      for (const auto& [p, item] : pulled) {
        delivered_[s.epoch()].push_back(item);
        end = std::max(end, p + 1);
      }
      pulled.clear();
      if (s.epoch() >= last_) return s.state({.watermark = end}, generation);
      committed.clear();
    }
    // Stopped within an epoch: commit a prefix of what it pulled and some of the rest.
    const std::size_t prefix = rng() % 3 == 0 ? pulled.size() : rng() % (pulled.size() + 1);
    for (std::size_t i = 0; i < pulled.size(); ++i) {
      if (i < prefix || rng() % 2) {
        committed.insert(pulled[i].first);
        delivered_[s.epoch()].push_back(pulled[i].second);
      }
    }
    return s.state(commit_of(committed), generation);
  }

  Make make_;
  Resume resume_;
  std::uint64_t first_, last_;
  std::vector<std::pair<std::uint64_t, std::uint32_t>> started_;  // per run: newest epoch, W
  std::map<std::uint64_t, std::vector<Item>> delivered_;
};

}  // namespace brigade::actors::testing
