#include "actors/pipeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <thread>

#include "tests/actors/test_util.h"

namespace brigade::actors {
namespace {

using testing::EventCount;
using testing::iota;

// Busy work whose length varies with x, so that concurrent tasks finish out of their
// input order (no sleep: nothing here waits for time to pass).
void busy_work(int x) {
  volatile std::uint64_t sink = 0;
  std::mt19937 rng(static_cast<unsigned>(x));
  const auto n = std::uniform_int_distribution<int>(0, 50'000)(rng);
  for (int i = 0; i < n; ++i) sink = sink + static_cast<std::uint64_t>(i);
}

template <class P>
auto drain(P& pipeline) {
  std::vector<typename P::value_type> out;
  for (auto& x : pipeline) out.push_back(std::move(x));
  return out;
}

BuildOptions quiet() { return BuildOptions{.num_threads = 2, .log_stats_at_end = false}; }

TEST(Pipeline, InputOrderSurvivesOutOfOrderCompletion) {
  auto jitter = [](int x) {
    busy_work(x);
    return x;
  };
  // In the io stage every even item waits until the odd one after it has finished: its
  // tasks finish out of order by construction.
  std::vector<std::atomic<bool>> finished(300);
  std::mutex mutex;
  std::vector<int> completion;
  auto swap_pairs = [&](int x) {
    if (x % 2 == 0) finished[x + 1].wait(false);
    {
      std::lock_guard lock(mutex);
      completion.push_back(x);
    }
    finished[x] = true;
    finished[x].notify_all();
    return x;
  };
  auto p = PipelineBuilder()
               .add_source(iota(300))
               .pipe(jitter, {.concurrency = 8, .output_order = Order::input})
               .pipe(swap_pairs,
                     {.concurrency = 3, .output_order = Order::input, .executor = Executor::io})
               .add_sink(4)
               .build(quiet());
  EXPECT_EQ(drain(p), iota(300));
  ASSERT_EQ(completion.size(), 300u);
  EXPECT_NE(completion, iota(300));  // 1 finished before 0, 3 before 2, …
}

TEST(Pipeline, CompletionOrderDeliversEveryItem) {
  auto delay = [](int x) {
    busy_work(x);
    return x;
  };
  auto p = PipelineBuilder()
               .add_source(iota(500))
               .pipe(delay, {.concurrency = 6, .output_order = Order::completion})
               .add_sink(3)
               .build(quiet());
  auto out = drain(p);
  std::sort(out.begin(), out.end());
  EXPECT_EQ(out, iota(500));
}

TEST(Pipeline, OptionalResultFiltersAndIsCounted) {
  auto p = PipelineBuilder()
               .add_source(iota(100))
               .pipe(
                   [](int x) -> std::optional<int> {
                     if (x % 3 == 0) return std::nullopt;
                     return x;
                   },
                   {.concurrency = 2, .name = "filter"})
               .add_sink(3)
               .build(quiet());
  auto out = drain(p);
  EXPECT_EQ(out.size(), 66u);
  EXPECT_TRUE(std::none_of(out.begin(), out.end(), [](int x) { return x % 3 == 0; }));
  EXPECT_EQ(p.stats().stages[0].filtered, 34u);
}

TEST(Pipeline, VectorResultStaysOneItem) {
  auto p = PipelineBuilder()
               .add_source(iota(10))
               .pipe([](int x) { return std::vector<int>(static_cast<std::size_t>(x), x); })
               .add_sink(3)
               .build(quiet());
  auto out = drain(p);
  ASSERT_EQ(out.size(), 10u);
  EXPECT_EQ(out[4], std::vector<int>(4, 4));
}

TEST(Pipeline, GeneratorOutputsShareTheirInputPosition) {
  auto p = PipelineBuilder()
               .add_source(iota(20))
               .generate(
                   [](int x, Emitter<std::string>& emit) {
                     for (int i = 0; i < x % 4; ++i)
                       emit(std::to_string(x) + "." + std::to_string(i));
                   },
                   {.concurrency = 3})
               .add_sink(2)
               .build(quiet());
  std::vector<std::string> out;
  for (auto r = p.next(); r; r = p.next()) {
    const int source = std::stoi(r.item->substr(0, r.item->find('.')));
    EXPECT_EQ(r.positions, Positions(static_cast<std::uint64_t>(source)));
    out.push_back(*r.item);
  }
  EXPECT_EQ(out.size(), 5u * (0 + 1 + 2 + 3));
  EXPECT_EQ(out.front(), "1.0");                // input order: generator outputs in sequence
  EXPECT_EQ(p.stats().stages[0].filtered, 5u);  // x % 4 == 0 emitted nothing
}

TEST(Pipeline, AggregateFlushesPartialBatchWithItsPositions) {
  auto p = PipelineBuilder().add_source(iota(10)).aggregate(4).add_sink(2).build(quiet());
  std::vector<std::vector<int>> batches;
  std::vector<Positions> positions;
  for (auto r = p.next(); r; r = p.next()) {
    batches.push_back(*r.item);
    positions.push_back(r.positions);
  }
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[2], (std::vector<int>{8, 9}));
  EXPECT_EQ(positions[1], (Positions{4, 5, 6, 7}));
  EXPECT_EQ(positions[2], (Positions{8, 9}));
}

TEST(Pipeline, AggregateDropLastDropsAndCountsTheTail) {
  auto p = PipelineBuilder()
               .add_source(iota(10))
               .aggregate(4, {.drop_last = true})
               .add_sink(2)
               .build(quiet());
  auto out = drain(p);
  EXPECT_EQ(out.size(), 2u);
  EXPECT_EQ(p.stats().stages[0].filtered, 2u);
}

struct SumUntil {
  int limit;
  int sum = 0;
  std::optional<int> accumulate(int x) {
    sum += x;
    if (sum < limit) return std::nullopt;
    return std::exchange(sum, 0);
  }
  std::optional<int> flush() {
    return sum ? std::optional<int>(std::exchange(sum, 0)) : std::nullopt;
  }
};

TEST(Pipeline, CustomAggregatorAccumulatesAndFlushes) {
  auto p =
      PipelineBuilder().add_source(iota(10)).aggregate(SumUntil{10}).add_sink(2).build(quiet());
  EXPECT_EQ(drain(p), (std::vector<int>{10, 11, 15, 9}));  // 0..4, 5..6, 7..8, 9
  EXPECT_EQ(drain(p), (std::vector<int>{10, 11, 15, 9}));  // a fresh copy per epoch
}

TEST(Pipeline, DisaggregateUndoesAnAggregateWithPositions) {
  auto p =
      PipelineBuilder().add_source(iota(10)).aggregate(3).disaggregate().add_sink(2).build(quiet());
  std::vector<int> out;
  for (auto r = p.next(); r; r = p.next()) {
    EXPECT_EQ(r.positions, Positions(static_cast<std::uint64_t>(*r.item)));
    out.push_back(*r.item);
  }
  EXPECT_EQ(out, iota(10));
}

TEST(Pipeline, NextCallableSourceAndMoveOnlyItems) {
  auto p = PipelineBuilder()
               .add_source([i = 0]() mutable -> std::optional<std::unique_ptr<int>> {
                 if (i == 5) return std::nullopt;
                 return std::make_unique<int>(i++);
               })
               .pipe([](std::unique_ptr<int> v) { return *v * 10; })
               .add_sink(1)
               .build(quiet());
  EXPECT_EQ(drain(p), (std::vector<int>{0, 10, 20, 30, 40}));
}

// Each task blocks until all 8 tasks of its group are running at once, on one cpu
// scheduler thread: run one at a time (or on the cpu threads), they would never finish.
TEST(Pipeline, IoStageRunsBlockingWorkInParallel) {
  std::array<EventCount, 2> running;
  auto p = PipelineBuilder()
               .add_source(iota(16))
               .pipe(
                   [&](int x) {
                     auto& group = running[static_cast<std::size_t>(x / 8)];
                     group.add();
                     group.wait_for(8);
                     return x;
                   },
                   {.concurrency = 8, .executor = Executor::io})
               .add_sink(4)
               .build({.num_threads = 1, .log_stats_at_end = false});
  EXPECT_EQ(drain(p).size(), 16u);
  EXPECT_EQ(running[0].value(), 8);
  EXPECT_EQ(running[1].value(), 8);
}

TEST(Pipeline, BuildRejectsBadUseByName) {
  auto message = [](auto&& make) -> std::string {
    try {
      make();
    } catch (const PipelineBuildError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(message([] { PipelineBuilder().add_sink(3).build(); }).find("no source"),
            std::string::npos);
  EXPECT_NE(message([] { PipelineBuilder().add_source(iota(3)).build(); }).find("no sink"),
            std::string::npos);
  EXPECT_NE(message([] {
              PipelineBuilder()
                  .add_source(iota(3))
                  .pipe([](int x) { return x; }, {.concurrency = 0, .name = "zero"})
                  .add_sink(3)
                  .build();
            }).find("stage 'zero': concurrency must be at least 1"),
            std::string::npos);
  EXPECT_NE(message([] {
              PipelineBuilder().add_source(iota(3)).aggregate(0).add_sink(3).build();
            }).find("batch size must be at least 1"),
            std::string::npos);
  EXPECT_NE(
      message([] {
        PipelineBuilder().add_source(iota(3)).add_sink(3).pipe([](int x) { return x; }).build();
      }).find("after the sink"),
      std::string::npos);
  EXPECT_NE(message([] {
              PipelineBuilder()
                  .add_source(iota(3))
                  .pipe([](int x) { return x; }, {.retry = {.attempts = 3}})
                  .add_sink(3)
                  .build();
            }).find("retry needs executor io"),
            std::string::npos);
}

}  // namespace
}  // namespace brigade::actors

namespace brigade::actors {
namespace {

struct CountDown {
  std::uint64_t next_position = 10;
  std::optional<Positioned<std::string>> next() {
    if (next_position == 15) return std::nullopt;
    const auto p = next_position++;
    return Positioned<std::string>{p, "s" + std::to_string(p)};
  }
};

TEST(Pipeline, PositionedSourceNumbersItsOwnItems) {
  auto p = PipelineBuilder().add_source(CountDown{}).add_sink(2).build(quiet());
  std::vector<std::uint64_t> positions;
  for (auto r = p.next(); r; r = p.next()) {
    EXPECT_EQ(*r.item, "s" + std::to_string(r.positions.front()));
    positions.push_back(r.positions.front());
  }
  EXPECT_EQ(positions, (std::vector<std::uint64_t>{10, 11, 12, 13, 14}));
}

}  // namespace
}  // namespace brigade::actors
