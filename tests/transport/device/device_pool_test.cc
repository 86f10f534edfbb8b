#include "transport/device/device_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <thread>

#include "tests/transport/device/device_test_util.h"
#include "transport/device/detail/device_cpu.h"

namespace brigade::transport {
namespace {

using detail::CpuDevice;
using Memory = BufferPool::Memory;
using namespace std::chrono_literals;

using test::still_waiting;

TEST(BufferPool, HandsOutAtMostMaxBuffersAndWaitsForAReturn) {
  auto device = std::make_shared<CpuDevice>();
  BufferPool pool(device, Memory::device, {.max_buffers = 2});
  auto a = pool.take(100);
  auto b = pool.take(100);
  EXPECT_EQ(pool.stats().buffers, 2u);
  EXPECT_EQ(pool.stats().in_use, 2u);
  auto third = std::async(std::launch::async, [&] { return pool.take(100); });
  EXPECT_TRUE(still_waiting(third));
  void* returned = a.memory.get();
  a.memory.reset();
  auto c = third.get();
  EXPECT_EQ(c.memory.get(), returned);
  EXPECT_EQ(pool.stats().buffers, 2u);
  EXPECT_EQ(pool.stats().waits, 1u);
  EXPECT_EQ(device->live_allocations(), 2);
}

TEST(BufferPool, AStopRequestEndsTheWait) {
  auto device = std::make_shared<CpuDevice>();
  BufferPool pool(device, Memory::pinned_host, {.max_buffers = 1});
  auto held = pool.take(10);
  std::stop_source stop;
  auto waiting = std::async(std::launch::async, [&] { return pool.take(10, stop.get_token()); });
  EXPECT_TRUE(still_waiting(waiting));
  stop.request_stop();
  EXPECT_THROW(waiting.get(), StopRequested);
  EXPECT_EQ(pool.stats().buffers, 1u);
}

// The copy stage's rule: a pinned buffer goes back to decoding only once the copy that
// reads it has completed.
TEST(BufferPool, HostBufferIsReusedOnlyAfterTheCopyReadingItCompletes) {
  auto device = std::make_shared<CpuDevice>();
  BufferPool pool(device, Memory::pinned_host, {.max_buffers = 1});
  auto target = device->allocate_device(6);
  auto buffer = pool.take(6).memory;
  std::memcpy(buffer.get(), "first", 6);
  device->pause();
  device->copy_to_device(target.get(), buffer.get(), 6);
  EXPECT_TRUE(BufferPool::fence(buffer, device->record()));
  void* address = buffer.get();
  buffer.reset();  // dropped while its copy is queued
  auto next = std::async(std::launch::async, [&] { return pool.take(6).memory; });
  EXPECT_TRUE(still_waiting(next));
  device->resume();
  auto reused = next.get();
  EXPECT_EQ(reused.get(), address);
  std::memcpy(reused.get(), "later", 6);
  device->synchronize();
  EXPECT_STREQ(static_cast<const char*>(target.get()), "first");
}

// An event whose query reads the pool's figures from another thread: that needs the
// pool's lock, so it returns only if fences are queried with that lock released (issue
// 22: the cudaEventQuery sweep ran under the pool-wide lock, stalling every thread that
// took or returned a buffer behind a driver call). Before the fix this test hung.
class EventQueryingThePool final : public Event {
 public:
  explicit EventQueryingThePool(const BufferPool& pool) : pool_(pool) {}
  bool ready() const noexcept override {
    ++queries;
    auto figures = std::async(std::launch::async, [this] { return pool_.stats(); });
    return figures.get().buffers == 1;
  }
  void wait() const override {}
  mutable std::atomic<int> queries{0};

