#include "transport/device/device.h"

#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <set>

#include "transport/device/detail/device_scope.h"

namespace brigade::transport {
namespace {

// One thread as CUDA sees it: its current context's device (none on a fresh thread,
// where cudaGetDevice answers 0), and the primary contexts that setting a device made.
struct SimulatedThread {
  std::optional<int> context;
  std::set<int>* created;
  int sets = 0;
  void set_device(int d) {  // cudaSetDevice: binds (and, the first time, creates) d's context
    created->insert(d);
    context = d;
    ++sets;
  }
  // What DeviceScope does around `body`.
  template <class F>
  void scope(int target, F body) {
    const auto plan = detail::plan_device_scope(target, context);
    if (plan.set) set_device(target);
    body();
    if (plan.restore) set_device(*plan.restore);
  }
};

// Every decode, copy and deleter thread of a rank using cuda:1 starts without a context:
// restoring what cudaGetDevice said there (0) created GPU 0's context from each of them.
TEST(DeviceScope, FreshThreadsOnCuda1NeverCreateGpu0sContext) {
  std::set<int> created;
  for (int thread = 0; thread < 8; ++thread) {
    SimulatedThread t{.context = std::nullopt, .created = &created};
    for (int call = 0; call < 3; ++call) {
      t.scope(1, [&] { EXPECT_EQ(t.context, 1); });
      EXPECT_EQ(t.context, 1);  // kept: set once per thread
    }
    t.scope(1, [&] { t.scope(1, [] {}); });  // nested, as allocate inside a copy
    EXPECT_EQ(t.sets, 1) << "thread " << thread;
  }
  EXPECT_EQ(created, std::set<int>{1});
}

TEST(DeviceScope, AThreadWithAContextGetsItsDeviceBack) {
  std::set<int> created{0};  // the consumer's framework made GPU 0's context
  SimulatedThread t{.context = 0, .created = &created};
  t.scope(2, [&] { EXPECT_EQ(t.context, 2); });
  EXPECT_EQ(t.context, 0);
  t.scope(0, [] {});
  EXPECT_EQ(t.sets, 2);  // the device was already current: nothing set
  EXPECT_EQ(created, (std::set<int>{0, 2}));
}

TEST(DeviceScope, PlanIsSetOnlyWhenNeededAndRestoreOnlyAnExistingContext) {
  using detail::plan_device_scope;
  EXPECT_TRUE(plan_device_scope(3, std::nullopt).set);
  EXPECT_FALSE(plan_device_scope(3, std::nullopt).restore);
  EXPECT_FALSE(plan_device_scope(3, 3).set);
  EXPECT_FALSE(plan_device_scope(3, 3).restore);
  EXPECT_TRUE(plan_device_scope(3, 0).set);
  EXPECT_EQ(plan_device_scope(3, 0).restore, 0);
}

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
