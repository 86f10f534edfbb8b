#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

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
  EXPECT_EQ(last.message(), "bad sample " + std::to_string(last.positions.front()));
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
    if (++attempts[x] < 3 && x % 2 == 0) {
      throw std::system_error(std::make_error_code(std::errc::timed_out), "transient");
    }
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
               .pipe(
                   [](int x) -> int {
                     throw std::system_error(std::make_error_code(std::errc::connection_reset),
                                             "gone " + std::to_string(x));
                   },
                   {.executor = Executor::io, .retry = {.attempts = 2}})
               .add_sink(3)
               .build({.num_threads = 1, .log_stats_at_end = false});
  int n = 0;
  for (auto& x : p) n += x;
  EXPECT_EQ(n, 0);
  EXPECT_EQ(p.stats().stages[0].failures, 4u);
  EXPECT_EQ(p.stats().stages[0].retries, 4u);
}

TEST(Failure, OnlyTransientErrorsAreRetried) {
  std::atomic<int> calls{0};
  auto p =
      PipelineBuilder()
          .add_source(iota(6))
          .pipe(
              [&](int x) -> int {
                ++calls;
                if (x % 2) {
                  throw std::system_error(std::make_error_code(std::errc::illegal_byte_sequence),
                                          "corrupt " + std::to_string(x));
                }
                throw std::runtime_error("no code " + std::to_string(x));
              },
              {.executor = Executor::io,
               .retry = {.attempts = 5, .backoff = std::chrono::milliseconds(1)}})
          .add_sink(3)
          .build({.num_threads = 1, .log_stats_at_end = false});
  for (auto& x : p) (void)x;
  EXPECT_EQ(calls.load(), 6);  // each read once: neither a corrupt file nor an unknown error
  EXPECT_EQ(p.stats().stages[0].retries, 0u);
  EXPECT_EQ(p.stats().stages[0].failures, 6u);
  const auto recent = p.stats().recent_failures;
  ASSERT_FALSE(recent.empty());
  EXPECT_TRUE(std::any_of(recent.begin(), recent.end(), [](const SampleFailure& r) {
    return r.code == std::errc::illegal_byte_sequence;
  }));
}

TEST(Failure, RetryPredicateDecidesWhatIsRetried) {
  std::mutex mutex;
  std::map<int, int> attempts;
  auto p = PipelineBuilder()
               .add_source(iota(3))
               .pipe(
                   [&](int x) -> int {
                     std::lock_guard lock(mutex);
                     if (++attempts[x] == 1) throw std::runtime_error("flaky");
                     return x;
                   },
                   {.executor = Executor::io,
                    .retry = {.attempts = 2,
                              .retryable =
                                  [](const std::exception& e) {
                                    return std::string(e.what()) == "flaky";
                                  }}})
               .add_sink(3)
               .build({.num_threads = 1, .log_stats_at_end = false});
  int n = 0;
  for (auto& x : p) n += x >= 0;
  EXPECT_EQ(n, 3);
  EXPECT_EQ(p.stats().stages[0].retries, 3u);
  EXPECT_EQ(p.stats().stages[0].failures, 0u);
}

TEST(Failure, TransientConditions) {
  EXPECT_TRUE(is_transient(std::make_error_code(std::errc::timed_out)));
  EXPECT_TRUE(is_transient(std::make_error_code(std::errc::resource_unavailable_try_again)));
  EXPECT_FALSE(is_transient(std::make_error_code(std::errc::no_such_file_or_directory)));
  EXPECT_FALSE(is_transient(std::make_error_code(std::errc::illegal_byte_sequence)));
  EXPECT_FALSE(is_transient({}));
}

