// Members of remote shards cut from range reads (launch/loader/detail/member_streams.h),
// with a fetch of our own standing for the object store: what each read asks the network
// for, when a read returns, what a failure says and what the memory bound drops. The
// same streams against a real S3 server: tests/launch/object_storage_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <future>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "launch/loader/detail/member_streams.h"
#include "transport/storage/object_store.h"

namespace brigade::launch::detail {
namespace {

// An object's bytes, and the fetches made of it (offset, size), in order.
struct FakeObject {
  std::vector<std::byte> bytes;
  std::mutex mutex;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> fetches;
  std::size_t piece = 7;  // bytes per delivery: members cross pieces

  explicit FakeObject(std::size_t size) : bytes(size) {
    std::mt19937 random(25);
    for (auto& b : bytes) b = static_cast<std::byte>(random());
  }
  MemberStreams::Fetch fetch() {
    return [this](const std::string&, std::uint64_t offset, std::uint64_t size, std::uint64_t,
                  const std::string&, const MemberStreams::Sink& sink) {
      {
        std::lock_guard lock(mutex);
        fetches.emplace_back(offset, size);
      }
      for (std::uint64_t at = 0; at < size; at += piece) {
        sink(bytes.data() + offset + at, std::min<std::uint64_t>(piece, size - at));
      }
    };
  }
  std::vector<std::uint8_t> slice(std::uint64_t offset, std::uint64_t size) const {
    const auto* p = reinterpret_cast<const std::uint8_t*>(bytes.data()) + offset;
    return {p, p + size};
  }
};

// Members of 100 bytes every 612 bytes from 512 (a tar's shape: a header before each).
std::vector<PlannedMember> members(std::size_t count) {
  std::vector<PlannedMember> out;
  for (std::size_t i = 0; i < count; ++i)
    out.push_back({512 + 612 * i, 100, "m" + std::to_string(i) + ".jpg"});
  return out;
}

TEST(MemberStreams, AShardReadInAnyOrderIsOneRequestAndEveryMemberItsBytes) {
  FakeObject object(512 + 612 * 20);
  MemberStreams streams(object.fetch());
  auto planned = members(20);
  streams.plan("s3://b/s.tar", object.bytes.size(), "\"e\"", planned);
  std::shuffle(planned.begin(), planned.end(), std::mt19937(3));
  for (const auto& m : planned) {
    const auto bytes = streams.read("s3://b/s.tar", m.offset, m.size);
    ASSERT_TRUE(bytes) << m.name;
    EXPECT_EQ(*bytes, object.slice(m.offset, m.size)) << m.name;
  }
  ASSERT_EQ(object.fetches.size(), 1u);
  // From the first member's first byte to the last one's last: headers between, none after.
  EXPECT_EQ(object.fetches[0], std::make_pair(std::uint64_t{512}, std::uint64_t{612 * 19 + 100}));
  EXPECT_EQ(streams.stats().held_bytes, 0u);
  EXPECT_EQ(streams.stats().peak_held_bytes, 20u * 100);  // the whole shard's members, once
}

TEST(MemberStreams, EachRequestSpansAtMostTheChunkBoundOrOneMember) {
  FakeObject object(512 + 612 * 10 + 5000);
  MemberStreams streams(object.fetch(), {.chunk_bytes = 1300});
  auto planned = members(10);
  planned.push_back({512 + 612 * 10, 4000, "big.jpg"});  // larger than a chunk: alone
  streams.plan("s3://b/s.tar", object.bytes.size(), "", planned);
  for (const auto& m : planned) {
    const auto bytes = streams.read("s3://b/s.tar", m.offset, m.size);
    ASSERT_TRUE(bytes);
    EXPECT_EQ(*bytes, object.slice(m.offset, m.size));
  }
  // Two members fit in 1300 bytes (612 + 100), three do not (1324): five chunks, and the
  // big member alone.
  ASSERT_EQ(object.fetches.size(), 6u);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(object.fetches[i], std::make_pair(std::uint64_t{512 + 1224 * i}, std::uint64_t{712}));
  }
  EXPECT_EQ(object.fetches[5], std::make_pair(std::uint64_t{512 + 612 * 10}, std::uint64_t{4000}));
}

// A read waiting on another read's request returns once its own member is in, before
// the rest of the body arrives: the request is held open (a gate) after member 0.
TEST(MemberStreams, AWaitingReadReturnsWhenItsMemberArrivesNotAtTheBodysEnd) {
  FakeObject object(512 + 612 * 4);
  std::promise<void> first_in, finish;
  auto finished = finish.get_future().share();
  MemberStreams streams([&](const std::string&, std::uint64_t offset, std::uint64_t size,
                            std::uint64_t, const std::string&, const MemberStreams::Sink& sink) {
    sink(object.bytes.data() + offset, 612);  // member 0 and the next header
    first_in.set_value();
    finished.wait();
    sink(object.bytes.data() + offset + 612, size - 612);
  });
  const auto planned = members(4);
  streams.plan("u", object.bytes.size(), "", planned);
  auto fetcher =
      std::async(std::launch::async, [&] { return streams.read("u", 512 + 612 * 3, 100); });
  first_in.get_future().wait();  // the request is open, member 0 in, the rest held back
  const auto first = streams.read("u", 512, 100);
  ASSERT_TRUE(first);
  EXPECT_EQ(*first, object.slice(512, 100));
  finish.set_value();
  const auto last = fetcher.get();
  ASSERT_TRUE(last);
  EXPECT_EQ(*last, object.slice(512 + 612 * 3, 100));
}

// A failed request fails the read with the store's code (a transient one stays
// transient: the read stage retries it) and a message naming the shard and the member;
// the next read requests the chunk again.
TEST(MemberStreams, AFailedRequestNamesTheShardAndMemberAndTheNextReadAsksAgain) {
  FakeObject object(512 + 612 * 3);
  int calls = 0;
  auto inner = object.fetch();
  MemberStreams streams([&](const std::string& url, std::uint64_t offset, std::uint64_t size,
                            std::uint64_t object_size, const std::string& etag,
                            const MemberStreams::Sink& sink) {
    if (++calls == 1) {
      sink(object.bytes.data() + offset, 50);  // half of member 0, then the failure
      throw transport::StorageError(transport::StorageErrc::throttled, url,
                                    "GET " + url + ": SlowDown (HTTP 503)", "SlowDown", 503);
    }
    inner(url, offset, size, object_size, etag, sink);
  });
  streams.plan("s3://b/train-000001.tar", object.bytes.size(), "", members(3));
  try {
    (void)streams.read("s3://b/train-000001.tar", 512 + 612, 100);
    FAIL() << "no error";
  } catch (const transport::StorageError& e) {
    EXPECT_EQ(e.storage_code(), transport::StorageErrc::throttled);
    EXPECT_EQ(e.code(), std::errc::resource_unavailable_try_again);
    const std::string what = e.what();
    EXPECT_NE(what.find("shard s3://b/train-000001.tar member m1.jpg (bytes 1124-1224)"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("SlowDown"), std::string::npos) << what;
  }
  EXPECT_EQ(streams.stats().held_bytes, 0u);  // the half member is not kept
  for (std::uint64_t i = 0; i < 3; ++i) {
    const auto bytes = streams.read("s3://b/train-000001.tar", 512 + 612 * i, 100);
    ASSERT_TRUE(bytes);
    EXPECT_EQ(*bytes, object.slice(512 + 612 * i, 100));
  }
  EXPECT_EQ(calls, 2);
}

TEST(MemberStreams, ASecondReadOfAMemberRequestsItsChunkAgain) {
  FakeObject object(512 + 612 * 3);
  MemberStreams streams(object.fetch());
  streams.plan("u", object.bytes.size(), "", members(3));
  for (int round = 0; round < 2; ++round) {
    const auto bytes = streams.read("u", 512, 100);
    ASSERT_TRUE(bytes);
    EXPECT_EQ(*bytes, object.slice(512, 100));
  }
  EXPECT_EQ(object.fetches.size(), 2u);
}

// Beyond the bound, the least recently read shard's members are dropped (and requested
// again when read); the shard being read keeps its own.
TEST(MemberStreams, TheHeldBoundDropsTheLeastRecentlyReadShard) {
  FakeObject object(512 + 612 * 4);
  MemberStreams streams(object.fetch(), {.held_bytes = 400});
  for (const char* url : {"a", "b"}) streams.plan(url, object.bytes.size(), "", members(4));
  ASSERT_TRUE(streams.read("a", 512, 100));  // a holds 300
  ASSERT_TRUE(streams.read("b", 512, 100));  // b holds 300: 600 > 400, a dropped
  EXPECT_EQ(streams.stats().held_bytes, 300u);
  EXPECT_EQ(streams.stats().dropped_bytes, 300u);
  const auto again = streams.read("a", 512 + 612, 100);
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, object.slice(512 + 612, 100));
  EXPECT_EQ(object.fetches.size(), 3u);
}

TEST(MemberStreams, OnlyPlannedMembersAreServed) {
  FakeObject object(512 + 612 * 2);
  MemberStreams streams(object.fetch());
  streams.plan("u", object.bytes.size(), "", members(2));
  EXPECT_FALSE(streams.read("v", 512, 100));  // not planned
  EXPECT_FALSE(streams.read("u", 512, 99));   // not a member's range
  EXPECT_FALSE(streams.read("u", 0, 512));    // a header
  EXPECT_TRUE(object.fetches.empty());
  EXPECT_THROW(streams.plan("u", 600, "", members(2)), std::invalid_argument);  // beyond the end
  EXPECT_THROW(streams.plan("u", 2000, "", {{0, 100, "a"}, {50, 100, "b"}}),
               std::invalid_argument);  // overlapping
}

// Many readers at once over a few shards, each member read once: every read gets its
// bytes, one request per shard.
TEST(MemberStreams, ConcurrentReadsOfAWindowOfShardsGetTheirBytes) {
  FakeObject object(512 + 612 * 64);
  MemberStreams streams(object.fetch());
  std::vector<std::pair<std::string, PlannedMember>> reads;
  for (int s = 0; s < 4; ++s) {
    const std::string url = "s" + std::to_string(s);
    streams.plan(url, object.bytes.size(), "", members(64));
    for (const auto& m : members(64)) reads.emplace_back(url, m);
  }
  std::shuffle(reads.begin(), reads.end(), std::mt19937(9));
  std::atomic<std::size_t> next{0};
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&] {
      for (std::size_t i; (i = next.fetch_add(1)) < reads.size();) {
        const auto& [url, m] = reads[i];
        const auto bytes = streams.read(url, m.offset, m.size);
        if (!bytes || *bytes != object.slice(m.offset, m.size)) ++wrong;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(object.fetches.size(), 4u);
  EXPECT_EQ(streams.stats().held_bytes, 0u);
}

}  // namespace
}  // namespace brigade::launch::detail
