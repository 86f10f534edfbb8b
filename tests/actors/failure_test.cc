#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <string>

#include "actors/pipeline.h"
#include "tests/actors/test_util.h"

namespace brigade::actors {
namespace {

using testing::iota;

int fail_on_multiples_of_ten(int x) {
  if (x % 10 == 0) throw std::runtime_error("bad sample " + std::to_string(x));
  return x;
}

TEST(Failure, FailedItemsAreDroppedCountedAndNamed) {
  auto p = PipelineBuilder()
               .add_source(iota(100))
               .pipe(fail_on_multiples_of_ten, {.concurrency = 3, .name = "decode"})
               .add_sink(3)
               .build({.num_threads = 2, .log_stats_at_end = false});
  int n = 0;
  for (auto& x : p) {
    EXPECT_NE(x % 10, 0);
    ++n;
  }
  EXPECT_EQ(n, 90);
  const auto stats = p.stats();
  EXPECT_EQ(stats.stages[0].failures, 10u);
  EXPECT_EQ(stats.failures, 10u);
  ASSERT_FALSE(stats.recent_failures.empty());
  const auto& last = stats.recent_failures.back();
  EXPECT_EQ(last.stage, "decode");
  EXPECT_EQ(last.message, "bad sample " + std::to_string(last.positions.front()));
}

TEST(Failure, CountBudgetExceededFailsThePipelineOnce) {
  auto p =
      PipelineBuilder()
          .add_source(iota(1000))
          .pipe(fail_on_multiples_of_ten, {.concurrency = 2, .name = "decode", .max_failures = 3})
          .add_sink(3)
          .build({.num_threads = 2, .log_stats_at_end = false});
  int delivered = 0;
  std::string what;
  try {
    for (auto& x : p) {
      (void)x;
      ++delivered;
    }
  } catch (const PipelineFailure& e) {
    what = e.what();
    EXPECT_GE(e.recent().size(), 4u);
    EXPECT_EQ(e.recent().front().stage, "decode");
  }
  EXPECT_NE(what.find("stage 'decode' exceeded its failure budget (at most 3 failures)"),
            std::string::npos)
      << what;
  EXPECT_NE(what.find("bad sample 0"), std::string::npos) << what;
  EXPECT_LT(delivered, 1000);
  EXPECT_FALSE(p.running());
}

TEST(Failure, RateBudgetWaitsForMinimumTasks) {
  // 10% fail; a 5% rate budget judged after 50 tasks trips, a 20% one never does.
  auto run = [](FailureBudget budget) {
    auto p = PipelineBuilder()
                 .add_source(iota(400))
                 .pipe(fail_on_multiples_of_ten, {.max_failures = budget})
                 .add_sink(3)
                 .build({.num_threads = 2, .log_stats_at_end = false});
    try {
      int n = 0;
      for (auto& x : p) n += x >= 0;
      return n;
    } catch (const PipelineFailure&) {
      return -1;
    }
  };
  EXPECT_EQ(run(FailureBudget::rate(0.05, 50)), -1);
  EXPECT_EQ(run(FailureBudget::rate(0.20, 50)), 360);
}

TEST(Failure, GlobalBudgetCountsAllStages) {
  auto p = PipelineBuilder()
               .add_source(iota(200))
               .pipe([](int x) {
                 if (x % 20 == 0) throw std::runtime_error("a");
                 return x;
               })
               .pipe([](int x) {
                 if (x % 20 == 1) throw std::runtime_error("b");
                 return x;
               })
               .add_sink(3)
               .build({.num_threads = 2, .max_failures = 5, .log_stats_at_end = false});
  EXPECT_THROW(
      {
        for (auto& x : p) (void)x;
      },
      PipelineFailure);
}

TEST(Failure, IoStageRetriesWithBackoff) {
  std::mutex mutex;
  std::map<int, int> attempts;
  auto flaky = [&](int x) {
    std::lock_guard lock(mutex);
    if (++attempts[x] < 3 && x % 2 == 0) throw std::runtime_error("transient");
    return x;
  };
  auto p = PipelineBuilder()
               .add_source(iota(20))
               .pipe(flaky, {.concurrency = 4,
                             .executor = Executor::io,
                             .name = "read",
                             .retry = {.attempts = 3, .backoff = std::chrono::milliseconds(1)}})
               .add_sink(3)
               .build({.num_threads = 2, .log_stats_at_end = false});
  int n = 0;
  for (auto& x : p) n += x >= 0;
  EXPECT_EQ(n, 20);
  EXPECT_EQ(p.stats().stages[0].retries, 20u);  // 10 even items, 2 retries each
  EXPECT_EQ(p.stats().stages[0].failures, 0u);
  EXPECT_EQ(attempts[4], 3);
  EXPECT_EQ(attempts[5], 1);
}

TEST(Failure, RetriesExhaustedCountsOneFailure) {
  auto p = PipelineBuilder()
               .add_source(iota(4))
               .pipe([](int x) -> int { throw std::runtime_error("gone " + std::to_string(x)); },
                     {.executor = Executor::io, .retry = {.attempts = 2}})
               .add_sink(3)
               .build({.num_threads = 1, .log_stats_at_end = false});
  int n = 0;
  for (auto& x : p) n += x;
  EXPECT_EQ(n, 0);
  EXPECT_EQ(p.stats().stages[0].failures, 4u);
  EXPECT_EQ(p.stats().stages[0].retries, 4u);
}

TEST(Failure, SourceExceptionFailsThePipelineWithPosition) {
  auto p = PipelineBuilder()
               .add_source([i = 0]() mutable -> std::optional<int> {
                 if (i == 7) throw std::runtime_error("listing broke");
                 return i++;
               })
               .add_sink(2)
               .build({.num_threads = 1, .log_stats_at_end = false});
  try {
    for (auto& x : p) (void)x;
    FAIL() << "no PipelineFailure";
  } catch (const PipelineFailure& e) {
    EXPECT_NE(std::string(e.what()).find("source threw after position 7: listing broke"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace brigade::actors
