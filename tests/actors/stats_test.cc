#include "actors/stats.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <numeric>
#include <set>

#include "actors/pipeline.h"
#include "tests/actors/test_util.h"

namespace brigade::actors {
namespace {

using testing::sleep_ms;

using testing::iota;

TEST(Stats, SleepingStageReportsItsTaskTime) {
  auto p = PipelineBuilder()
               .add_source(iota(60))
               .pipe(
                   [](int x) {
                     sleep_ms(2);
                     return x;
                   },
                   {.concurrency = 2, .name = "sleepy"})
               .pipe([](int x) { return x; }, {.name = "fast"})
               .add_sink(3)
               .build({.num_threads = 2, .log_stats_at_end = false});
  for (auto& x : p) (void)x;
  const auto stats = p.stats();
  ASSERT_EQ(stats.stages.size(), 2u);
  const auto& s = stats.stages[0];
  EXPECT_EQ(s.name, "sleepy");
  EXPECT_EQ(s.tasks, 60u);
  EXPECT_EQ(s.outputs, 60u);
  EXPECT_GE(s.p50_ms, 1.5);
  EXPECT_LE(s.p50_ms, 10.0);
  EXPECT_GE(s.p99_ms, s.p50_ms);
  EXPECT_GT(s.items_per_s, 0);
  EXPECT_GT(s.occupancy, 0);
  EXPECT_LE(s.occupancy, 1.0 + 1e-9);
  EXPECT_GT(stats.stages[1].starved_s, 0);  // the fast stage waited for the slow one
  EXPECT_EQ(stats.sink.delivered, 60u);
  EXPECT_GE(stats.sink.requests, 60u);
  EXPECT_GE(stats.sink.data_readiness, 0.0);
  EXPECT_LE(stats.sink.data_readiness, 1.0);
  EXPECT_GT(stats.sink.consumer_wait_s, 0.0);
  EXPECT_EQ(stats.source_items, 60u);
  const auto table = format_stats_table(stats);
  EXPECT_NE(table.find("sleepy"), std::string::npos);
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

TEST(Stats, SlowConsumerShowsBackpressure) {
  auto p = PipelineBuilder()
               .add_source(iota(40))
               .pipe([](int x) { return x; }, {.name = "map"})
               .add_sink(2)
               .build({.num_threads = 1, .log_stats_at_end = false});
  for (auto& x : p) {
    (void)x;
    sleep_ms(3);
  }
  const auto stats = p.stats();
  EXPECT_GT(stats.stages[0].backpressured_s, 0.03);
  EXPECT_GT(stats.sink.data_readiness, 0.8);
}

TEST(Stats, IntervalCallbackReceivesSnapshots) {
  std::atomic<int> calls{0};
  std::atomic<std::uint64_t> last_tasks{0};
  auto p = PipelineBuilder()
               .add_source(iota(40))
               .pipe(
                   [](int x) {
                     sleep_ms(5);
                     return x;
                   },
                   {.name = "slow"})
               .add_sink(2)
               .build({.num_threads = 1,
                       .stats_interval = std::chrono::milliseconds(20),
                       .on_stats =
                           [&](const PipelineStats& s) {
                             ++calls;
                             last_tasks = s.stages.at(0).tasks;
                           },
                       .log_stats_at_end = false});
  for (auto& x : p) (void)x;
  EXPECT_GE(calls.load(), 3);
  EXPECT_GT(last_tasks.load(), 0u);
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
