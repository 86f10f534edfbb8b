#include <gtest/gtest.h>

#include "actors/pipeline.h"
#include "tests/actors/test_util.h"

namespace brigade::actors {
namespace {

using testing::Counted;

// Runs n instrumented items through maps (and optionally an aggregate) while the
// consumer, for its first `slow` items, reads only once the line has backed up behind
// it (more than half the bound alive), then drains.
std::pair<std::int64_t, std::size_t> max_live(std::int64_t n, bool with_aggregate) {
  Counted::reset();
  auto source = [i = std::int64_t{0}, n]() mutable -> std::optional<Counted> {
    if (i >= n) return std::nullopt;
    return Counted(i++);
  };
  auto map = [](Counted c) { return c; };
  auto map_batch = [](std::vector<Counted> batch) { return batch; };
  auto base = PipelineBuilder()
                  .add_source(source)
                  .pipe(map, {.concurrency = 3, .executor = Executor::io, .name = "read"})
                  .pipe(map, {.concurrency = 2, .output_order = Order::completion})
                  .pipe(map, {.concurrency = 4, .queue_capacity = 3});
  const BuildOptions options{.num_threads = 2, .log_stats_at_end = false};
  std::int64_t seen = 0;
  auto consume = [&](auto& pipeline, int slow) {
    const auto backed_up = static_cast<std::int64_t>(pipeline.item_bound() / 2 + 1);
    for (auto& item : pipeline) {
      (void)item;
      if (seen++ < slow) testing::until([&] { return Counted::live.load() >= backed_up; });
    }
  };
  if (with_aggregate) {
    auto p = std::move(base).aggregate(4).pipe(map_batch).add_sink(2).build(options);
    consume(p, 40);
    EXPECT_EQ(seen, (n + 3) / 4);
    return {Counted::max_live.load(), p.item_bound()};
  }
  auto p = std::move(base).add_sink(3).build(options);
  consume(p, 150);
  EXPECT_EQ(seen, n);
  return {Counted::max_live.load(), p.item_bound()};
}

TEST(MemoryBound, SlowConsumerNeverExceedsTheDocumentedBound) {
  const auto [small, bound] = max_live(1'000, false);
  const auto [large, bound2] = max_live(100'000, false);
  EXPECT_EQ(bound, bound2);
  // 3 + 6, 2 + 4, 4 + 3 per stage, buffer 3, the consumer's own item.
  EXPECT_EQ(bound, 9u + 6u + 7u + 3u + 1u);
  // The peak does not grow with the epoch: both stay within the same bound, which the
  // line came close to while it backed up.
  EXPECT_LE(small, static_cast<std::int64_t>(bound));
  EXPECT_LE(large, static_cast<std::int64_t>(bound));
  EXPECT_GT(small, static_cast<std::int64_t>(bound) / 2) << "the slow consumer backs the line up";
  EXPECT_GT(large, static_cast<std::int64_t>(bound) / 2) << "the slow consumer backs the line up";
}

TEST(MemoryBound, AggregatedBatchesCountTheirItems) {
  const auto [small, bound] = max_live(1'000, true);
  const auto [large, bound2] = max_live(40'000, true);
  EXPECT_EQ(bound, bound2);
  EXPECT_LE(small, static_cast<std::int64_t>(bound));
  EXPECT_LE(large, static_cast<std::int64_t>(bound));
}

}  // namespace
}  // namespace brigade::actors
