// A result's bytes on the wire (detail/payload.h): what BASP writes and reads, the
// recycling of received memory, and a size field that claims more than was sent.
#include "transport/remote/detail/payload.h"

#include <gtest/gtest.h>

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <numeric>

namespace brigade::transport::detail {
namespace {

struct System {
  caf::actor_system_config config;
  std::unique_ptr<caf::actor_system> system;
  System() {
    config.add_message_type<WirePayload>("brigade.payload");
    system = std::make_unique<caf::actor_system>(config);
  }
};

std::vector<char> serialized(caf::actor_system& system, const WirePayload& p) {
  std::vector<char> buffer;
  caf::binary_serializer sink(system, buffer);
  auto copy = p;
  EXPECT_FALSE(sink(copy));
  return buffer;
}

TEST(Payload, RoundTripsThroughCafsSerializers) {
  System s;
  std::vector<char> bytes(100'000);
  std::iota(bytes.begin(), bytes.end(), 0);
  const auto wire = serialized(*s.system, WirePayload{SharedBytes(bytes)});
  caf::binary_deserializer source(*s.system, wire);
  WirePayload read;
  ASSERT_FALSE(source(read));
  ASSERT_EQ(read.bytes.size(), bytes.size());
  EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), read.bytes.begin()));
  // As a message element too (what BASP carries).
  auto msg = caf::make_message(WirePayload{SharedBytes(bytes)});
  std::vector<char> buffer;
  caf::binary_serializer sink(*s.system, buffer);
  ASSERT_FALSE(sink(msg));
  caf::message back;
  caf::binary_deserializer from(*s.system, buffer);
  ASSERT_FALSE(from(back));
  ASSERT_TRUE(back.match_element<WirePayload>(0));
  EXPECT_EQ(back.get_as<WirePayload>(0).bytes.size(), bytes.size());
}

TEST(Payload, ReceivedMemoryIsRecycled) {
  char* first = nullptr;
  {
    auto a = recycled_bytes(1 << 20, &first);
    first[0] = 1;
  }
  const auto free_after_drop = free_payloads();
  EXPECT_GE(free_after_drop, 1u);
  char* second = nullptr;
  auto b = recycled_bytes(1 << 20, &second);
  EXPECT_EQ(second, first);  // the block the first gave back
  EXPECT_EQ(free_payloads(), free_after_drop - 1);
  char* other = nullptr;
  auto c = recycled_bytes(4 << 20, &other);  // too large for any free block
  EXPECT_NE(other, first);
}

TEST(Payload, KeepsAtMostItsBoundOfFreeBlocks) {
  std::vector<SharedBytes> held;
  for (std::size_t i = 0; i < 2 * kMaxFreePayloads; ++i) {
    char* data = nullptr;
    held.push_back(recycled_bytes(4096, &data));
  }
  held.clear();
  EXPECT_EQ(free_payloads(), kMaxFreePayloads);
}

TEST(Payload, ASizeBeyondTheMessageIsRefusedBeforeAllocating) {
  System s;
  const auto wire = serialized(*s.system, WirePayload{SharedBytes(std::vector<char>(64, 'x'))});
  // The same size field with most of the bytes cut off.
  const std::vector<char> cut(wire.begin(), wire.begin() + 8);
  caf::binary_deserializer source(*s.system, cut);
  WirePayload read;
  EXPECT_TRUE(source(read));
  EXPECT_TRUE(read.bytes.empty());
  // Size fields claiming 1 MiB and 3 GiB (past kMaxMessageBytes), in 5 bytes of message.
  for (std::size_t claimed : {std::size_t{1} << 20, std::size_t{3} << 30}) {
    std::vector<char> claim;
    caf::binary_serializer sink(*s.system, claim);
    ASSERT_FALSE(sink.begin_sequence(claimed));
    ASSERT_LE(claim.size(), 5u);
    caf::binary_deserializer huge(*s.system, claim);
    EXPECT_TRUE(huge(read)) << claimed;
    EXPECT_TRUE(read.bytes.empty());
  }
}

}  // namespace
}  // namespace brigade::transport::detail
