#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <numeric>
#include <stop_token>
#include <thread>

#include "actors/pipeline.h"
#include "tests/actors/test_util.h"

namespace brigade::actors {
namespace {

using testing::EventCount;
using testing::Gate;
using testing::iota;
using testing::until;

TEST(Lifecycle, NextTellsItemTimeoutAndEnd) {
  Gate gate;
  auto p = PipelineBuilder()
               .add_source(iota(2))
               .pipe(
                   [&gate](int x) {
                     if (x == 1) gate.wait();
                     return x;
                   },
                   {.executor = Executor::io})
               .add_sink(2)
               .build({.num_threads = 1, .log_stats_at_end = false});
  auto first = p.next();
  ASSERT_EQ(first.status, NextStatus::item);
  EXPECT_EQ(*first.item, 0);
  EXPECT_EQ(p.next(std::chrono::milliseconds(20)).status, NextStatus::timeout);  // 1 is held
  gate.open();
  auto second = p.next();
  ASSERT_EQ(second.status, NextStatus::item);
  EXPECT_EQ(*second.item, 1);
  EXPECT_EQ(p.next().status, NextStatus::end);
}

// Both workers of a stage are blocked on something the pipeline does not control (they
// see the stop request but do not act on it) while the consumer reads nothing: stop()
// waits for them, cancels the queued work, and no task starts after it.
TEST(Lifecycle, StopMidEpochWithABlockedStageAndIdleConsumer) {
  std::atomic<int> started{0};
  EventCount blocked;
  EventCount saw_stop;
  Gate gate;
  auto p = PipelineBuilder()
               .add_source(iota(100000))
               .pipe(
                   [&](int x, TaskContext& task) {
                     ++started;
                     if (x == 0) return x;
                     std::stop_callback on_stop(task.stop_token(), [&] { saw_stop.add(); });
                     blocked.add();
                     gate.wait();
                     return x;
                   },
                   {.concurrency = 2, .executor = Executor::io})
               .pipe([](int x) { return x; }, {.concurrency = 2})
               .add_sink(2)
               .build({.num_threads = 2, .log_stats_at_end = false});
  p.start();
  auto first = p.next();
  ASSERT_TRUE(first);
  blocked.wait_for(2);  // items 1 and 2 hold both workers; the rest waits in queues
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    p.stop();
    stopped = true;
  });
  saw_stop.wait_for(2);  // the stop is requested, and waits for the blocked tasks
  EXPECT_FALSE(stopped.load());
  gate.open();
  stopper.join();
  EXPECT_FALSE(p.running());
  EXPECT_EQ(started.load(), 3);  // every actor is joined: queued work never started
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

// Item 5's task runs until the stop reaches it: the destructor must stop the run and
// wait for it, so that no task runs once the pipeline is gone.
TEST(Lifecycle, DestructorStopsARunningPipeline) {
  std::atomic<int> calls{0};
  std::atomic<int> in_task{0};
  EventCount waiting;
  {
    auto p = PipelineBuilder()
                 .add_source(iota(1000000))
                 .pipe(
                     [&](int x, TaskContext& task) {
                       ++calls;
                       ++in_task;
                       if (x == 5) {
                         std::mutex m;
                         std::condition_variable_any cv;
                         std::unique_lock lock(m);
                         waiting.add();
                         cv.wait(lock, task.stop_token(), [] { return false; });
                       }
                       --in_task;
                       return x;
                     },
                     {.concurrency = 4})
                 .add_sink(2)
                 .build({.num_threads = 2, .log_stats_at_end = false});
    EXPECT_TRUE(p.next());
    waiting.wait_for(1);
  }
  EXPECT_EQ(in_task.load(), 0);  // the destructor returned after the last task did
  EXPECT_LT(calls.load(), 1000000);
}

// The consumer waits in next() for an item that a task holds until the stop: the stop
// from another thread ends the run and wakes the consumer.
TEST(Lifecycle, StopFromAnotherThreadWakesAWaitingConsumer) {
  EventCount holding;
  auto p = PipelineBuilder()
               .add_source(iota(10))
               .pipe(
                   [&](int x, TaskContext& task) {
                     if (x == 0) return x;
                     std::mutex m;
                     std::condition_variable_any cv;
                     std::unique_lock lock(m);
                     holding.add();
                     cv.wait(lock, task.stop_token(), [] { return false; });
                     return x;
                   },
                   {.executor = Executor::io})
               .add_sink(2)
               .build({.num_threads = 1, .log_stats_at_end = false});
  ASSERT_TRUE(p.next());
  std::thread stopper([&] {
    holding.wait_for(1);
    until([&] { return p.stats().sink.requests >= 2; });  // the consumer waits for item 1
    p.stop();
  });
  const auto r = p.next();
  stopper.join();
  EXPECT_EQ(r.status, NextStatus::end);
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

// Threads of terminated actors exit asynchronously: wait for the count to come back.
// A leaked thread never does; ctest's --timeout turns that into a failure.
std::size_t settled_thread_count(std::size_t expected) {
  until([&] { return thread_count() == expected; });
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
      // The engine keeps the last run's state (stats(), committed()), and with it the
      // threads of its io workers, which end when the next run replaces it. After the
      // first run no earlier thread is still ending: its count is the steady one.
      if (round == 0) after_first = thread_count();
      EXPECT_EQ(settled_thread_count(after_first), after_first) << "round " << round;
    }
  }
  EXPECT_EQ(settled_thread_count(before), before);  // the scheduler threads are gone too
}

}  // namespace
}  // namespace brigade::actors