// A stage reports one sample of its (aggregated) input failed and passes the rest
// on: the engine counts it in the stage's failures, the budget, the hooks and the
// recent causes, and the position is committed with the delivered batch.
TEST(Failure, ReportedSampleFailuresAreCountedByTheEngine) {
  struct Hook : TaskHook {
    std::atomic<int> failed{0};
    void after_task(const TaskInfo&, std::chrono::nanoseconds, TaskOutcome outcome,
                    std::string_view error) override {
      if (outcome == TaskOutcome::failed && error.find("bad sample") != std::string_view::npos) {
        ++failed;
      }
    }
  };
  auto hook = std::make_shared<Hook>();
  auto p = PipelineBuilder()
               .add_source(iota(12))
               .aggregate(4)
               .pipe(
                   [](std::vector<int> batch, TaskContext& task) {
                     std::vector<int> good;
                     for (std::size_t i = 0; i < batch.size(); ++i) {
                       if (batch[i] % 5 == 3) {
                         task.fail(task.positions()[i], "bad sample " + std::to_string(batch[i]),
                                   std::make_error_code(std::errc::illegal_byte_sequence));
                       } else {
                         good.push_back(batch[i]);
                       }
                     }
                     return good;
                   },
                   {.name = "decode"})
               .add_sink(3)
               .build({.num_threads = 2, .hooks = {hook}, .log_stats_at_end = false});
  std::vector<int> seen;
  for (auto& b : p) seen.insert(seen.end(), b.begin(), b.end());
  EXPECT_EQ(seen.size(), 10u);  // 3 and 8 failed
  const auto stats = p.stats();
  EXPECT_EQ(stats.stages[1].failures, 2u);
  EXPECT_EQ(stats.failures, 2u);
  EXPECT_EQ(hook->failed.load(), 2);
  ASSERT_EQ(stats.recent_failures.size(), 2u);
  EXPECT_EQ(stats.recent_failures[0].stage, "decode");
  EXPECT_EQ(stats.recent_failures[0].code, std::errc::illegal_byte_sequence);
  EXPECT_EQ(p.committed().watermark, 12u);
}

TEST(Failure, ReportedSampleFailuresSpendTheBudget) {
  auto p = PipelineBuilder()
               .add_source(iota(40))
               .pipe(
                   [](int x, TaskContext& task) {
                     if (x % 10 == 0) task.fail(task.positions().front(), "bad");
                     return x;
                   },
                   {.name = "check"})
               .add_sink(3)
               .build({.num_threads = 1, .max_failures = 2, .log_stats_at_end = false});
  EXPECT_THROW(
      {
        for (auto& x : p) (void)x;
      },
      PipelineFailure);
}

// The budget is the pipeline's, over all its runs (epochs), in either output order.
TEST(Failure, BudgetCountsOverEveryRun) {
  for (const auto order : {Order::input, Order::completion}) {
    auto p = PipelineBuilder()
                 .add_source(iota(10))
                 .pipe(
                     [](int x) {
                       if (x == 3) throw std::runtime_error("bad");
                       return x;
                     },
                     {.concurrency = 2, .output_order = order})
                 .add_sink(3)
                 .build({.num_threads = 2, .max_failures = 2, .log_stats_at_end = false});
    for (int epoch = 0; epoch < 2; ++epoch) {
      for (auto& x : p) (void)x;  // one failure per epoch: within the budget
    }
    EXPECT_THROW(
        {
          for (auto& x : p) (void)x;  // the third epoch's failure is the third in all
        },
        PipelineFailure);
  }
}

// The record a stage gives fail() reaches the statistics and the consumer's
// PipelineFailure as fields (stage, positions, id, path, code), and the message names
// the sample as "sample <id> (<path>): <cause>".
TEST(Failure, ReportedSampleKeepsItsIdentityEndToEnd) {
  auto p = PipelineBuilder()
               .add_source(iota(10))
               .pipe(
                   [](int x, TaskContext& task) {
                     if (x == 3) {
                       task.fail(task.positions().front(),
                                 SampleFailure{.id = 103,
                                               .path = "/data/three.jpg",
                                               .code = std::make_error_code(std::errc::bad_message),
                                               .cause = "corrupt"});
                     }
                     return x;
                   },
                   {.name = "decode"})
               .add_sink(3)
               .build({.num_threads = 1, .max_failures = 0, .log_stats_at_end = false});
  try {
    for (auto& x : p) (void)x;
    FAIL() << "no PipelineFailure";
  } catch (const PipelineFailure& e) {
    ASSERT_EQ(e.recent().size(), 1u);
    const auto& r = e.recent().front();
    EXPECT_EQ(r.stage, "decode");
    EXPECT_EQ(r.positions, Positions(3));
    ASSERT_TRUE(r.id.has_value());
    EXPECT_EQ(*r.id, 103u);
    EXPECT_EQ(r.path, "/data/three.jpg");
    EXPECT_EQ(r.code, std::errc::bad_message);
    EXPECT_EQ(r.cause, "corrupt");
    EXPECT_EQ(r.message(), "sample 103 (/data/three.jpg): corrupt");
    EXPECT_NE(
        std::string(e.what()).find("source position 3: sample 103 (/data/three.jpg): corrupt"),
        std::string::npos)
        << e.what();
  }
  const auto recent = p.stats().recent_failures;
  ASSERT_EQ(recent.size(), 1u);
  EXPECT_EQ(recent[0].id, std::optional<std::uint64_t>(103));
  EXPECT_EQ(recent[0].path, "/data/three.jpg");
}

