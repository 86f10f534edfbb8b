#include "transport/detail/device_cpu.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

namespace brigade::transport::detail {
namespace {

TEST(CpuDevice, RunsWorkInSubmissionOrderAfterTheCallReturns) {
  auto device = std::make_shared<CpuDevice>();
  device->pause();
  std::vector<int> order;
  for (int i = 0; i < 100; ++i) device->submit([&order, i] { order.push_back(i); });
  auto event = device->record();
  EXPECT_FALSE(event->ready());  // nothing ran: the calls did not wait
  EXPECT_TRUE(order.empty());
  device->resume();
  event->wait();
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
}

TEST(CpuDevice, EventsCompleteInOrder) {
  auto device = std::make_shared<CpuDevice>();
  device->pause();
  std::vector<std::shared_ptr<Event>> events;
  for (int i = 0; i < 10; ++i) events.push_back(device->record());
  for (auto& e : events) EXPECT_FALSE(e->ready());
  device->resume();
  events[5]->wait();
  for (int i = 0; i <= 5; ++i) EXPECT_TRUE(events[i]->ready());
}

TEST(CpuDevice, CopiesReadTheSourceWhenTheyRunNotWhenQueued) {
  auto device = std::make_shared<CpuDevice>();
  auto src = device->allocate_host(4);
  auto dst = device->allocate_device(4);
  std::memcpy(src.get(), "old", 4);
  device->pause();
  device->copy_to_device(dst.get(), src.get(), 4);
  auto done = device->record();
  std::memcpy(src.get(), "new", 4);  // allowed only because the test knows it is paused
  device->resume();
  done->wait();
  EXPECT_STREQ(static_cast<const char*>(dst.get()), "new");
}

TEST(CpuDevice, AFailedTaskFailsTheNextEventOnly) {
  auto device = std::make_shared<CpuDevice>();
  device->submit([] { throw std::runtime_error("kernel failed"); });
  auto failed = device->record();
  auto later = device->record();
  EXPECT_THROW(
      {
        try {
          failed->wait();
        } catch (const std::runtime_error& e) {
          EXPECT_STREQ(e.what(), "kernel failed");
          throw;
        }
      },
      std::runtime_error);
  EXPECT_NO_THROW(later->wait());
}

TEST(CpuDevice, WaitForOrdersAfterAnotherDevicesEvent) {
  auto a = std::make_shared<CpuDevice>();
  auto b = std::make_shared<CpuDevice>();
  a->pause();
  std::atomic<bool> a_ran{false};
  a->submit([&] { a_ran = true; });
  auto a_done = a->record();
  b->wait_for(a_done);
  std::atomic<bool> b_saw_a{false};
  b->submit([&] { b_saw_a = a_ran.load(); });
  auto b_done = b->record();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(b_done->ready());  // b's queue waits for a's event
  a->resume();
  b_done->wait();
  EXPECT_TRUE(b_saw_a);
}

TEST(CpuDevice, MemoryOutlivesTheDeviceAndIsCounted) {
  std::shared_ptr<void> kept;
  long live = 0;
  {
    auto device = std::make_shared<CpuDevice>();
    kept = device->allocate_device(1 << 20);
    auto other = device->allocate_host(10);
    EXPECT_EQ(device->live_allocations(), 2);
    other.reset();
    EXPECT_EQ(device->live_allocations(), 1);
    live = device->live_allocations();
  }
  EXPECT_EQ(live, 1);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(kept.get()) % 256, 0u);
  std::memset(kept.get(), 1, 1 << 20);  // still valid (ASan checks it)
}

TEST(CpuDevice, DestructionRunsWhatIsQueued) {
  std::atomic<int> ran{0};
  {
    auto device = std::make_shared<CpuDevice>();
    device->pause();
    for (int i = 0; i < 10; ++i) device->submit([&] { ++ran; });
  }
  EXPECT_EQ(ran.load(), 10);
}

// The last reference dropped by a task on the worker: the device is destroyed there, the
// worker runs what is still queued and ends without touching the destroyed device.
TEST(CpuDevice, ATaskDroppingTheLastReferenceLetsTheWorkerFinishTheQueue) {
  for (int round = 0; round < 50; ++round) {
    auto ran = std::make_shared<std::atomic<int>>(0);
    auto done = std::make_shared<std::promise<void>>();
    auto finished = done->get_future();
    {
      auto device = std::make_shared<CpuDevice>();
      device->pause();
      auto* raw = device.get();
      raw->submit([keep = device, ran] { ++*ran; });  // holds the device until it has run
      auto event = raw->record();
      for (int i = 0; i < 5; ++i) raw->submit([ran] { ++*ran; });
      raw->submit([ran, done] {
        ++*ran;
        done->set_value();
      });
      device.reset();  // only the first task's capture holds it now
      raw->resume();
      event->wait();
    }
    ASSERT_EQ(finished.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    EXPECT_EQ(ran->load(), 7);
  }
}

}  // namespace
}  // namespace brigade::transport::detail
