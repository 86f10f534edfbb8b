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
#include <stop_token>
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
  std::size_t ended = 0;  // fetches that delivered their whole range
  std::condition_variable changed;

  explicit FakeObject(std::size_t size) : bytes(size) {
    std::mt19937 random(25);
    for (auto& b : bytes) b = static_cast<std::byte>(random());
  }
  MemberStreams::Fetch fetch() {
    return [this](const std::string&, std::uint64_t offset, std::uint64_t size, std::uint64_t,
                  const std::string&, const MemberStreams::Sink& sink, std::stop_token) {
      {
        std::lock_guard lock(mutex);
        fetches.emplace_back(offset, size);
      }
      for (std::uint64_t at = 0; at < size; at += piece) {
        sink(bytes.data() + offset + at, std::min<std::uint64_t>(piece, size - at));
      }
      std::lock_guard lock(mutex);
      ++ended;
      changed.notify_all();
    };
  }
  // Waits until `n` fetches have delivered their whole range.
  void wait_ended(std::size_t n) {
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return ended >= n; });
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
  // At most the whole shard's members at once (the reads take them as they arrive).
  EXPECT_LE(streams.stats().peak_held_bytes, 20u * 100);
  EXPECT_GT(streams.stats().peak_held_bytes, 0u);
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
                            std::uint64_t, const std::string&, const MemberStreams::Sink& sink,
                            std::stop_token) {
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
                            const MemberStreams::Sink& sink, std::stop_token stop) {
    if (++calls == 1) {
      sink(object.bytes.data() + offset, 50);  // half of member 0, then the failure
      throw transport::StorageError(transport::StorageErrc::throttled, url,
                                    "GET " + url + ": SlowDown (HTTP 503)", "SlowDown", 503);
    }
    inner(url, offset, size, object_size, etag, sink, stop);
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
  object.wait_ended(1);                      // a's fetch is over: a is idle
  ASSERT_TRUE(streams.read("b", 512, 100));  // b holds 300: 600 > 400, a dropped
  object.wait_ended(2);                      // the bound is kept as members arrive
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

// A prefetched shard is fetched before any read asks (the sampler named it): its reads
// then make no request.
TEST(MemberStreams, APrefetchedShardIsFetchedBeforeItsFirstReadAndItsReadsAskNothing) {
  FakeObject object(512 + 612 * 8);
  MemberStreams streams(object.fetch());
  streams.plan("a", object.bytes.size(), "", members(8));
  streams.plan("b", object.bytes.size(), "", members(8));
  streams.prefetch("b");
  streams.prefetch("unplanned");  // nothing
  object.wait_ended(1);
  EXPECT_EQ(streams.stats().prefetches, 1u);
  EXPECT_EQ(streams.stats().held_bytes, 800u);
  for (const auto& m : members(8)) {
    const auto bytes = streams.read("b", m.offset, m.size);
    ASSERT_TRUE(bytes);
    EXPECT_EQ(*bytes, object.slice(m.offset, m.size));
  }
  EXPECT_EQ(streams.stats().fetches, 1u);
  EXPECT_EQ(streams.stats().held_bytes, 0u);
}

// Prefetches start only within prefetch_bytes of held bytes: the second shard's waits
// until reads take the first one's members, then starts on its own (no read of it).
TEST(MemberStreams, APrefetchWaitsForReadsToMakeRoomWithinItsBound) {
  FakeObject object(512 + 612 * 2);
  MemberStreams streams(object.fetch(), {.prefetch_bytes = 250});
  streams.plan("a", object.bytes.size(), "", members(2));
  streams.plan("b", object.bytes.size(), "", members(2));
  streams.prefetch("a");  // nothing held: starts
  streams.prefetch("b");  // 200 held + 712 > 250: waits
  object.wait_ended(1);
  EXPECT_EQ(streams.stats().held_bytes, 200u);
  {
    std::lock_guard lock(object.mutex);
    ASSERT_EQ(object.fetches.size(), 1u);
  }
  for (const auto& m : members(2)) ASSERT_TRUE(streams.read("a", m.offset, m.size));
  object.wait_ended(2);  // room made: b's prefetch starts
  EXPECT_EQ(streams.stats().prefetches, 2u);
  EXPECT_EQ(streams.stats().held_bytes, 200u);
  for (const auto& m : members(2)) ASSERT_TRUE(streams.read("b", m.offset, m.size));
  EXPECT_EQ(streams.stats().fetches, 2u);
}

// Requests in flight never exceed `requests`, however many reads wait and shards are
// queued for prefetching.
TEST(MemberStreams, RequestsInFlightStayWithinTheBound) {
  FakeObject object(512 + 612 * 16);
  std::atomic<int> in_flight{0}, most{0};
  auto inner = object.fetch();
  MemberStreams streams(
      [&](const std::string& url, std::uint64_t offset, std::uint64_t size,
          std::uint64_t object_size, const std::string& etag, const MemberStreams::Sink& sink,
          std::stop_token stop) {
        const int now = ++in_flight;
        for (int m = most.load(); now > m && !most.compare_exchange_weak(m, now);) {
        }
        inner(url, offset, size, object_size, etag, sink, stop);
        --in_flight;
      },
      {.chunk_bytes = 1300, .requests = 2});
  std::vector<std::string> urls;
  for (int s = 0; s < 6; ++s) {
    urls.push_back("s" + std::to_string(s));
    streams.plan(urls.back(), object.bytes.size(), "", members(16));
  }
  for (const auto& url : {urls[4], urls[5]}) streams.prefetch(url);
  std::atomic<int> wrong{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 8; ++t) {
    readers.emplace_back([&, t] {
      for (const auto& m : members(16)) {
        const auto& url = urls[static_cast<std::size_t>(t) % 4];
        if (t >= 4 && m.offset % 1224 != 512) continue;  // the second reader of a shard: half
        const auto bytes = streams.read(url, m.offset, m.size);
        if (!bytes || *bytes != object.slice(m.offset, m.size)) ++wrong;
      }
    });
  }
  for (auto& r : readers) r.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_LE(most.load(), 2);
  EXPECT_GE(most.load(), 1);
}

// A stop given to a read waiting on its chunk returns it at once, `cancelled`, while the
// request it waits on is still held open by the server (here: a fetch that delivers
// nothing until the test lets it).
TEST(MemberStreams, AStoppedReadReturnsWhileItsRequestIsStillStalled) {
  FakeObject object(512 + 612 * 2);
  std::promise<void> started, release;
  auto released = release.get_future().share();
  std::atomic<bool> fetch_ended{false};
  MemberStreams streams([&](const std::string&, std::uint64_t offset, std::uint64_t size,
                            std::uint64_t, const std::string&, const MemberStreams::Sink& sink,
                            std::stop_token) {
    started.set_value();
    released.wait();  // the stalled request
    sink(object.bytes.data() + offset, size);
    fetch_ended = true;
  });
  streams.plan("s3://b/stalled.tar", object.bytes.size(), "", members(2));
  std::stop_source stop;
  auto read = std::async(std::launch::async, [&] {
    return streams.read("s3://b/stalled.tar", 512 + 612, 100, stop.get_token());
  });
  started.get_future().wait();  // the read has asked; its request is open, stalled
  stop.request_stop();
  try {
    (void)read.get();
    FAIL() << "no error";
  } catch (const transport::StorageError& e) {
    EXPECT_EQ(e.storage_code(), transport::StorageErrc::cancelled);
    EXPECT_NE(std::string(e.what()).find("shard s3://b/stalled.tar member m1.jpg"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fetch_ended.load());  // returned while the request was still stalled
  release.set_value();
  // The fetch went on: its members are kept for the next read, without a request.
  const auto again = streams.read("s3://b/stalled.tar", 512 + 612, 100);
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, object.slice(512 + 612, 100));
}

// The destructor stops the fetchers: a fetch under way sees its stop token requested.
TEST(MemberStreams, TheDestructorStopsAFetchUnderWay) {
  FakeObject object(512 + 612 * 2);
  std::promise<void> started;
  std::atomic<bool> saw_stop{false};
  {
    MemberStreams streams([&](const std::string&, std::uint64_t, std::uint64_t, std::uint64_t,
                              const std::string&, const MemberStreams::Sink&,
                              std::stop_token stop) {
      started.set_value();
      std::mutex mutex;
      std::unique_lock lock(mutex);
      std::condition_variable_any().wait(lock, stop, [] { return false; });
      saw_stop = stop.stop_requested();
      throw transport::StorageError(transport::StorageErrc::cancelled, "u", "cancelled");
    });
    streams.plan("u", object.bytes.size(), "", members(2));
    streams.prefetch("u");
    started.get_future().wait();
  }
  EXPECT_TRUE(saw_stop.load());
}

// A rank of several names the members it reads: requests span those only, one range
// while the gaps between them (other ranks' members) stay within gap_bytes; a member not
// named is still served, by a request of its own.
TEST(MemberStreams, ARankFetchesOnlyTheMembersItReadsCoalescingSmallGaps) {
  FakeObject object(512 + 612 * 10);
  MemberStreams streams(object.fetch(), {.gap_bytes = 1200});
  streams.plan("u", object.bytes.size(), "", members(10));
  std::vector<std::uint64_t> mine;
  for (const std::uint64_t i : {0, 1, 3, 7, 8}) mine.push_back(512 + 612 * i);
  streams.want("u", mine);
  // Gaps: 0-1 512 bytes, 1-3 1124 (one member between): one range; 3-7 2348: another.
  for (const auto offset : mine) {
    const auto bytes = streams.read("u", offset, 100);
    ASSERT_TRUE(bytes);
    EXPECT_EQ(*bytes, object.slice(offset, 100));
  }
  const auto five = streams.read("u", 512 + 612 * 5, 100);  // not named
  ASSERT_TRUE(five);
  EXPECT_EQ(*five, object.slice(512 + 612 * 5, 100));
  std::lock_guard lock(object.mutex);
  auto fetches = object.fetches;
  std::sort(fetches.begin(), fetches.end());
  ASSERT_EQ(fetches.size(), 3u);
  EXPECT_EQ(fetches[0], std::make_pair(std::uint64_t{512}, std::uint64_t{612 * 3 + 100}));
  EXPECT_EQ(fetches[1], std::make_pair(std::uint64_t{512 + 612 * 5}, std::uint64_t{100}));
  EXPECT_EQ(fetches[2], std::make_pair(std::uint64_t{512 + 612 * 7}, std::uint64_t{612 + 100}));
  EXPECT_EQ(streams.stats().held_bytes, 0u);  // nothing fetched that no read took
}

// A shard read in part (an epoch resumed, or ended early) is read whole in the next
// epoch: clear_prefetches() (an epoch's start) makes its members read so far wanted again,
// so one request spans them all, not one request each.
TEST(MemberStreams, ANewEpochReadsAPartlyReadShardInOneRequest) {
  FakeObject object(512 + 612 * 4);
  MemberStreams streams(object.fetch());
  streams.plan("u", object.bytes.size(), "", members(4));
  streams.offer("u", 512, object.slice(512, 100));
  ASSERT_TRUE(streams.read("u", 512, 100));  // taken; members 1-3 never read
  EXPECT_TRUE(object.fetches.empty());
  streams.clear_prefetches();
  auto order = members(4);
  std::rotate(order.begin(), order.begin() + 1, order.end());  // member 0 last
  for (const auto& m : order) ASSERT_TRUE(streams.read("u", m.offset, m.size));
  ASSERT_EQ(object.fetches.size(), 1u);
  EXPECT_EQ(object.fetches[0], std::make_pair(std::uint64_t{512}, std::uint64_t{612 * 3 + 100}));
}

// Members offered (a shard's bytes read whole to index it) are read without a request,
// within the held bound; beyond it they are refused and fetched when read.
TEST(MemberStreams, OfferedMembersAreReadWithoutARequestWithinTheBound) {
  FakeObject object(512 + 612 * 3);
  MemberStreams streams(object.fetch(), {.held_bytes = 250});
  streams.plan("u", object.bytes.size(), "", members(3));
  std::size_t kept = 0;
  for (const auto& m : members(3))
    kept += streams.offer("u", m.offset, object.slice(m.offset, m.size)) ? 1 : 0;
  EXPECT_EQ(kept, 2u);                                            // 300 > 250: the third refused
  EXPECT_FALSE(streams.offer("u", 513, object.slice(513, 100)));  // not a member
  EXPECT_FALSE(streams.offer("v", 512, object.slice(512, 100)));  // not planned
  for (const auto& m : members(2)) {
    const auto bytes = streams.read("u", m.offset, m.size);
    ASSERT_TRUE(bytes);
    EXPECT_EQ(*bytes, object.slice(m.offset, m.size));
  }
  EXPECT_TRUE(object.fetches.empty());
  const auto third = streams.read("u", 512 + 612 * 2, 100);
  ASSERT_TRUE(third);
  EXPECT_EQ(*third, object.slice(512 + 612 * 2, 100));
  ASSERT_EQ(object.fetches.size(), 1u);
  EXPECT_EQ(object.fetches[0], std::make_pair(std::uint64_t{512 + 612 * 2}, std::uint64_t{100}));
  EXPECT_EQ(streams.stats().offered_bytes, 200u);
}

}  // namespace
}  // namespace brigade::launch::detail
