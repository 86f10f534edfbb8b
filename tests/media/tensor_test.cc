#include "media/tensor.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace brigade::media {
namespace {

TEST(Tensor, EmptyIsContiguousAndAligned) {
  Tensor t = Tensor::empty(DType::float32, {2, 3, 4});
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.nbytes(), 96u);
  EXPECT_EQ(t.strides(), (std::vector<std::int64_t>{48, 16, 4}));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data()) % kTensorAlignment, 0u);
}

TEST(Tensor, SliceSharesOwnerAndOffsetsData) {
  Tensor t = Tensor::empty(DType::uint8, {4, 2, 3});
  for (std::size_t i = 0; i < t.nbytes(); ++i) t.data_as<std::uint8_t>()[i] = std::uint8_t(i);
  Tensor s = t[2];
  EXPECT_EQ(s.shape(), (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(s.data_as<std::uint8_t>()[0], 12);
  EXPECT_EQ(s.owner(), t.owner());
  EXPECT_THROW(t[4], std::out_of_range);
}

TEST(Tensor, AllocatorHookProvidesMemory) {
  int calls = 0;
  std::size_t asked = 0;
  Allocator counting = [&](std::size_t n) {
    ++calls;
    asked = n;
    return default_allocate(n);
  };
  Tensor t = Tensor::empty(DType::int16, {5, 7}, counting);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(asked, 70u);
}

TEST(Tensor, WrapsForeignMemoryWithItsOwner) {
  bool freed = false;
  {
    static std::int32_t storage[6];
    std::shared_ptr<void> owner(storage, [&](void*) { freed = true; });
    Tensor t(DType::int32, {2, 3}, owner, storage);
    owner.reset();
    EXPECT_FALSE(freed);
    EXPECT_EQ(t.dtype(), DType::int32);
    EXPECT_EQ(dtype_name(t.dtype()), "int32");
  }
  EXPECT_TRUE(freed);
}

TEST(Tensor, BrigadeAliasIsTheMediaTensor) {
  brigade::Tensor t = brigade::Tensor::empty(brigade::DType::boolean, {3});
  EXPECT_EQ(t.nbytes(), 3u);
}

}  // namespace
}  // namespace brigade::media
