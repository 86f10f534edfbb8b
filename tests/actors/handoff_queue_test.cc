#include "actors/detail/handoff_queue.h"

#include <gtest/gtest.h>

#include <thread>

#include "tests/actors/test_util.h"

namespace brigade::actors::detail {
namespace {

std::vector<Item> items(int first, int n) {
  std::vector<Item> v;
  for (int i = first; i < first + n; ++i) {
    v.push_back(Item{AnyValue::make(i), Positions(static_cast<std::uint64_t>(i))});
  }
  return v;
}

TEST(HandoffQueue, ReservesOnlyFreeSlotsAndArmsTheWakeUp) {
  HandoffQueue q(4);
  EXPECT_EQ(q.reserve(2), 4u);
  EXPECT_EQ(q.reserve(1), 0u);  // all reserved
  auto batch = items(0, 4);
  q.push(batch);
  EXPECT_TRUE(batch.empty());
  EXPECT_EQ(q.reserve(2), 0u);  // full: arms the notification
  Item out;
  bool notify = true;
  ASSERT_EQ(q.pop(out, std::nullopt, notify), NextStatus::item);
  EXPECT_EQ(out.value.get<int>(), 0);
  EXPECT_FALSE(notify);  // one free slot < 2
  ASSERT_EQ(q.pop(out, std::nullopt, notify), NextStatus::item);
  EXPECT_TRUE(notify);  // two free: wake the producer once
  ASSERT_EQ(q.pop(out, std::nullopt, notify), NextStatus::item);
  EXPECT_FALSE(notify);
  EXPECT_EQ(q.reserve(2), 3u);
}

TEST(HandoffQueue, TimeoutThenEndThenFailureOnce) {
  HandoffQueue q(2);
  Item out;
  bool notify = false;
  EXPECT_EQ(q.pop(out, std::chrono::milliseconds(5), notify), NextStatus::timeout);
  q.reserve(1);
  auto batch = items(7, 1);
  q.push(batch);
  q.close(std::make_exception_ptr(std::runtime_error("boom")));
  ASSERT_EQ(q.pop(out, std::nullopt, notify), NextStatus::item);  // queued items first
  EXPECT_THROW(q.pop(out, std::nullopt, notify), std::runtime_error);
  EXPECT_EQ(q.pop(out, std::nullopt, notify), NextStatus::end);  // thrown once
}

// A request that finds an item is ready; one that waits adds its wait, read from the
// queue's clock, to consumer_wait_s.
TEST(HandoffQueue, CountsReadyRequestsAndTheConsumersWait) {
  testing::ManualClock clock;
  HandoffQueue q(2, clock);
  q.reserve(1);
  auto batch = items(0, 1);
  q.push(batch);
  Item out;
  bool notify = false;
  ASSERT_EQ(q.pop(out, std::nullopt, notify), NextStatus::item);  // ready
  std::thread producer([&] {
    testing::until([&] { return q.stats().requests == 2; });  // the consumer waits
    clock.advance(std::chrono::milliseconds(7));
    q.reserve(1);
    auto later = items(1, 1);
    q.push(later);
  });
  ASSERT_EQ(q.pop(out, std::nullopt, notify), NextStatus::item);
  producer.join();
  const auto s = q.stats();
  EXPECT_EQ(s.requests, 2u);
  EXPECT_EQ(s.ready, 1u);
  EXPECT_DOUBLE_EQ(s.data_readiness, 0.5);
  EXPECT_DOUBLE_EQ(s.consumer_wait_s, 0.007);
}

TEST(HandoffQueue, ProducerAndConsumerThreadsNeverExceedCapacity) {
  constexpr int kItems = 20000;
  HandoffQueue q(8);
  std::atomic<bool> wake{false};
  std::thread producer([&] {
    int next = 0;
    while (next < kItems) {
      const auto n = static_cast<int>(q.reserve(4));
      if (n == 0) {
        while (!wake.exchange(false)) std::this_thread::yield();
        continue;
      }
      auto batch = items(next, std::min(n, kItems - next));
      next += static_cast<int>(batch.size());
      q.push(batch);
    }
    q.close();
  });
  int expected = 0;
  Item out;
  bool notify = false;
  while (q.pop(out, std::nullopt, notify) == NextStatus::item) {
    ASSERT_EQ(out.value.get<int>(), expected++);
    ASSERT_LE(q.stats().delivered, static_cast<std::uint64_t>(expected));
    if (notify) wake = true;
  }
  producer.join();
  EXPECT_EQ(expected, kItems);
  const auto s = q.stats();
  EXPECT_EQ(s.delivered, static_cast<std::uint64_t>(kItems));
  EXPECT_LE(s.ready, s.requests);
}

}  // namespace
}  // namespace brigade::actors::detail
