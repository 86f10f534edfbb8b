#include "launch/detail/batch.h"

#include <gtest/gtest.h>

#include <cstring>

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

TEST(SlotAssigner, NewBufferEveryBatchSizeSamplesAndAfterReset) {
  SlotAssigner assigner({2}, 3, {});
  std::vector<Slot> slots;
  for (std::uint64_t i = 0; i < 4; ++i) slots.push_back(assigner.assign({.id = 10 + i}));
  EXPECT_EQ(slots[0].batch, slots[2].batch);
  EXPECT_NE(slots[2].batch, slots[3].batch);
  EXPECT_EQ(slots[3].index, 0u);
  EXPECT_EQ(slots[2].index, 2u);
  EXPECT_EQ(slots[0].batch->data.shape(), (std::vector<std::int64_t>{3, 2}));
  assigner.reset();
  EXPECT_NE(assigner.assign({.id = 1}).batch, slots[3].batch);
}

TEST(GatherSlots, CompactsGoodSamplesAndListsFailures) {
  SlotAssigner assigner({2}, 4, {});
  GatherSlots gather;
  std::optional<Batch> out;
  for (std::uint8_t i = 0; i < 4; ++i) {
    auto s = assigner.assign({.id = 100u + i});
    auto* p = static_cast<std::uint8_t*>(s.batch->data[static_cast<std::int64_t>(s.index)].data());
    p[0] = p[1] = i;
    if (i == 1) {
      s.error = "sample 101: bad";
      s.error_stage = "decode";
    }
    out = gather.accumulate(std::move(s));
    EXPECT_EQ(out.has_value(), i == 3);
  }
  EXPECT_EQ(out->ids, (std::vector<std::uint64_t>{100, 102, 103}));
  EXPECT_EQ(out->data.shape(), (std::vector<std::int64_t>{3, 2}));
  const auto* d = static_cast<const std::uint8_t*>(out->data.data());
  EXPECT_EQ(std::vector<int>(d, d + 6), (std::vector<int>{0, 0, 2, 2, 3, 3}));
  EXPECT_EQ(out->failures, (std::vector<std::string>{"sample 101: bad"}));
  EXPECT_EQ(out->failed_stages, (std::vector<std::string>{"decode"}));
  EXPECT_FALSE(gather.flush());
}

TEST(GatherSlots, FlushDeliversTheLastPartialBatch) {
  SlotAssigner assigner({1}, 4, {});
  GatherSlots gather;
  EXPECT_FALSE(gather.accumulate(assigner.assign({.id = 7})));
  auto last = gather.flush();
  ASSERT_TRUE(last);
  EXPECT_EQ(last->ids, (std::vector<std::uint64_t>{7}));
  EXPECT_EQ(last->data.dim(0), 1);
}

TEST(Collate, NchwMovesChannelsBeforeRows) {
  Decoded item{5, media::Tensor::empty(media::DType::uint8, {1, 2, 3})};  // H=1, W=2, C=3
  auto* p = static_cast<std::uint8_t*>(item.data.data());
  for (int i = 0; i < 6; ++i)
    p[i] = static_cast<std::uint8_t>(i);  // pixel 0: 0 1 2, pixel 1: 3 4 5
  std::vector<Decoded> items{item};
  auto b = collate(items, Layout::nchw, {});
  EXPECT_EQ(b.data.shape(), (std::vector<std::int64_t>{1, 3, 1, 2}));
  const auto* d = static_cast<const std::uint8_t*>(b.data.data());
  EXPECT_EQ(std::vector<int>(d, d + 6), (std::vector<int>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(b.ids, (std::vector<std::uint64_t>{5}));
}

}  // namespace
}  // namespace brigade::launch::detail
