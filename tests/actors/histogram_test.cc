#include "actors/detail/histogram.h"

#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "actors/detail/stage_counters.h"
#include "tests/actors/test_util.h"

namespace brigade::actors::detail {
namespace {

TEST(DurationHistogram, QuantilesWithinSixPercent) {
  DurationHistogram h;
  for (std::uint64_t ns = 1; ns <= 100000; ++ns) h.record(ns * 1000);
  EXPECT_EQ(h.count(), 100000u);
  EXPECT_NEAR(h.quantile_ns(0.5), 50e6, 0.06 * 50e6);
  EXPECT_NEAR(h.quantile_ns(0.99), 99e6, 0.06 * 99e6);
  EXPECT_NEAR(h.mean_ns(), 50.0005e6, 1e3);
  EXPECT_EQ(DurationHistogram().quantile_ns(0.5), 0.0);
}

TEST(DurationHistogram, SmallAndHugeValues) {
  DurationHistogram h;
  h.record(0);
  h.record(3);
  h.record(~std::uint64_t{0} >> 1);
  EXPECT_LE(h.quantile_ns(0.3), 1.0);
  EXPECT_GT(h.quantile_ns(1.0), 1e18);
}

TEST(StageCounters, SnapshotsWhileTheCoordinatorWrites) {
  StageCounters c("s", "pipe", 2, 6, *Clock::steady());
  std::thread writer([&] {
    for (int i = 0; i < 20000; ++i) {
      c.record_task(1000 + i, i % 10 ? TaskOutcome::ok : TaskOutcome::failed, 0, i % 10 ? 0 : 1);
      c.record_outputs(1);
      c.advance(i % 6, i % 3 == 0, i % 5 == 0);
    }
  });
  std::uint64_t last = 0;
  for (int i = 0; i < 200; ++i) {
    const auto s = c.snapshot();
    EXPECT_GE(s.tasks, last);
    last = s.tasks;
    EXPECT_LE(s.occupancy, 1.0 + 1e-9);
  }
  writer.join();
  const auto s = c.snapshot();
  EXPECT_EQ(s.tasks, 20000u);
  EXPECT_EQ(s.failures, 2000u);
  EXPECT_EQ(s.outputs, 20000u);
}

// Each state counts for the time until the next advance(), read from the clock.
TEST(StageCounters, TimeIntegralsFollowTheClock) {
  using std::chrono::milliseconds;
  testing::ManualClock clock;
  StageCounters c("s", "pipe", 1, 4, clock);
  c.advance(2, /*starved=*/true, /*backpressured=*/false);
  clock.advance(milliseconds(10));
  c.advance(4, false, true);
  clock.advance(milliseconds(30));
  c.record_outputs(8);
  const auto s = c.snapshot();  // the open interval counts in the current state
  EXPECT_DOUBLE_EQ(s.elapsed_s, 0.040);
  EXPECT_DOUBLE_EQ(s.starved_s, 0.010);
  EXPECT_DOUBLE_EQ(s.backpressured_s, 0.030);
  EXPECT_DOUBLE_EQ(s.occupancy, (2 * 0.010 + 4 * 0.030) / (0.040 * 4));
  EXPECT_DOUBLE_EQ(s.items_per_s, 200.0);
}

}  // namespace
}  // namespace brigade::actors::detail
