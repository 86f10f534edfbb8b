#include "transport/device/detail/device_cpu.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
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

// FAULTS, ordered_allocations: device memory exists once its queue reaches the
// allocation; a second queue (open_queue) that uses it earlier fails, and one that
// waits for an event recorded after the allocation does not.
TEST(CpuDevice, OrderedAllocationsFailAnotherQueuesUseBeforeTheAllocationRan) {
  auto device = std::make_shared<CpuDevice>(CpuFaults{.ordered_allocations = true});
  auto copies = device->open_queue();
  std::vector<std::uint8_t> host(64, 7);
  device->pause();
  auto early = device->allocate_device(64);
  copies->copy_to_device(early.get(), host.data(), 64);
  // The event outlives the handler: the error it carries is then released after the
  // handler's reads on this thread or through the event's shared state, an order
  // ThreadSanitizer sees (exception_ptr's own count is in the uninstrumented libstdc++:
  // when the worker dropped the last reference, TSan reported the handler's read of the
  // error as racing with its deletion).
  const auto recorded = copies->record();
  try {
    recorded->wait();
    ADD_FAILURE() << "a use before the allocation ran went unseen";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.code(), "use-before-allocation");
  }
  auto ordered = device->allocate_device(64);
  copies->wait_for(device->record());
  copies->copy_to_device(ordered.get(), host.data(), 64);
  auto done = copies->record();
  EXPECT_FALSE(done->ready());
  device->resume();
  EXPECT_NO_THROW(done->wait());
  EXPECT_EQ(static_cast<std::uint8_t*>(ordered.get())[63], 7);
  EXPECT_EQ(device->live_allocations(), 2) << "one count for both queues";
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
  EXPECT_FALSE(b_done->ready());  // b's queue waits for a's event: a is paused
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

// -- FAULTS: the CPU device failing as a GPU does ---------------------------------------

// The code of the DeviceError that `f` throws ("" if it throws none).
template <class F>
std::string device_error_of(F&& f) {
  try {
    f();
  } catch (const DeviceError& e) {
    return e.code();
  }
  return "";
}

TEST(CpuDevice, AStickyErrorAfterNEventsBreaksEveryLaterCallAndEveryEvent) {
  auto device = std::make_shared<CpuDevice>(CpuFaults{.sticky_after_events = 2});
  auto a = device->allocate_device(16);
  auto first = device->record();
  auto second = device->record();
  second->wait();
  EXPECT_FALSE(device->broken());
  std::atomic<bool> ran{false};
  auto third = device->record();  // the device breaks here
  device->submit([&] { ran = true; });
  EXPECT_EQ(device_error_of([&] { third->wait(); }), "sticky-error");
  EXPECT_TRUE(device->broken());
  for (auto call : std::vector<std::function<void()>>{
           [&] { device->allocate_device(16); }, [&] { device->allocate_host(16); },
           [&] { device->copy_to_device(a.get(), a.get(), 16); },
           [&] { device->copy_to_host(a.get(), a.get(), 16); }, [&] { device->record(); },
           [&] { device->record_on(nullptr); }, [&] { device->wait_for(first); },
           [&] { device->synchronize(); }}) {
    EXPECT_EQ(device_error_of(call), "sticky-error");
  }
  EXPECT_EQ(device_error_of([&] { first->wait(); }), "sticky-error");  // as CUDA: all events
  EXPECT_TRUE(first->ready());  // Event::ready never throws: an error counts as complete
  EXPECT_TRUE(third->ready());
  device.reset();  // runs (skips) what is queued
  EXPECT_FALSE(ran);
}

TEST(CpuDevice, AFreeWaitsForTheWorkQueuedBeforeIt) {
  auto device = std::make_shared<CpuDevice>(CpuFaults{.free_waits_for_work = true});
  auto memory = device->allocate_device(16);
  device->allocate_host(8).reset();  // nothing queued: does not wait
  EXPECT_EQ(device->frees_that_waited(), 0);
  device->pause();
  device->copy_to_device(memory.get(), memory.get(), 16);
  auto freed = std::async(std::launch::async, [&] { memory.reset(); });
  while (device->frees_that_waited() == 0) std::this_thread::yield();
  EXPECT_EQ(device->live_allocations(), 1);  // still waiting for the copy
  device->resume();
  freed.get();
  EXPECT_EQ(device->live_allocations(), 0);
  EXPECT_EQ(device->allocations(), 2);
}

TEST(CpuDevice, ASlowCopyHoldsTheQueue) {
  const auto delay = std::chrono::milliseconds(20);
  auto device = std::make_shared<CpuDevice>(CpuFaults{.copy_delay = delay});
  auto a = device->allocate_device(16);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i) device->copy_to_device(a.get(), a.get(), 16);
  device->synchronize();
  EXPECT_GE(std::chrono::steady_clock::now() - start, 3 * delay);
}

}  // namespace
}  // namespace brigade::transport::detail
