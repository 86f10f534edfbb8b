#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <numeric>
#include <thread>

#include "actors/pipeline.h"
#include "tests/actors/test_util.h"

namespace brigade::actors {
namespace {

using testing::sleep_ms;

using testing::iota;

TEST(Lifecycle, NextTellsItemTimeoutAndEnd) {
  auto p = PipelineBuilder()
               .add_source(iota(2))
               .pipe(
                   [](int x) {
                     sleep_ms(x == 1 ? 300 : 0);
                     return x;
                   },
                   {.executor = Executor::io})
               .add_sink(2)
               .build({.num_threads = 1, .log_stats_at_end = false});
  auto first = p.next();
  ASSERT_EQ(first.status, NextStatus::item);
  EXPECT_EQ(*first.item, 0);
  EXPECT_EQ(p.next(std::chrono::milliseconds(20)).status, NextStatus::timeout);
  auto second = p.next(std::chrono::seconds(10));
  ASSERT_EQ(second.status, NextStatus::item);
  EXPECT_EQ(*second.item, 1);
  EXPECT_EQ(p.next().status, NextStatus::end);
}

TEST(Lifecycle, StopMidEpochWithABlockedStageAndIdleConsumer) {
  std::atomic<int> started{0};
  auto p = PipelineBuilder()
               .add_source(iota(100000))
               .pipe(
                   [&](int x) {
                     ++started;
                     sleep_ms(20);  // a slow stage, waiting on nothing the pipeline controls
                     return x;
                   },
                   {.concurrency = 2, .executor = Executor::io})
               .pipe([](int x) { return x; }, {.concurrency = 2})
               .add_sink(2)
               .build({.num_threads = 2, .log_stats_at_end = false});
  p.start();
  auto first = p.next();
  ASSERT_TRUE(first);
  sleep_ms(100);  // the consumer does not read: stages back up and wait for credit
  const auto t0 = std::chrono::steady_clock::now();
  p.stop();
  EXPECT_LT(testing::seconds_since(t0), 2.0);
  EXPECT_FALSE(p.running());
  const int after_stop = started.load();
  sleep_ms(60);
  EXPECT_EQ(started.load(), after_stop);  // queued work was cancelled, nothing runs
  EXPECT_LT(after_stop, 100);
}

TEST(Lifecycle, RestartsForASecondEpoch) {
  auto p = PipelineBuilder()
               .add_source(iota(50))
               .pipe([](int x) { return x + 1; }, {.concurrency = 3})
               .aggregate(8)
               .add_sink(2)
               .build({.num_threads = 2, .log_stats_at_end = false});
  for (int epoch = 0; epoch < 3; ++epoch) {
    int sum = 0;
    for (auto& batch : p) sum += std::accumulate(batch.begin(), batch.end(), 0);
    EXPECT_EQ(sum, 50 * 51 / 2) << "epoch " << epoch;
  }
}

TEST(Lifecycle, StopThenNextRunsAFreshEpoch) {
  std::vector<int> src = iota(1000);
  auto p = PipelineBuilder()
               .add_source(std::ref(src))
               .add_sink(2)
               .build({.num_threads = 1, .log_stats_at_end = false});
  EXPECT_EQ(*p.next().item, 0);
  p.stop();
  src.assign(3, 7);  // by reference: the next epoch sees the new contents
  int n = 0;
  for (auto& x : p) n += x;
  EXPECT_EQ(n, 21);
}

TEST(Lifecycle, DestructorStopsARunningPipeline) {
  std::atomic<int> calls{0};
  {
    auto p = PipelineBuilder()
                 .add_source(iota(1000000))
                 .pipe(
                     [&](int x) {
                       ++calls;
                       return x;
                     },
                     {.concurrency = 4})
                 .add_sink(2)
                 .build({.num_threads = 2, .log_stats_at_end = false});
    EXPECT_TRUE(p.next());
  }
  const int seen = calls.load();
  sleep_ms(30);
  EXPECT_EQ(calls.load(), seen);
}

TEST(Lifecycle, StopFromAnotherThreadWakesAWaitingConsumer) {
  auto p = PipelineBuilder()
               .add_source(iota(10))
               .pipe(
                   [](int x) {
                     sleep_ms(x == 0 ? 0 : 200);
                     return x;
                   },
                   {.executor = Executor::io})
               .add_sink(2)
               .build({.num_threads = 1, .log_stats_at_end = false});
  ASSERT_TRUE(p.next());
  std::thread stopper([&] {
    sleep_ms(30);
    p.stop();
  });
  const auto r = p.next();  // waits: the stage sleeps, then stop() ends the run
  stopper.join();
  EXPECT_NE(r.status, NextStatus::timeout);
}

}  // namespace
}  // namespace brigade::actors

