#include "actors/stats.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>

#include "actors/pipeline.h"
#include "tests/actors/test_util.h"

namespace brigade::actors {
namespace {

using namespace std::chrono_literals;
using testing::EventCount;
using testing::Gate;
using testing::iota;
using testing::ManualClock;
using testing::until;

// Statistics read a manual clock: a task "takes" the time it advances the clock by,
// and the figures are exact.
TEST(Stats, TaskTimesAndRatesFollowTheClock) {
  auto clock = std::make_shared<ManualClock>();
  auto p = PipelineBuilder()
               .add_source(iota(60))
               .pipe(
                   [clock](int x) {
                     clock->advance(std::chrono::milliseconds(x % 4 + 1));  // 1, 2, 3, 4 ms
                     return x;
                   },
                   {.name = "timed"})
               .pipe([](int x) { return x; }, {.concurrency = 2, .name = "fast"})
               .add_sink(3)
               .build({.num_threads = 2, .log_stats_at_end = false, .clock = clock});
  for (auto& x : p) (void)x;
  const auto stats = p.stats();
  ASSERT_EQ(stats.stages.size(), 2u);
  const auto& s = stats.stages[0];
  EXPECT_EQ(s.name, "timed");
  EXPECT_EQ(s.tasks, 60u);
  EXPECT_EQ(s.outputs, 60u);
  EXPECT_DOUBLE_EQ(s.mean_ms, 2.5);
  EXPECT_NEAR(s.p50_ms, 2.0, 2.0 * 0.07);  // the histogram's quantiles: within ±6%
  EXPECT_NEAR(s.p99_ms, 4.0, 4.0 * 0.07);
  EXPECT_DOUBLE_EQ(s.elapsed_s, 0.150);  // 60 tasks of 2.5 ms, one at a time
  EXPECT_DOUBLE_EQ(s.items_per_s, 400.0);
  EXPECT_GT(s.occupancy, 0);  // a task was running whenever the clock moved
  EXPECT_LE(s.occupancy, 1.0 + 1e-9);
  EXPECT_DOUBLE_EQ(stats.elapsed_s, 0.150);
  EXPECT_EQ(stats.sink.delivered, 60u);
  EXPECT_GE(stats.sink.requests, 60u);
  EXPECT_GE(stats.sink.data_readiness, 0.0);
  EXPECT_LE(stats.sink.data_readiness, 1.0);
  EXPECT_EQ(stats.source_items, 60u);
  const auto table = format_stats_table(stats);
  EXPECT_NE(table.find("timed"), std::string::npos);
  // The header lists the described columns in order.
  std::size_t at = 0;
  for (const auto& f : stage_figures()) {
    if (f.column.empty()) continue;
    const auto found = table.find(f.column, at);
    ASSERT_NE(found, std::string::npos) << f.column;
    EXPECT_LT(found, table.find('\n')) << f.column;
    at = found + f.column.size();
  }
  int figures = 0;
  for_each_figure(stats.stages[0], stage_figures(),
                  [&](std::string_view, const auto&) { ++figures; });
  EXPECT_EQ(figures, 18);
  EXPECT_NE(table.find("data readiness"), std::string::npos);
}

// While the slow stage's task is held, the stage after it is starved, the consumer
// waits, and the held task's time grows: each by exactly the time that passes.
TEST(Stats, WaitingForASlowStageIsStarvedAndConsumerWaitTime) {
  auto clock = std::make_shared<ManualClock>();
  Gate gate;
  EventCount entered;
  auto p = PipelineBuilder()
               .add_source(iota(10))
               .pipe(
                   [&](int x) {
                     if (x == 0) {
                       entered.add();
                       gate.wait();
                     }
                     return x;
                   },
                   {.executor = Executor::io, .name = "slow"})
               .pipe([](int x) { return x; }, {.name = "fast"})
               .add_sink(2)
               .build({.num_threads = 2, .log_stats_at_end = false, .clock = clock});
  p.start();
  std::thread consumer([&] { EXPECT_EQ(*p.next().item, 0); });
  until([&] { return p.stats().sink.requests >= 1; });  // the consumer waits in next()
  entered.wait_for(1);                                  // item 0's task is running
  // The fast stage has no input while item 0 is held: once it has started, it is starved.
  auto advanced = 0ms;
  until([&] {
    clock->advance(1ms);
    ++advanced;
    return p.stats().stages[1].starved_s > 0;
  });
  const double starved = p.stats().stages[1].starved_s;
  clock->advance(10ms);
  advanced += 10ms;
  EXPECT_NEAR(p.stats().stages[1].starved_s - starved, 0.010, 1e-9);
  EXPECT_EQ(p.stats().stages[0].backpressured_s, 0.0);  // the slow stage waits on nothing
  gate.open();
  consumer.join();
  for (auto& x : p) (void)x;
  const auto stats = p.stats();
  const double waited = std::chrono::duration<double>(advanced).count();
  EXPECT_NEAR(stats.sink.consumer_wait_s, waited, 1e-9);  // all of it in the first next()
  EXPECT_NEAR(stats.stages[0].p99_ms, waited * 1e3, waited * 1e3 * 0.07);  // item 0's task
  EXPECT_EQ(stats.sink.delivered, 10u);
}

// A consumer that does not read backs the line up: the stage holds finished items it
// has no credit to send, and all the time that passes is backpressured time.
TEST(Stats, SlowConsumerShowsBackpressure) {
  auto clock = std::make_shared<ManualClock>();
  auto p = PipelineBuilder()
               .add_source(iota(40))
               .pipe([](int x) { return x; }, {.name = "map"})
               .add_sink(2)
               .build({.num_threads = 1, .log_stats_at_end = false, .clock = clock});
  p.start();
  // Backed up: the sink holds 2 (its buffer), the stage 3 (its capacity), finished.
  until([&] {
    const auto s = p.stats();
    return s.stages[0].tasks == 5 && s.stages[0].outputs == 2;
  });
  EXPECT_EQ(p.stats().source_items, 5u);
  EXPECT_EQ(p.stats().stages[0].backpressured_s, 0.0);  // no time has passed yet
  until([&] {
    clock->advance(1ms);
    return p.stats().stages[0].backpressured_s > 0;
  });
  const double before = p.stats().stages[0].backpressured_s;
  clock->advance(30ms);
  const auto backed_up = p.stats();
  EXPECT_NEAR(backed_up.stages[0].backpressured_s - before, 0.030, 1e-9);
  EXPECT_GT(backed_up.stages[0].occupancy, 0.0);
  for (auto& x : p) (void)x;
  const auto stats = p.stats();
  EXPECT_EQ(stats.sink.delivered, 40u);
  EXPECT_GT(stats.sink.data_readiness, 0.0);
  EXPECT_LE(stats.sink.data_readiness, 1.0);
}

// The callback gets live snapshots at the interval (real time) while the run goes on.
TEST(Stats, IntervalCallbackReceivesSnapshots) {
  EventCount calls;
  EventCount calls_after_first_task;
  Gate gate;
  auto p = PipelineBuilder()
               .add_source(iota(40))
               .pipe(
                   [&gate](int x) {
                     if (x == 1) gate.wait();  // held until a snapshot has shown task 0
                     return x;
                   },
                   {.executor = Executor::io, .name = "slow"})
               .add_sink(2)
               .build({.num_threads = 1,
                       .stats_interval = std::chrono::milliseconds(20),
                       .on_stats =
                           [&](const PipelineStats& s) {
                             calls.add();
                             if (s.stages.at(0).tasks > 0) calls_after_first_task.add();
                           },
                       .log_stats_at_end = false});
  p.start();
  calls.wait_for(3);
  calls_after_first_task.wait_for(1);
  gate.open();
  for (auto& x : p) (void)x;
  EXPECT_GE(calls.value(), 3);
}

class CountingHook : public TaskHook {
 public:
  void before_task(const TaskInfo& task) override {
    std::lock_guard lock(mutex_);
    open_.insert({std::string(task.stage), task.positions.front()});
  }
  void after_task(const TaskInfo& task, std::chrono::nanoseconds duration, TaskOutcome outcome,
                  std::string_view error) override {
    std::lock_guard lock(mutex_);
    const auto key = std::make_pair(std::string(task.stage), task.positions.front());
    EXPECT_EQ(open_.erase(key), 1u) << "after without before";
    EXPECT_TRUE(done_.insert(key).second) << "task seen twice";
    EXPECT_GE(duration.count(), 0);
    if (outcome == TaskOutcome::failed) {
      ++failed_;
      EXPECT_EQ(error, "odd");
    }
    if (outcome == TaskOutcome::filtered) ++filtered_;
  }
  std::mutex mutex_;
  std::set<std::pair<std::string, std::uint64_t>> open_, done_;
  int failed_ = 0, filtered_ = 0;
};

TEST(Hooks, CalledOncePerTaskWithOutcome) {
  auto hook = std::make_shared<CountingHook>();
  auto p = PipelineBuilder()
               .add_source(iota(100))
               .pipe(
                   [](int x) {
                     if (x % 2) throw std::runtime_error("odd");
                     return x;
                   },
                   {.concurrency = 4, .name = "a"})
               .pipe(
                   [](int x) -> std::optional<int> {
                     if (x % 4 == 0) return std::nullopt;
                     return x;
                   },
                   {.concurrency = 2, .name = "b"})
               .add_sink(3)
               .build({.num_threads = 2, .hooks = {hook}, .log_stats_at_end = false});
  for (auto& x : p) (void)x;
  EXPECT_TRUE(hook->open_.empty());
  EXPECT_EQ(hook->done_.size(), 150u);  // 100 in a, 50 in b
  EXPECT_EQ(hook->failed_, 50);
  EXPECT_EQ(hook->filtered_, 25);
}

}  // namespace
}  // namespace brigade::actors
