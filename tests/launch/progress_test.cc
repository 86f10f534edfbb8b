#include "launch/progress.h"

#include <gtest/gtest.h>

namespace brigade::launch {
namespace {

TEST(ProgressReporter, BarShowsRateEtaAndFailures) {
  const auto bar = ProgressReporter::format_bar(
      {.samples = 500, .expected = 1000, .failed = 2, .seconds = 2.0}, 10);
  EXPECT_EQ(bar, "[#####.....] 500/1000  50% 250 samples/s ETA 00:02 failed 2");
}

TEST(ProgressReporter, UnknownEtaBeforeTheFirstSample) {
  const auto bar =
      ProgressReporter::format_bar({.samples = 0, .expected = 10, .failed = 0, .seconds = 0.0}, 4);
  EXPECT_EQ(bar, "[....] 0/10   0% 0 samples/s ETA --:-- failed 0");
}

}  // namespace
}  // namespace brigade::launch
