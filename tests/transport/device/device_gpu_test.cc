// The real GPU path: CUDA device, copy stage, normalize kernel, NCCL. A self-contained
// binary (transport_gpu_tests; see bench/gpu_check.sh). Every test skips, saying why,
// where no GPU is usable (no CUDA in the build, no driver, no device). The test itself
// calls the CUDA runtime only to play the consumer (its own stream).
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <future>
#include <random>
#include <thread>

#include "transport/device/device_copy.h"
#include "transport/device/device_group.h"
#include "transport/device/device_normalize.h"

namespace brigade::transport {
namespace {

using media::DType;
using media::Tensor;

class Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto available = cuda_availability();
    if (available.devices == 0) GTEST_SKIP() << "no GPU: " << available.reason;
    devices_ = available.devices;
    device_ = open_device({DeviceKind::cuda, 0});
  }

  // The device bytes of `b`, read back after waiting for it.
  std::vector<std::uint8_t> read_back(const DeviceBatch& b) {
    b.wait();
    std::vector<std::uint8_t> out(b.nbytes());
    auto staging = device_->allocate_host(b.nbytes());
    device_->copy_to_host(staging.get(), b.data(), b.nbytes());
    device_->synchronize();
    std::memcpy(out.data(), staging.get(), out.size());
    return out;
  }

  int devices_ = 0;
  std::shared_ptr<Device> device_;
};

Tensor filled(BufferPool& pool, std::vector<std::int64_t> shape, unsigned seed) {
  auto t = Tensor::empty(DType::uint8, std::move(shape), pool.allocator());
  std::mt19937 rng(seed);
  for (std::size_t i = 0; i < t.nbytes(); ++i) t.data_as<std::uint8_t>()[i] = rng() & 0xff;
  return t;
}

std::vector<std::uint8_t> bytes_of(const Tensor& t) {
  return {t.data_as<const std::uint8_t>(), t.data_as<const std::uint8_t>() + t.nbytes()};
}

TEST_F(Gpu, CopiesToTheDeviceAndBack) {
  auto host = device_->allocate_host(1 << 20);
  auto dev = device_->allocate_device(1 << 20);
  auto back = device_->allocate_host(1 << 20);
  for (int i = 0; i < (1 << 20); ++i) static_cast<std::uint8_t*>(host.get())[i] = i * 7;
  device_->copy_to_device(dev.get(), host.get(), 1 << 20);
  device_->copy_to_host(back.get(), dev.get(), 1 << 20);
  device_->record()->wait();
  EXPECT_EQ(std::memcmp(host.get(), back.get(), 1 << 20), 0);
}

TEST_F(Gpu, ErrorsNameTheCudaErrorTheCallAndTheDevice) {
  try {
    device_->allocate_device(std::size_t{1} << 52);
    FAIL() << "allocated 4 PiB";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.library(), "CUDA");
    EXPECT_EQ(e.code(), "cudaErrorMemoryAllocation");
    EXPECT_EQ(e.call(), "cudaMalloc");
    EXPECT_EQ(e.device(), (DeviceSpec{DeviceKind::cuda, 0}));
  }
  try {
    open_device({DeviceKind::cuda, devices_});
    FAIL() << "opened a device past the last";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.code(), "cudaErrorInvalidDevice");
  }
  auto still_fine = device_->allocate_device(16);  // the failed call left no sticky error
  EXPECT_NE(still_fine.get(), nullptr);
}

TEST_F(Gpu, CopyStageDeliversEveryBatchInOrder) {
  BufferPool host(device_, BufferPool::Memory::pinned_host, {.max_buffers = 4});
  CopyStage stage(device_, {.device_buffers = 3});
  std::vector<std::vector<std::uint8_t>> sent;
  std::vector<DeviceBatch> window;
  std::vector<std::vector<std::uint8_t>> got;
  for (int i = 0; i < 24; ++i) {
    auto t = filled(host, {8, 64, 64, 3}, i);
    sent.push_back(bytes_of(t));
    window.push_back(stage(t));
    if (window.size() == 2) {  // the consumer holds a couple, as a training loop does
      got.push_back(read_back(window.front()));
      window.erase(window.begin());
    }
  }
  for (auto& b : window) got.push_back(read_back(b));
  ASSERT_EQ(got.size(), sent.size());
  for (std::size_t i = 0; i < sent.size(); ++i) EXPECT_EQ(got[i], sent[i]) << "batch " << i;
  EXPECT_LE(stage.pool().stats().buffers, 3u);
}

TEST_F(Gpu, PinnedBufferIsRewrittenOnlyAfterItsCopy) {
  BufferPool host(device_, BufferPool::Memory::pinned_host, {.max_buffers = 1});
  CopyStage stage(device_, {.device_buffers = 2});
  auto first = filled(host, {64, 1024, 1024}, 1);  // 64 MiB: the copy takes a while
  const auto expected = bytes_of(first);
  auto batch = stage(first);
  first = {};
  auto second = filled(host, {64, 1024, 1024}, 2);  // the same buffer, once the copy is done
  EXPECT_EQ(read_back(batch), expected);
}