// A failure without an identity (a thrown error) has no id: its message is the cause.
TEST(Failure, ThrownFailureHasNoSampleIdentity) {
  auto p = PipelineBuilder()
               .add_source(iota(3))
               .pipe(fail_on_multiples_of_ten, {.name = "decode"})
               .add_sink(3)
               .build({.num_threads = 1, .log_stats_at_end = false});
  for (auto& x : p) (void)x;
  const auto recent = p.stats().recent_failures;
  ASSERT_EQ(recent.size(), 1u);
  EXPECT_FALSE(recent[0].id.has_value());
  EXPECT_EQ(recent[0].message(), "bad sample 0");
}

// may_retry() is true while the engine would run the task again after a retryable
// throw, and false on the last attempt: a read can throw a transient error while
// retries remain and report it as the sample's failure (its item goes on) at the end.
TEST(Failure, MayRetryIsFalseOnTheLastAttempt) {
  std::mutex mutex;
  std::map<int, std::vector<bool>> seen;
  auto read = [&](int x, TaskContext& task) {
    {
      std::lock_guard lock(mutex);
      seen[x].push_back(task.may_retry());
    }
    if (x == 2) {  // always unavailable
      const auto code = std::make_error_code(std::errc::resource_unavailable_try_again);
      if (task.may_retry()) throw std::system_error(code, "busy");
      task.fail(task.positions().front(), SampleFailure{.id = 2, .code = code, .cause = "busy"});
    }
    return x;
  };
  auto p = PipelineBuilder()
               .add_source(iota(4))
               .pipe(read, {.executor = Executor::io,
                            .name = "read",
                            .retry = {.attempts = 3, .backoff = std::chrono::milliseconds(0)}})
               .add_sink(3)
               .build({.num_threads = 1, .log_stats_at_end = false});
  std::vector<int> delivered;
  for (auto& x : p) delivered.push_back(x);
  EXPECT_EQ(delivered, (std::vector<int>{0, 1, 2, 3}));  // the failed one's item goes on
  EXPECT_EQ(seen[0], (std::vector<bool>{true}));
  EXPECT_EQ(seen[2], (std::vector<bool>{true, true, false}));
  const auto stats = p.stats();
  EXPECT_EQ(stats.stages[0].retries, 2u);
  EXPECT_EQ(stats.stages[0].failures, 1u);
  ASSERT_EQ(stats.recent_failures.size(), 1u);
  EXPECT_EQ(stats.recent_failures[0].code, std::errc::resource_unavailable_try_again);
}

// Without a retry policy there is no second attempt to announce.
TEST(Failure, MayRetryIsFalseWithoutARetryPolicy) {
  std::atomic<int> retryable{0};
  auto p = PipelineBuilder()
               .add_source(iota(5))
               .pipe(
                   [&](int x, TaskContext& task) {
                     retryable += task.may_retry() ? 1 : 0;
                     return x;
                   },
                   {.executor = Executor::io})
               .add_sink(3)
               .build({.num_threads = 1, .log_stats_at_end = false});
  for (auto& x : p) (void)x;
  EXPECT_EQ(retryable.load(), 0);
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
