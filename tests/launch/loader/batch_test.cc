#include "launch/loader/detail/batch.h"

#include <gtest/gtest.h>

#include <vector>

namespace brigade::launch::detail {
namespace {

TEST(BatchPool, ReusesMemoryOfADroppedBatch) {
  auto pool = std::make_shared<BatchPool>();
  auto allocate = pool->allocator();
  void* first = nullptr;
  {
    auto block = allocate(4096);
    first = block.get();
  }
  auto again = allocate(4096);
  EXPECT_EQ(again.get(), first);
  auto other = allocate(4096);  // the first is in use: a new one
  EXPECT_NE(other.get(), first);
  pool.reset();
  allocate = {};  // buffers outlive the pool
}

TEST(HwcToChw, MovesChannelsBeforeRows) {
  const std::vector<std::uint8_t> in{0, 1, 2, 3, 4, 5};  // H=1, W=2, C=3
  std::vector<std::uint8_t> out(6);
  hwc_to_chw(in.data(), out.data(), 1, 2, 3);
  EXPECT_EQ(out, (std::vector<std::uint8_t>{0, 3, 1, 4, 2, 5}));
}

}  // namespace
}  // namespace brigade::launch::detail