// A training step still reading a dropped batch on its own stream must not see the next
// batch's bytes: the memory's reuse waits for the consumer's stream.
TEST_F(Gpu, DeviceMemoryReuseWaitsForTheConsumersStream) {
  BufferPool host(device_, BufferPool::Memory::pinned_host, {.max_buffers = 2});
  CopyStage stage(device_, {.device_buffers = 1});
  cudaStream_t consumer = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking), cudaSuccess);
  const std::size_t n = 16 << 20;
  auto a = filled(host, {static_cast<std::int64_t>(n)}, 3);
  const auto expected = bytes_of(a);
  auto scratch = device_->allocate_device(n);
  auto batch = stage(a);
  batch.use_on(consumer);
  // The consumer's stream is busy for 100 ms before it reads the batch.
  ASSERT_EQ(
      cudaLaunchHostFunc(
          consumer, [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(100)); },
          nullptr),
      cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(scratch.get(), batch.data(), n, cudaMemcpyDeviceToDevice, consumer),
            cudaSuccess);
  batch = {};                                                          // dropped while still in use
  auto next = stage(filled(host, {static_cast<std::int64_t>(n)}, 4));  // same device buffer
  next.wait();
  ASSERT_EQ(cudaStreamSynchronize(consumer), cudaSuccess);
  std::vector<std::uint8_t> seen(n);
  ASSERT_EQ(cudaMemcpy(seen.data(), scratch.get(), n, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_TRUE(seen == expected) << "the consumer read bytes of the next batch";
  cudaStreamDestroy(consumer);
}

TEST_F(Gpu, UseOnOrdersTheConsumersStreamWithoutAHostWait) {
  BufferPool host(device_, BufferPool::Memory::pinned_host, {.max_buffers = 2});
  CopyStage stage(device_);
  cudaStream_t consumer = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking), cudaSuccess);
  auto t = filled(host, {32, 1024, 1024}, 5);
  const auto expected = bytes_of(t);
  auto batch = stage(t);
  batch.use_on(consumer);
  std::vector<std::uint8_t> seen(expected.size());
  auto back = device_->allocate_host(seen.size());
  ASSERT_EQ(
      cudaMemcpyAsync(back.get(), batch.data(), seen.size(), cudaMemcpyDeviceToHost, consumer),
      cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(consumer), cudaSuccess);
  std::memcpy(seen.data(), back.get(), seen.size());
  EXPECT_TRUE(seen == expected);
  cudaStreamDestroy(consumer);
}

TEST_F(Gpu, NormalizeKernelMatchesTheCpuReferenceBitForBit) {
  BufferPool host(device_, BufferPool::Memory::pinned_host, {.max_buffers = 2});
  struct Case {
    std::vector<std::int64_t> shape;
    std::vector<float> mean, stddev;
    float scale;
  };
  const std::vector<Case> cases{
      {{32, 224, 224, 3}, {0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}, 1 / 255.0f},
      {{3, 17, 29, 3}, {123.675f, 116.28f, 103.53f}, {58.395f, 57.12f, 57.375f}, 1.0f},
      {{2, 4, 9, 7, 1}, {100.0f}, {0.001f}, 1.0f},  // clips, 1 channel, overflows fp16
      {{5, 8, 8, 4}, {0, 1, 2, 3}, {1, 2, 3, 4}, 1.0f},
  };
  for (const auto& c : cases) {
    for (auto dtype : {DType::float32, DType::float16}) {
      for (auto layout : {Layout::nchw, Layout::nhwc}) {
        NormalizeOptions o{
            .mean = c.mean, .stddev = c.stddev, .scale = c.scale, .dtype = dtype, .layout = layout};
        CopyStage stage(device_, {.normalize = o});
        auto t = filled(host, c.shape, 9);
        auto job = make_normalize_job(o, c.shape);
        std::vector<std::uint8_t> expected(normalized_bytes(job));
        job.src = t.data_as<std::uint8_t>();
        job.dst = expected.data();
        normalize_reference(job);
        auto batch = stage(t);
        EXPECT_EQ(batch.shape(), normalized_shape(o, c.shape));
        EXPECT_TRUE(read_back(batch) == expected)
            << media::dtype_name(dtype) << " " << media::layout_name(layout) << " "
            << c.shape.size() << "-d";
      }
    }
  }
}

