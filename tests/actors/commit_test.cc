#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <set>
#include <thread>

#include "actors/detail/commit_tracker.h"
#include "actors/pipeline.h"

namespace brigade::actors {
namespace {

TEST(CommitTracker, WatermarkAndPositionsAbove) {
  detail::CommitTracker t(CommitState{2, {4}});
  EXPECT_EQ(t.snapshot(), (CommitState{2, {4}}));
  t.commit(Positions{3, 2});
  EXPECT_EQ(t.snapshot(), (CommitState{5, {}}));
  t.commit(Positions{7, 6});
  EXPECT_EQ(t.snapshot(), (CommitState{5, {6, 7}}));
  t.split(Positions(5), 3);  // three fragments of 5
  t.commit(Positions(5));
  t.commit(Positions(5));
  EXPECT_EQ(t.snapshot().watermark, 5u);
  t.commit(Positions(5));
  EXPECT_EQ(t.snapshot(), (CommitState{8, {}}));
}

// Stops after k items at random, then resumes from committed(): the union of both
// runs must be every surviving item exactly once, whatever order and filtering.
TEST(CommitState, StopAndResumeLosesAndRepeatsNothing) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 30; ++trial) {
    const int n = 50 + static_cast<int>(rng() % 200);
    const Order order = rng() % 2 ? Order::input : Order::completion;
    const int stop_after = static_cast<int>(rng() % static_cast<unsigned>(n / 2));
    CommitState resume;
    std::multiset<int> delivered;
    for (int run = 0; run < 2; ++run) {
      std::uint64_t next = 0;
      auto source = [&, n]() -> std::optional<Positioned<int>> {
        while (next < static_cast<std::uint64_t>(n) && resume.committed(next)) ++next;
        if (next >= static_cast<std::uint64_t>(n)) return std::nullopt;
        const auto p = next++;
        return Positioned<int>{p, static_cast<int>(p)};
      };
      struct Source {
        decltype(source)* f;
        std::optional<Positioned<int>> next() { return (*f)(); }
      };
      auto p = PipelineBuilder()
                   .add_source(Source{&source})
                   .pipe(
                       [](int x) -> std::optional<int> {
                         if (x % 7 == 3) return std::nullopt;
                         if (x % 11 == 5) throw std::runtime_error("bad");
                         return x;
                       },
                       {.concurrency = 3, .output_order = order})
                   .generate(
                       [](int x, Emitter<int>& emit) {
                         for (int i = 0; i < x % 3; ++i) emit(x);
                       },
                       {.concurrency = 2, .output_order = order})
                   .aggregate(4)
                   .add_sink(2)
                   .build({.num_threads = 2, .log_stats_at_end = false});
      p.start(resume);
      int batches = 0;
      for (auto r = p.next(); r; r = p.next()) {
        for (int x : *r.item) delivered.insert(x);
        if (run == 0 && ++batches == stop_after / 4 + 1) break;
      }
      // The source reads `resume` on a CAF worker until the run is stopped.
      CommitState committed = p.committed();
      p.stop();
      resume = std::move(committed);
    }
    std::multiset<int> expected;
    for (int x = 0; x < n; ++x) {
      if (x % 7 == 3 || x % 11 == 5) continue;
      for (int i = 0; i < x % 3; ++i) expected.insert(x);
    }
    // A position is committed only with all its fragments: a batch boundary inside a
    // position's fragments re-delivers the fragments already seen, never loses one.
    for (int x : expected) {
      ASSERT_GE(delivered.count(x), expected.count(x)) << "lost " << x;
      if (x % 3 == 1) {
        ASSERT_EQ(delivered.count(x), 1u) << "repeated " << x;
      }
    }
    ASSERT_EQ(resume.watermark, static_cast<std::uint64_t>(n)) << "trial " << trial;
  }
}

}  // namespace
}  // namespace brigade::actors

namespace brigade::actors {
namespace {

TEST(CommitTracker, ConcurrentCommitsFromStagesAndConsumer) {
  detail::CommitTracker t;
  constexpr std::uint64_t kN = 20000;
  std::vector<std::thread> threads;
  for (std::uint64_t k = 0; k < 4; ++k) {
    threads.emplace_back([&t, k] {
      for (std::uint64_t p = k; p < kN; p += 4) {
        t.split(Positions(p), 2);
        t.commit(Positions(p));
        t.commit(Positions(p));
        if (p % 1000 == 0) (void)t.snapshot();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(t.snapshot(), (CommitState{kN, {}}));
}

}  // namespace
}  // namespace brigade::actors
