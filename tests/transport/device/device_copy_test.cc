#include "transport/device/device_copy.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <future>
#include <numeric>
#include <vector>

#include "actors/pipeline.h"
#include "tests/transport/device/device_test_util.h"
#include "transport/device/detail/device_cpu.h"

namespace brigade::transport {
namespace {

using detail::CpuDevice;
using media::DType;
using media::Tensor;
using namespace std::chrono_literals;

using test::still_waiting;

// A uint8 [2, 4, 4, 3] batch from `pool` whose bytes are value, value + 1, ...
Tensor host_batch(BufferPool& pool, int value) {
  auto t = Tensor::empty(DType::uint8, {2, 4, 4, 3}, pool.allocator());
  auto* p = t.data_as<std::uint8_t>();
  for (std::size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<std::uint8_t>(value + i);
  return t;
}

std::vector<std::uint8_t> bytes_of(const DeviceBatch& b) {  // CPU device: host memory
  const auto* p = b.data_as<const std::uint8_t>();
  return {p, p + b.nbytes()};
}
std::vector<std::uint8_t> bytes_of(const Tensor& t) {
  return {t.data_as<const std::uint8_t>(), t.data_as<const std::uint8_t>() + t.nbytes()};
}

struct Fixture {
  std::shared_ptr<CpuDevice> device = std::make_shared<CpuDevice>();
  BufferPool host{device, BufferPool::Memory::pinned_host, {.max_buffers = 8}};
};

TEST(CopyStage, ReturnsBeforeTheCopyRunsAndDeliversInOrder) {
  Fixture f;
  CopyStage stage(f.device, {.device_buffers = 8});
  f.device->pause();  // nothing queued can run: a call that waited would hang here
  std::vector<Tensor> inputs;
  std::vector<DeviceBatch> out;
  for (int i = 0; i < 6; ++i) {
    inputs.push_back(host_batch(f.host, i * 10));
    out.push_back(stage(inputs.back()));
  }
  for (auto& b : out) EXPECT_FALSE(b.ready());
  f.device->resume();
  for (int i = 0; i < 6; ++i) {
    out[i].wait();
    EXPECT_EQ(bytes_of(out[i]), bytes_of(inputs[i])) << "batch " << i;
    EXPECT_EQ(out[i].shape(), inputs[i].shape());
    EXPECT_EQ(out[i].dtype(), DType::uint8);
    EXPECT_EQ(out[i].layout(), Layout::nhwc);
    EXPECT_EQ(out[i].device().kind, DeviceKind::cpu);
  }
}

TEST(CopyStage, DeviceBuffersBoundTheStage) {
  Fixture f;
  CopyStage stage(f.device, {.device_buffers = 2});
  auto a = stage(host_batch(f.host, 1));
  auto b = stage(host_batch(f.host, 2));
  auto third = std::async(std::launch::async, [&] { return stage(host_batch(f.host, 3)); });
  EXPECT_TRUE(still_waiting(third));  // backpressure: both device buffers are delivered
  a = {};
  auto c = third.get();
  c.wait();
  EXPECT_EQ(bytes_of(c)[0], 3);
  EXPECT_EQ(stage.pool().stats().buffers, 2u);
}

TEST(CopyStage, AStopRequestEndsTheWaitForADeviceBuffer) {
  Fixture f;
  CopyStage stage(f.device, {.device_buffers = 1});
  auto held = stage(host_batch(f.host, 1));
  std::stop_source stop;
  auto waiting = std::async(std::launch::async,
                            [&] { return stage(host_batch(f.host, 2), stop.get_token()); });
  EXPECT_TRUE(still_waiting(waiting));
  stop.request_stop();
  EXPECT_THROW(waiting.get(), StopRequested);
}

TEST(CopyStage, PinnedBufferGoesBackOnlyAfterItsCopy) {
  auto device = std::make_shared<CpuDevice>();
  BufferPool host(device, BufferPool::Memory::pinned_host, {.max_buffers = 1});
  CopyStage stage(device, {.device_buffers = 2});
  device->pause();
  auto batch = stage(host_batch(host, 7));  // the host tensor is dropped at once
  EXPECT_EQ(host.stats().in_use, 0u);       // returned, but fenced by the copy
  auto next = std::async(std::launch::async, [&] { return host_batch(host, 100); });
  EXPECT_TRUE(still_waiting(next));  // decoding the next batch waits for the copy
  device->resume();
  auto overwritten = next.get();
  batch.wait();
  EXPECT_EQ(bytes_of(batch)[0], 7);
  EXPECT_EQ(bytes_of(overwritten)[0], 100);
}

TEST(CopyStage, ForeignHostMemoryIsKeptUntilItsCopy) {
  Fixture f;
  CopyStage stage(f.device);
  f.device->pause();
  auto t = Tensor::empty(DType::uint8, {1, 2, 2, 3});  // heap memory, no pool
  std::iota(t.data_as<std::uint8_t>(), t.data_as<std::uint8_t>() + 12, 0);
  auto batch = stage(t);
  t = {};  // the stage holds it: ASan would see the copy read freed memory otherwise
  EXPECT_EQ(stage.foreign_in_flight(), 1u);
  f.device->resume();
  batch.wait();
  EXPECT_EQ(bytes_of(batch)[11], 11);
  EXPECT_EQ(stage.foreign_in_flight(), 0u);
}

// Issue 22 item 7: host tensors from outside a pool may be pageable (a slow, host-
// synchronous copy on CUDA): counted, so that a producer that should decode into a
// pinned pool can be told.
TEST(CopyStage, CountsCopiesFromPageableHostMemory) {
  Fixture f;
  CopyStage stage(f.device);
  stage(Tensor::empty(DType::uint8, {1, 2, 2, 3})).wait();  // heap memory: pageable
  EXPECT_EQ(stage.pageable_copies(), 1u);
  stage(host_batch(f.host, 1)).wait();                           // a pinned pool's
  auto foreign_pinned = f.device->allocate_host(2 * 4 * 4 * 3);  // pinned, no pool
  stage(Tensor::empty(DType::uint8, {2, 4, 4, 3}, [&](std::size_t) {
    return foreign_pinned;
  })).wait();
  EXPECT_EQ(stage.pageable_copies(), 1u);
  EXPECT_TRUE(f.device->page_locked(static_cast<char*>(foreign_pinned.get()) + 95));
  EXPECT_FALSE(f.device->page_locked(static_cast<char*>(foreign_pinned.get()) + 96));
}

TEST(CopyStage, ADroppedBatchsMemoryIsRewrittenOnlyAfterItsCopy) {
  Fixture f;
  CopyStage stage(f.device, {.device_buffers = 1});
  f.device->pause();
  auto first = stage(host_batch(f.host, 1));
  void* address = first.data();
  first = {};  // dropped before its copy ran
  auto second = stage(host_batch(f.host, 50));
  EXPECT_EQ(second.data(), address);
  f.device->resume();
  second.wait();
  EXPECT_EQ(bytes_of(second)[0], 50);
}

TEST(CopyStage, NormalizesOnTheDevice) {
  Fixture f;
  NormalizeOptions norm{.mean = {10, 20, 30}, .stddev = {2, 4, 8}};
  CopyStage stage(f.device, {.normalize = norm});
  auto input = host_batch(f.host, 5);
  auto batch = stage(input);
  EXPECT_EQ(batch.dtype(), DType::float32);
  EXPECT_EQ(batch.layout(), Layout::nchw);
  EXPECT_EQ(batch.shape(), (std::vector<std::int64_t>{2, 3, 4, 4}));
  std::vector<float> expected(2 * 3 * 4 * 4);
  auto job = make_normalize_job(norm, input.shape());
  job.src = input.data_as<std::uint8_t>();
  job.dst = expected.data();
  normalize_reference(job);
  batch.wait();
  EXPECT_EQ(std::memcmp(batch.data(), expected.data(), expected.size() * 4), 0);
  // pixel (image 1, h 2, w 3), channel 2: (x - 30) / 8
  const std::uint8_t x = input.data_as<std::uint8_t>()[((1 * 4 + 2) * 4 + 3) * 3 + 2];
  EXPECT_FLOAT_EQ(batch.data_as<float>()[((1 * 3 + 2) * 4 + 2) * 4 + 3], (x - 30.0f) / 8.0f);
}

TEST(CopyStage, RejectsWhatItCannotCopy) {
  Fixture f;
  CopyStage stage(f.device);
  auto t = host_batch(f.host, 0);
  Tensor strided(DType::uint8, {2, 4}, t.owner(), t.data(), {1, 2});
  EXPECT_THROW(stage(strided), std::invalid_argument);
  CopyStage normalizing(f.device, {.normalize = NormalizeOptions{.mean = {0}, .stddev = {1}}});
  auto floats = Tensor::empty(DType::float32, {1, 2, 2, 1});
  EXPECT_THROW(normalizing(floats), std::invalid_argument);
  EXPECT_THROW(normalizing(t), std::invalid_argument);  // 3 channels, 1 mean
}

TEST(DeviceBatch, WaitReportsAFailedCopy) {
  Fixture f;
  CopyStage stage(f.device);
  f.device->submit([] {
    throw DeviceError("device", "test", "copy", {DeviceKind::cpu, 0}, "injected failure");
  });
  auto batch = stage(host_batch(f.host, 0));
  EXPECT_THROW(batch.wait(), DeviceError);
  auto next = stage(host_batch(f.host, 1));
  EXPECT_NO_THROW(next.wait());
}

TEST(DeviceBatch, CopiesShareTheMemoryUntilTheLastIsDropped) {
  Fixture f;
  CopyStage stage(f.device, {.device_buffers = 1});
  auto a = stage(host_batch(f.host, 0));
  auto copy = a;
  a = {};
  EXPECT_EQ(stage.pool().stats().in_use, 1u);
  copy.use_on(nullptr);  // the CPU device ignores streams; the contract still holds
  copy = {};
  EXPECT_EQ(stage.pool().stats().in_use, 0u);
}

// The whole path as a pipeline: decode into pinned buffers, copy as the last stage (io,
// concurrency 1), consume on the device; the device pool bounds what is on the device.
// The pinned pool holds what the pipeline can hold between decode and copy (decode:
// 2 + 4 queued, to_device: 1 + 2) plus copies in flight, so decode never waits for a
// buffer that only the pipeline itself could return (see device_pool.h, SIZING).
// A sticky device error (a faulting kernel, CUDA unloading at interpreter exit) while
// batches are alive: dropping them must not throw out of a destructor (std::terminate
// before Python can report the error). Two batches over one memory (a broadcast root's
// batch and the one it returns): the second drop queries the first one's fences.
TEST(DeviceBatch, DroppedAfterAStickyErrorWithoutTerminating) {
  auto device = std::make_shared<CpuDevice>(detail::CpuFaults{.sticky_after_events = 1});
  BufferPool pool(device, BufferPool::Memory::device, {.max_buffers = 1});
  auto buffer = pool.take(64);
  void* const data = buffer.memory.get();
  auto copied = device->record();
  copied->wait();
  {
    auto root = make_device_batch(device, buffer.memory, copied, DType::uint8, {64}, Layout::nhwc);
    auto sent = make_device_batch(device, buffer.memory, copied, DType::uint8, {64}, Layout::nhwc);
    buffer = {};
    auto breaks = device->record();
    EXPECT_THROW(breaks->wait(), DeviceError);
    EXPECT_TRUE(device->broken());
    EXPECT_TRUE(root.ready());               // an error counts as complete ...
    EXPECT_THROW(root.wait(), DeviceError);  // ... and is reported by wait()
  }
  // The memory came back: its failed fences count as complete.
  auto again = pool.take(64);
  EXPECT_EQ(again.memory.get(), data);
}

TEST(CopyStage, APinnedBufferFencedByAFailedDeviceIsFreeAgain) {
  auto device = std::make_shared<CpuDevice>(detail::CpuFaults{.sticky_after_events = 1});
  auto pinned = std::make_shared<BufferPool>(device, BufferPool::Memory::pinned_host,
                                             BufferPool::Options{.max_buffers = 1});
  CopyStage stage(device, {.device_buffers = 2});
  {
    auto batch = stage(host_batch(*pinned, 1));  // event 1: fine
    EXPECT_NO_THROW(batch.wait());
    EXPECT_THROW(device->record()->wait(), DeviceError);  // event 2 breaks the device
  }
  EXPECT_NO_THROW(pinned->take(96));  // the fence's error is its batch's, not the pool's
  EXPECT_EQ(stage.foreign_in_flight(), 0u);
}

// Issue 22 item 6: buffers sized at the request's bytes made a smaller batch (failed
// reads, an epoch's last) followed by a full one free and reallocate, and a free waits
// for the device's queued work (cudaFree: the training step's too). With the full
// batch's shape the device buffers are allocated once, when the stage is made.
TEST(CopyStage, AFullBatchShapeAllocatesOnceAndNeverFreesOnTheHotPath) {
  auto device = std::make_shared<CpuDevice>(detail::CpuFaults{.free_waits_for_work = true});
  const std::vector<std::int64_t> full{2, 4, 4, 3};
  auto pinned = std::make_shared<BufferPool>(
      device, BufferPool::Memory::pinned_host,
      BufferPool::Options{.max_buffers = 2, .min_capacity = 2 * 4 * 4 * 3});
  for (const bool normalize : {false, true}) {
    CopyOptions options{.device_buffers = 1, .full_batch = full};
    if (normalize) {
      options.normalize = NormalizeOptions{
          .mean = {0.5f, 0.5f, 0.5f}, .stddev = {0.25f, 0.25f, 0.25f}, .dtype = DType::float32};
    }
    CopyStage stage(device, options);
    const auto before = device->allocations();
    const auto freed = device->allocations() - device->live_allocations();
    // Counted from here: the previous round's stage, destroyed just before, may free its
    // buffer while the device still runs that round's last queued work.
    const auto waited = device->frees_that_waited();
    EXPECT_EQ(stage.pool().stats().buffers, 1u) << "allocated when the stage was made";
    for (std::int64_t n : {1, 2, 1, 2, 2, 1}) {
      auto t = Tensor::empty(DType::uint8, {n, 4, 4, 3}, pinned->allocator());
      auto batch = stage(t);
      batch.wait();
    }
    EXPECT_LE(device->allocations() - before, 2) << "the two pinned buffers, once";
    EXPECT_EQ(device->allocations() - device->live_allocations(), freed) << "a buffer was freed";
    EXPECT_EQ(device->frees_that_waited(), waited) << "a free waited on the hot path";
    EXPECT_EQ(stage.pool().stats().buffers, 1u);
  }
}

// Issue 22 item 6, overlap: with normalize, batch i + 1's copy runs on the copy queue
// while batch i's normalize waits on the device's queue. Ordered by events: the
// device's queue is paused, so no normalize can run, yet batch 1's host bytes are read
// (its copied() event completes). On one queue, or with one staging buffer (the copy
// into it waits for batch 0's normalize), batch 1's copy sat behind that normalize.
TEST(CopyStage, ACopyOverlapsThePreviousBatchsNormalize) {
  Fixture f;
  const NormalizeOptions norm{.mean = {10, 20, 30}, .stddev = {2, 4, 8}};
  CopyStage stage(f.device, {.normalize = norm, .full_batch = {2, 4, 4, 3}});
  f.device->synchronize();  // the stage's buffers are allocated (stream-ordered)
  f.device->pause();
  auto b0 = stage(host_batch(f.host, 1));
  auto b1 = stage(host_batch(f.host, 2));
  auto copied = std::async(std::launch::async, [&] { b1.copied()->wait(); });
  // A generous guard, not a time bound: without overlap the wait ends only at resume().
  const bool overlapped = copied.wait_for(60s) == std::future_status::ready;
  EXPECT_FALSE(b0.ready()) << "batch 0's normalize cannot have run";
  f.device->resume();
  EXPECT_TRUE(overlapped) << "batch 1's copy waited for batch 0's normalize";
  copied.get();
  for (auto* b : {&b0, &b1}) EXPECT_NO_THROW(b->wait());
  EXPECT_FLOAT_EQ(b0.data_as<float>()[0], (1 - 10.0f) / 2.0f);
  EXPECT_FLOAT_EQ(b1.data_as<float>()[0], (2 - 10.0f) / 2.0f);
}

// Device memory is stream-ordered (cudaMallocFromPoolAsync on the device's queue): the
// copy queue's first use of a staging buffer must wait for its allocation there. The
// CPU device's ordered_allocations fault fails a use before the allocating queue ran
// it; the device's queue is paused while the stage allocates and copies.
TEST(CopyStage, TheCopyQueueWaitsForAStagingBuffersOrderedAllocation) {
  auto device = std::make_shared<CpuDevice>(detail::CpuFaults{.ordered_allocations = true});
  BufferPool host(device, BufferPool::Memory::pinned_host, {.max_buffers = 4});
  const NormalizeOptions norm{.mean = {0, 0, 0}, .stddev = {1, 1, 1}};
  for (const bool full : {true, false}) {  // reserved up front, or allocated by the call
    device->pause();
    CopyOptions options{.normalize = norm};
    if (full) options.full_batch = {2, 4, 4, 3};
    CopyStage stage(device, options);
    auto batch = stage(host_batch(host, 3));
    device->resume();
    EXPECT_NO_THROW(batch.wait()) << (full ? "reserved" : "allocated on the call");
    EXPECT_FLOAT_EQ(batch.data_as<float>()[16], 4.0f);  // NCHW: channel 1 of pixel 0
  }
}

// Issue 22 item 6, the pinned footprint: pageable host tensors (decoded into ordinary
// memory) go through a ring of pinned_staging page-locked buffers, so the pinned memory
// is that ring, not one buffer per batch decode holds; the tensor is free on return.
TEST(CopyStage, PageableInputGoesThroughABoundedPinnedRing) {
  auto device = std::make_shared<CpuDevice>();
  const std::vector<std::int64_t> full{2, 4, 4, 3};
  CopyStage stage(device, {.device_buffers = 2, .full_batch = full, .pinned_staging = 2});
  ASSERT_NE(stage.pinned_staging(), nullptr);
  EXPECT_EQ(stage.pinned_staging()->stats().buffers, 2u) << "reserved when the stage is made";
  const auto allocated = device->allocations();
  device->pause();
  auto t = Tensor::empty(DType::uint8, full);  // heap memory: pageable
  std::iota(t.data_as<std::uint8_t>(), t.data_as<std::uint8_t>() + t.nbytes(), 0);
  auto first = stage(t);
  EXPECT_EQ(stage.foreign_in_flight(), 0u) << "the pageable tensor is not held";
  t.data_as<std::uint8_t>()[0] = 200;  // the batch has its own copy already
  device->resume();
  first.wait();
  EXPECT_EQ(bytes_of(first)[0], 0);
  first = {};
  for (int i = 0; i < 20; ++i) {
    auto u = Tensor::empty(DType::uint8, {1 + i % 2, 4, 4, 3});
    std::fill_n(u.data_as<std::uint8_t>(), u.nbytes(), static_cast<std::uint8_t>(i));
    auto b = stage(u);
    b.wait();
    EXPECT_EQ(bytes_of(b), bytes_of(u)) << "batch " << i;
  }
  EXPECT_EQ(stage.staged_copies(), 21u);
  EXPECT_EQ(stage.pageable_copies(), 0u);
  EXPECT_EQ(device->allocations(), allocated) << "the ring and the outputs, allocated once";
  EXPECT_EQ(stage.pinned_staging()->stats().buffers, 2u);
  // Page-locked input (a pinned pool's) is copied from where it is, not staged.
  BufferPool pinned(device, BufferPool::Memory::pinned_host, {.max_buffers = 1});
  stage(host_batch(pinned, 9)).wait();
  EXPECT_EQ(stage.staged_copies(), 21u);
}

TEST(BufferPool, ReserveAllocatesFullCapacityBuffersUpFront) {
  auto device = std::make_shared<CpuDevice>();
  BufferPool pool(device, BufferPool::Memory::device, {.max_buffers = 3, .min_capacity = 1000});
  pool.reserve(5);  // at most max_buffers
  EXPECT_EQ(pool.stats().buffers, 3u);
  EXPECT_EQ(pool.stats().bytes, 3000u);
  EXPECT_EQ(device->allocations(), 3);
  auto a = pool.take(10), b = pool.take(1000), c = pool.take(999);
  EXPECT_EQ(device->allocations(), 3);
}

TEST(CopyStage, RunsAsThePipelinesLastStage) {
  auto device = std::make_shared<CpuDevice>();
  auto host = std::make_shared<BufferPool>(device, BufferPool::Memory::pinned_host,
                                           BufferPool::Options{.max_buffers = 12});
  CopyStage to_device(device, {.device_buffers = 3});
  std::vector<int> ids(40);
  std::iota(ids.begin(), ids.end(), 0);
  auto pipeline = actors::PipelineBuilder()
                      .add_source(ids)
                      .pipe([host](int id) { return host_batch(*host, id); },
                            {.concurrency = 2, .name = "decode"})
                      .pipe([to_device](Tensor t) { return to_device(t); },
                            {.executor = actors::Executor::io, .name = "to_device"})
                      .add_sink(2)
                      .build({.num_threads = 2, .log_stats_at_end = false});
  int expected = 0;
  for (auto& batch : pipeline) {
    batch.wait();
    EXPECT_EQ(bytes_of(batch)[0], static_cast<std::uint8_t>(expected)) << "batch " << expected;
    EXPECT_LE(to_device.pool().stats().buffers, 3u);
    ++expected;
  }
  EXPECT_EQ(expected, 40);
}

}  // namespace
}  // namespace brigade::transport
