#include "transport/device.h"

#include <gtest/gtest.h>

#include <cstring>

namespace brigade::transport {
namespace {

TEST(Device, ParsesDeviceNames) {
  EXPECT_EQ(parse_device("cpu"), (DeviceSpec{DeviceKind::cpu, 0}));
  EXPECT_EQ(parse_device("cuda"), (DeviceSpec{DeviceKind::cuda, 0}));
  EXPECT_EQ(parse_device("cuda:3"), (DeviceSpec{DeviceKind::cuda, 3}));
  EXPECT_EQ(to_string(parse_device("cuda:12")), "cuda:12");
  EXPECT_EQ(to_string(parse_device("cpu")), "cpu");
}

TEST(Device, RejectsBadNamesNamingThem) {
  for (const char* bad : {"", "gpu", "cuda:", "cuda:-1", "cuda:1x", "CPU", "cuda:0:1"}) {
    try {
      parse_device(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("'" + std::string(bad) + "'"), std::string::npos)
          << e.what();
    }
  }
}

TEST(Device, ErrorsCarryLibraryCodeCallAndDevice) {
  const DeviceError e("CUDA", "cudaErrorMemoryAllocation", "cudaMalloc", {DeviceKind::cuda, 1},
                      "out of memory");
  EXPECT_STREQ(e.what(),
               "CUDA error cudaErrorMemoryAllocation (out of memory) in cudaMalloc on cuda:1");
  EXPECT_EQ(e.code(), "cudaErrorMemoryAllocation");
  EXPECT_EQ(e.call(), "cudaMalloc");
  EXPECT_EQ(e.device().index, 1);
  EXPECT_FALSE(e.transient());
}

TEST(Device, OpensTheCpuDevice) {
  auto device = open_device(parse_device("cpu"));
  ASSERT_TRUE(device);
  EXPECT_EQ(device->spec().kind, DeviceKind::cpu);
  auto host = device->allocate_host(16);
  auto dev = device->allocate_device(16);
  std::memcpy(host.get(), "brigade device!", 16);
  device->copy_to_device(dev.get(), host.get(), 16);
  device->synchronize();
  EXPECT_EQ(std::memcmp(dev.get(), "brigade device!", 16), 0);
}

// Without a usable GPU (no CUDA in the build, or no driver as on CI), opening CUDA is
// a DeviceError that says why, and cuda_availability() reports the same reason.
TEST(Device, CudaWithoutAGpuIsATypedErrorSayingWhy) {
  const auto available = cuda_availability();
  if (available.devices > 0) GTEST_SKIP() << "a GPU is present: " << available.devices;
  EXPECT_FALSE(available.reason.empty());
  try {
    open_device(parse_device("cuda:0"));
    FAIL() << "opened cuda:0 without a GPU";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.device(), (DeviceSpec{DeviceKind::cuda, 0}));
    EXPECT_NE(std::string(e.what()).find(available.reason), std::string::npos) << e.what();
    if (!built_with_cuda()) {
      EXPECT_EQ(e.code(), "no-cuda");
      EXPECT_NE(std::string(e.what()).find("this build has no CUDA"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace brigade::transport