 private:
  const BufferPool& pool_;
};

TEST(BufferPool, FencesAreQueriedWithThePoolUnlocked) {
  auto device = std::make_shared<CpuDevice>();
  BufferPool pool(device, Memory::pinned_host, {.max_buffers = 1});
  auto buffer = pool.take(64).memory;
  void* address = buffer.get();
  auto fence = std::make_shared<EventQueryingThePool>(pool);
  EXPECT_TRUE(BufferPool::fence(buffer, fence));
  buffer.reset();
  auto again = pool.take(64).memory;
  EXPECT_EQ(again.get(), address);
  EXPECT_GE(fence->queries.load(), 1);
}

TEST(BufferPool, DeviceBufferComesBackWithItsFencesForTheQueueToWaitOn) {
  auto device = std::make_shared<CpuDevice>();
  BufferPool pool(device, Memory::device, {.max_buffers = 1});
  auto buffer = pool.take(64);
  EXPECT_TRUE(buffer.fences.empty());
  device->pause();
  auto pending = device->record();
  BufferPool::fence(buffer.memory, pending);
  buffer.memory.reset();
  auto again = pool.take(64);  // no host wait: the fence is handed over
  ASSERT_EQ(again.fences.size(), 1u);
  EXPECT_EQ(again.fences[0], pending);
  EXPECT_FALSE(again.fences[0]->ready());
  device->resume();
}

TEST(BufferPool, ReusesTheSmallestFitAndFreesOneToMakeRoom) {
  auto device = std::make_shared<CpuDevice>();
  BufferPool pool(device, Memory::device, {.max_buffers = 2});
  auto small = pool.take(100);
  auto large = pool.take(1000);
  void* small_address = small.memory.get();
  small.memory.reset();
  large.memory.reset();
  auto fit = pool.take(50);
  EXPECT_EQ(fit.memory.get(), small_address);
  auto bigger = pool.take(5000);  // full; the free 1000-byte buffer cannot hold it
  EXPECT_EQ(pool.stats().buffers, 2u);
  EXPECT_EQ(pool.stats().bytes, 5100u);
  EXPECT_EQ(device->live_allocations(), 2);
}

TEST(BufferPool, AllocatorBacksTensorsWhoseViewsCanBeFenced) {
  auto device = std::make_shared<CpuDevice>();
  BufferPool pool(device, Memory::pinned_host, {.max_buffers = 2});
  auto t = media::Tensor::empty(media::DType::uint8, {4, 8, 8, 3}, pool.allocator());
  EXPECT_EQ(pool.stats().in_use, 1u);
  auto view = t[2];
  t = {};
  EXPECT_EQ(pool.stats().in_use, 1u);  // the view holds the buffer
  EXPECT_TRUE(BufferPool::fence(view.owner(), device->record()));
  view = {};
  EXPECT_EQ(pool.stats().in_use, 0u);
  auto heap = media::Tensor::empty(media::DType::uint8, {4});
  EXPECT_FALSE(BufferPool::fence(heap.owner(), device->record()));
  BufferPool device_pool(device, Memory::device, {});
  EXPECT_THROW(device_pool.allocator(), std::logic_error);
}

TEST(BufferPool, BuffersOutliveThePool) {
  auto device = std::make_shared<CpuDevice>();
  std::shared_ptr<void> kept;
  {
    BufferPool pool(device, Memory::device, {.max_buffers = 4});
    kept = pool.take(128).memory;
    auto dropped = pool.take(128).memory;
  }
  EXPECT_EQ(device->live_allocations(), 1);  // the pool freed its free buffer
  std::memset(kept.get(), 0, 128);
  kept.reset();
  EXPECT_EQ(device->live_allocations(), 0);
}

TEST(BufferPool, ReturnsAllMemoryUnderConcurrentUse) {
  auto device = std::make_shared<CpuDevice>();
  {
    BufferPool pool(device, Memory::pinned_host, {.max_buffers = 3});
    std::vector<std::thread> threads;
    std::atomic<int> max_seen{0};
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 200; ++i) {
          auto b = pool.take(64 + 64 * ((i + t) % 3));
          std::memset(b.memory.get(), t, 64);
          BufferPool::fence(b.memory, device->record());
          max_seen = std::max<int>(max_seen, static_cast<int>(pool.stats().buffers));
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_LE(max_seen.load(), 3);
  }
  device->synchronize();
  EXPECT_EQ(device->live_allocations(), 0);
}

}  // namespace
}  // namespace brigade::transport
