// The wire room's reader (transport/wire/wire.h) on its own, over a schema that ships with
// Cap'n Proto (capnp::schema::Node): what it reads, what it copies, and that malformed
// bytes become the caller's error type. The rooms' codecs test their messages against
// mutations (tests/transport/remote/wire_test.cc, tests/launch/loader/decode_task_test.cc).
#include "transport/wire/wire.h"

#include <capnp/message.h>
#include <capnp/schema.capnp.h>
#include <gtest/gtest.h>
#include <kj/debug.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace brigade::transport::wire {
namespace {

// A room's own error type: what the reader must throw, and nothing else.
struct RoomError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::vector<char> node(const char* name) {
  capnp::MallocMessageBuilder message;
  auto root = message.initRoot<capnp::schema::Node>();
  root.setId(42);
  root.setDisplayName(name);
  return to_bytes(message);
}

std::string error_of(std::span<const char> bytes) {
  try {
    Reader<RoomError> reader(bytes);
    return checked_read<RoomError>(
        [&] { return std::string(reader.root<capnp::schema::Node>().getDisplayName()); });
  } catch (const RoomError& e) {
    return std::string("error: ") + e.what();
  }
}

TEST(WireReader, ReadsWhatToBytesWrote) {
  const auto bytes = node("a/b.capnp");
  EXPECT_EQ(bytes.size() % sizeof(capnp::word), 0u);
  Reader<RoomError> reader(bytes);
  const auto root = reader.root<capnp::schema::Node>();
  EXPECT_EQ(root.getId(), 42u);
  EXPECT_EQ(std::string(root.getDisplayName()), "a/b.capnp");
}

TEST(WireReader, MisalignedBytesAreCopiedNotRejected) {
  const auto bytes = node("shifted");
  std::vector<char> shifted(bytes.size() + 1);
  std::copy(bytes.begin(), bytes.end(), shifted.begin() + 1);
  EXPECT_EQ(error_of(std::span<const char>(shifted).subspan(1)), "shifted");
}

TEST(WireReader, MalformedBytesBecomeTheCallersErrorNamingTheCause) {
  EXPECT_EQ(error_of({}), "error: malformed message: 0 bytes is not a whole number of words");
  const std::vector<char> seven(7, 0);
  EXPECT_EQ(error_of(seven), "error: malformed message: 7 bytes is not a whole number of words");
  // A segment table claiming 2^32 - 1 words in a 16-byte message.
  std::vector<char> claim(16, 0);
  claim[4] = claim[5] = claim[6] = claim[7] = '\xff';
  EXPECT_EQ(error_of(claim).rfind("error: malformed message: ", 0), 0u) << error_of(claim);
  // Half a message: its text runs past the end.
  auto half = node(std::string(200, 'x').c_str());
  half.resize(half.size() / 2 / 8 * 8);
  EXPECT_EQ(error_of(half).rfind("error: malformed message: ", 0), 0u) << error_of(half);
}

TEST(WireReader, CheckedReadTurnsAKjExceptionIntoTheCallersError) {
  try {
    checked_read<RoomError>([]() -> int { KJ_FAIL_REQUIRE("a field out of bounds"); });
    ADD_FAILURE() << "no error";
  } catch (const RoomError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("malformed message: ", 0), 0u) << what;
    EXPECT_NE(what.find("a field out of bounds"), std::string::npos) << what;
  }
  EXPECT_EQ(checked_read<RoomError>([] { return 7; }), 7);
}

}  // namespace
}  // namespace brigade::transport::wire