// Issue 22 item 1: a rank using cuda:1 must not create a context on GPU 0 from its
// fresh threads (decode, copy, deleters). Needs two GPUs and a process that has not
// touched GPU 0: bench/gpu_check.sh runs it alone (--gtest_filter=CudaContext.*).
TEST(CudaContext, Cuda1FromFreshThreadsLeavesGpu0WithoutAContext) {
  const auto available = cuda_availability();
  if (available.devices < 2) GTEST_SKIP() << "needs two GPUs, found " << available.devices;
  using GetState = CUresult (*)(CUdevice, unsigned*, int*);
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  ASSERT_EQ(cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &fn, 12000,
                                             cudaEnableDefault, &found),
            cudaSuccess);
  ASSERT_EQ(found, cudaDriverEntryPointSuccess);
  auto gpu0_active = [&] {
    unsigned flags = 0;
    int active = 0;
    EXPECT_EQ(reinterpret_cast<GetState>(fn)(0, &flags, &active), CUDA_SUCCESS);
    return active != 0;
  };
  if (gpu0_active()) GTEST_SKIP() << "GPU 0 already has a context in this process: run alone";
  auto device = open_device({DeviceKind::cuda, 1});
  CopyStage stage(device);
  auto host = std::make_shared<BufferPool>(device, BufferPool::Memory::pinned_host,
                                           BufferPool::Options{.max_buffers = 8});
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {  // fresh threads: decode (allocate), copy, drop
      auto t = filled(*host, {2, 16, 16, 3}, static_cast<unsigned>(i));
      auto batch = stage(t);
      batch.wait();
    });
  }
  for (auto& t : threads) t.join();
  device->synchronize();
  EXPECT_FALSE(gpu0_active()) << "a thread working on cuda:1 created GPU 0's primary context";
}

// NCCL through DeviceGroup. Loading NCCL is part of what is checked: a skip says why.
class Nccl : public Gpu {
 protected:
  void SetUp() override {
    Gpu::SetUp();
    if (IsSkipped()) return;
    if (!built_with_nccl()) GTEST_SKIP() << "this build has no NCCL";
    try {
      new_device_group_id(DeviceKind::cuda, 1);
    } catch (const DeviceError& e) {
      if (e.code() != "not-loaded") throw;
      GTEST_SKIP() << e.what();  // no libnccl.so.2 on this machine (gpu_check.sh looks)
    }
  }
};

TEST_F(Nccl, OneRankGroupBroadcastsToItself) {
  const auto id = new_device_group_id(DeviceKind::cuda, 1);
  EXPECT_GT(id.nccl_version, 0u);
  auto group_device = open_device({DeviceKind::cuda, 0});
  DeviceGroup group(group_device, id, 0);
  BufferPool host(device_, BufferPool::Memory::pinned_host, {.max_buffers = 2});
  BufferPool received(group_device, BufferPool::Memory::device, {.max_buffers = 2});
  CopyStage stage(device_);
  auto t = filled(host, {4, 32, 32, 3}, 11);
  const auto expected = bytes_of(t);
  auto sent = group.broadcast(stage(t), 0, received);
  EXPECT_EQ(read_back(sent), expected);
}

TEST_F(Nccl, BroadcastsAndSendsAcrossGpus) {
  if (devices_ < 2) GTEST_SKIP() << "needs two GPUs, found " << devices_;
  const int n = devices_;
  const auto id = new_device_group_id(DeviceKind::cuda, n);
  std::vector<std::future<std::vector<std::vector<std::uint8_t>>>> ranks;
  for (int r = 0; r < n; ++r) {
    ranks.push_back(std::async(std::launch::async, [&, r] {
      auto device = open_device({DeviceKind::cuda, r});
      DeviceGroup group(device, id, r);
      BufferPool host(device, BufferPool::Memory::pinned_host, {.max_buffers = 2});
      BufferPool received(device, BufferPool::Memory::device, {.max_buffers = 4});
      CopyStage stage(device);
      std::vector<std::vector<std::uint8_t>> got;
      auto read = [&](const DeviceBatch& b) {
        b.wait();
        auto back = device->allocate_host(b.nbytes());
        device->copy_to_host(back.get(), b.data(), b.nbytes());
        device->synchronize();
        const auto* p = static_cast<const std::uint8_t*>(back.get());
        got.emplace_back(p, p + b.nbytes());
      };
      for (int i = 0; i < 3; ++i) {
        DeviceBatch mine;
        if (r == 0) mine = stage(filled(host, {8, 64, 64, 3}, 100 + i));
        read(group.broadcast(mine, 0, received));
      }
      if (r == 0) group.send(stage(filled(host, {2, 16, 16, 3}, 200)), 1);
      if (r == 1) read(group.recv(0, received));
      return got;
    }));
  }
  std::vector<std::vector<std::vector<std::uint8_t>>> results;
  for (auto& f : ranks) results.push_back(f.get());
  BufferPool host(device_, BufferPool::Memory::pinned_host, {.max_buffers = 1});
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(results[r][i], bytes_of(filled(host, {8, 64, 64, 3}, 100 + i)))
          << "rank " << r << " broadcast " << i;
    }
  }
  ASSERT_EQ(results[1].size(), 4u);
  EXPECT_EQ(results[1][3], bytes_of(filled(host, {2, 16, 16, 3}, 200)));
}

}  // namespace
}  // namespace brigade::transport