namespace brigade::actors {
namespace {

std::size_t thread_count() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// Threads of terminated actors exit asynchronously: wait (up to 2 s) for the count.
std::size_t settled_thread_count(std::size_t expected) {
  for (int i = 0; i < 200 && thread_count() != expected; ++i) sleep_ms(10);
  return thread_count();
}

// A task waiting on something outside the process sees the stop through its
// TaskContext, so stop() does not wait on it forever.
TEST(Lifecycle, StopReachesATaskWaitingOnItsStopToken) {
  std::atomic<int> waiting{0};
  auto p = PipelineBuilder()
               .add_source(iota(100))
               .pipe(
                   [&](int x, TaskContext& task) {
                     std::mutex m;
                     std::condition_variable_any cv;
                     std::unique_lock lock(m);
                     ++waiting;
                     cv.wait(lock, task.stop_token(), [] { return false; });  // a dead peer
                     return x;
                   },
                   {.concurrency = 2, .executor = Executor::io})
               .add_sink(2)
               .build({.num_threads = 1, .log_stats_at_end = false});
  p.start();
  while (waiting.load() < 2) std::this_thread::yield();
  p.stop();  // returns: both waiting tasks observed the token
  EXPECT_FALSE(p.running());
}

// stats() and committed() answer while a stop waits for a task that does not look at
// its stop token.
TEST(Lifecycle, StatsAndCommittedDoNotWaitForAStopInProgress) {
  std::atomic<bool> release{false};
  std::atomic<bool> entered{false};
  auto p = PipelineBuilder()
               .add_source(iota(10))
               .pipe(
                   [&](int x) {
                     entered = true;
                     while (!release.load()) std::this_thread::yield();
                     return x;
                   },
                   {.executor = Executor::io})
               .add_sink(2)
               .build({.num_threads = 1, .log_stats_at_end = false});
  p.start();
  while (!entered.load()) std::this_thread::yield();
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    p.stop();
    stopped = true;
  });
  (void)p.stats();
  (void)p.committed();
  EXPECT_FALSE(stopped.load());  // the stop is still waiting for the task
  release = true;
  stopper.join();
  EXPECT_TRUE(stopped.load());
}

TEST(Lifecycle, RepeatedRunsAndStopsLeakNoThreads) {
  // ThreadSanitizer starts a helper thread of its own with a process's first thread:
  // let that happen before counting.
  std::thread([] {}).join();
  const std::size_t before = thread_count();
  {
    auto p = PipelineBuilder()
                 .add_source(iota(500))
                 .pipe([](int x) { return x; }, {.concurrency = 3, .executor = Executor::io})
                 .pipe([](int x) { return x; }, {.concurrency = 2})
                 .add_sink(2)
                 .build({.num_threads = 2, .log_stats_at_end = false});
    std::size_t after_first = 0;
    for (int round = 0; round < 6; ++round) {
      if (round % 2) {
        for (auto& x : p) (void)x;  // a whole epoch
      } else {
        ASSERT_TRUE(p.next());  // a few items, then stop mid-epoch
        p.stop();
      }
      if (round == 0) {
        sleep_ms(100);
        after_first = thread_count();
      }
      EXPECT_EQ(settled_thread_count(after_first), after_first) << "round " << round;
    }
  }
  EXPECT_EQ(settled_thread_count(before), before);  // the scheduler threads are gone too
}

}  // namespace
}  // namespace brigade::actors
