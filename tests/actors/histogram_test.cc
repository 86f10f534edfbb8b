#include "actors/detail/histogram.h"

#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "actors/detail/stage_counters.h"

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
  StageCounters c("s", "pipe", 2, 6);
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

}  // namespace
}  // namespace brigade::actors::detail
