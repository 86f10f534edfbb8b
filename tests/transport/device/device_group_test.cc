#include "transport/device/device_group.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <future>
#include <random>
#include <thread>

#include "transport/device/detail/device_cpu.h"

namespace brigade::transport {
namespace {

namespace fs = std::filesystem;
using detail::CpuDevice;
using media::DType;
using media::Tensor;
using namespace std::chrono_literals;

// One rank: its CPU device, a copy stage (the root's batches) and a pool to receive into.
struct Rank {
  std::shared_ptr<CpuDevice> device = std::make_shared<CpuDevice>();
  BufferPool host{device, BufferPool::Memory::pinned_host, {.max_buffers = 8}};
  BufferPool received{device, BufferPool::Memory::device, {.max_buffers = 8}};
  CopyStage stage{device, {.device_buffers = 8}};

  DeviceBatch make(std::vector<std::int64_t> shape, DType dtype, int seed) {
    auto t = Tensor::empty(dtype, std::move(shape), host.allocator());
    auto* p = static_cast<std::uint8_t*>(t.data());
    for (std::size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<std::uint8_t>(seed * 31 + i);
    return stage(t);
  }
};

std::vector<std::uint8_t> bytes_of(const DeviceBatch& b) {
  b.wait();
  const auto* p = b.data_as<const std::uint8_t>();
  return {p, p + b.nbytes()};
}

// Joins `size` ranks concurrently (construction waits for all of them).
std::vector<std::unique_ptr<DeviceGroup>> join_all(std::vector<Rank>& ranks,
                                                   const DeviceGroupId& id,
                                                   JoinOptions options = {}) {
  std::vector<std::future<std::unique_ptr<DeviceGroup>>> joining;
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
    joining.push_back(std::async(std::launch::async, [&, r] {
      return std::make_unique<DeviceGroup>(ranks[r].device, id, r, options);
    }));
  }
  std::vector<std::unique_ptr<DeviceGroup>> groups;
  for (auto& j : joining) groups.push_back(j.get());
  return groups;
}

TEST(DeviceGroup, BroadcastsEachBatchToEveryRank) {
  std::vector<Rank> ranks(3);
  auto groups = join_all(ranks, new_device_group_id(DeviceKind::cpu, 3));
  const std::vector<std::pair<std::vector<std::int64_t>, DType>> batches{
      {{4, 8, 8, 3}, DType::uint8},
      {{4, 3, 8, 8}, DType::float32},
      {{1, 8, 8, 3}, DType::uint8},  // a last, partial batch
      {{0, 8, 8, 3}, DType::uint8},  // empty
  };
  std::vector<std::future<std::vector<DeviceBatch>>> runs;
  for (int r = 0; r < 3; ++r) {
    runs.push_back(std::async(std::launch::async, [&, r] {
      std::vector<DeviceBatch> got;
      for (std::size_t i = 0; i < batches.size(); ++i) {
        DeviceBatch mine;
        if (r == 1) mine = ranks[1].make(batches[i].first, batches[i].second, static_cast<int>(i));
        got.push_back(groups[r]->broadcast(mine, 1, ranks[r].received));
      }
      return got;
    }));
  }
  std::vector<std::vector<DeviceBatch>> results;
  for (auto& run : runs) results.push_back(run.get());
  for (std::size_t i = 0; i < batches.size(); ++i) {
    for (int r = 0; r < 3; ++r) {
      const auto& b = results[r][i];
      EXPECT_EQ(b.shape(), batches[i].first) << "rank " << r << " batch " << i;
      EXPECT_EQ(b.dtype(), batches[i].second);
      EXPECT_EQ(bytes_of(b), bytes_of(results[1][i])) << "rank " << r << " batch " << i;
    }
  }
}

TEST(DeviceGroup, SendsAndReceivesInOrder) {
  std::vector<Rank> ranks(2);
  auto groups = join_all(ranks, new_device_group_id(DeviceKind::cpu, 2));
  std::vector<DeviceBatch> sent;
  for (int i = 0; i < 5; ++i) {
    sent.push_back(ranks[0].make({2, 4, 4, 3}, DType::uint8, i));
    groups[0]->send(sent.back(), 1);  // returns at once: nobody has received yet
  }
  for (int i = 0; i < 5; ++i) {
    auto got = groups[1]->recv(0, ranks[1].received);
    EXPECT_EQ(bytes_of(got), bytes_of(sent[i])) << "batch " << i;
  }
}

TEST(DeviceGroup, ASenderRunsAtMostMaxInFlightBatchesAhead) {
  std::vector<Rank> ranks(2);
  auto groups = join_all(ranks, new_device_group_id(DeviceKind::cpu, 2), {.max_in_flight = 2});
  std::vector<DeviceBatch> sent;
  for (int i = 0; i < 3; ++i) sent.push_back(ranks[0].make({1, 2, 2, 3}, DType::uint8, i));
  groups[0]->send(sent[0], 1);
  groups[0]->send(sent[1], 1);
  auto third = std::async(std::launch::async, [&] { groups[0]->send(sent[2], 1); });
  EXPECT_EQ(third.wait_for(50ms), std::future_status::timeout);
  EXPECT_EQ(bytes_of(groups[1]->recv(0, ranks[1].received)), bytes_of(sent[0]));
  third.get();
  EXPECT_EQ(bytes_of(groups[1]->recv(0, ranks[1].received)), bytes_of(sent[1]));
  EXPECT_EQ(bytes_of(groups[1]->recv(0, ranks[1].received)), bytes_of(sent[2]));
}

TEST(DeviceGroup, TheRootDoesNotWaitForItsReceivers) {
  std::vector<Rank> ranks(2);
  auto groups = join_all(ranks, new_device_group_id(DeviceKind::cpu, 2));
  auto batch = ranks[0].make({2, 2, 2, 3}, DType::uint8, 1);
  auto sent = groups[0]->broadcast(batch, 0, ranks[0].received);  // returned: did not wait
  EXPECT_FALSE(sent.ready());  // queued behind a broadcast that rank 1 has not joined
  auto got = groups[1]->broadcast({}, 0, ranks[1].received);
  sent.wait();
  EXPECT_EQ(bytes_of(got), bytes_of(batch));
}

TEST(DeviceGroup, AStopWhileWaitingForAPeerAbortsTheGroup) {
  std::vector<Rank> ranks(2);
  auto groups = join_all(ranks, new_device_group_id(DeviceKind::cpu, 2));
  std::stop_source stop;
  auto waiting = std::async(
      std::launch::async, [&] { return groups[1]->recv(0, ranks[1].received, stop.get_token()); });
  EXPECT_EQ(waiting.wait_for(50ms), std::future_status::timeout);
  stop.request_stop();
  EXPECT_THROW(waiting.get(), StopRequested);
  ranks[1].device->synchronize();  // its queue is not stuck on the missing peer
  EXPECT_THROW(groups[1]->recv(0, ranks[1].received), DeviceError);  // aborted for good
}

// Issue 22 item 4: a group destroyed with a send queued to a peer that died (its group
// gone) waited for ever: the header pools, destroyed before the communicator, waited
// for fences that only the dead peer could complete. (The bound is a hang detector.)
TEST(DeviceGroup, DestroyedWithATransferToADeadPeerAbortsInsteadOfHanging) {
  std::vector<Rank> ranks(2);
  auto groups = join_all(ranks, new_device_group_id(DeviceKind::cpu, 2),
                         {.teardown_timeout = std::chrono::milliseconds(20)});
  groups[1].reset();  // the peer is gone
  auto batch = ranks[0].make({1, 2, 2, 3}, DType::uint8, 1);
  groups[0]->send(batch, 1);
  auto teardown = std::async(std::launch::async, [&] {
    groups[0].reset();
    ranks[0].device->synchronize();  // the queue is not stuck on the dead peer either
  });
  ASSERT_EQ(teardown.wait_for(60s), std::future_status::ready) << "teardown hangs";
  teardown.get();
}

// A live peer's last transfers complete before the group goes (teardown_timeout).
TEST(DeviceGroup, DestroyedWithATransferToALivePeerLetsItComplete) {
  std::vector<Rank> ranks(2);
  auto groups = join_all(ranks, new_device_group_id(DeviceKind::cpu, 2),
                         {.teardown_timeout = std::chrono::minutes(5)});
  auto batch = ranks[0].make({1, 2, 2, 3}, DType::uint8, 2);
  groups[0]->send(batch, 1);
  auto received =
      std::async(std::launch::async, [&] { return groups[1]->recv(0, ranks[1].received); });
  groups[0].reset();  // waits for the transfer, which the peer's recv completes
  EXPECT_EQ(bytes_of(received.get()), bytes_of(batch));
}

// Issue 22 item 4: a sender stopped while waiting for room (max_in_flight batches queued
// to a peer that no longer receives) left its queued transfers stuck: now it aborts, as
// a stop in recv's wait always did.
TEST(DeviceGroup, AStopWhileASenderWaitsForRoomAbortsTheGroup) {
  std::vector<Rank> ranks(2);
  auto groups = join_all(ranks, new_device_group_id(DeviceKind::cpu, 2), {.max_in_flight = 1});
  auto first = ranks[0].make({1, 2, 2, 3}, DType::uint8, 1);
  auto second = ranks[0].make({1, 2, 2, 3}, DType::uint8, 2);
  groups[0]->send(first, 1);  // rank 1 never receives it
  std::stop_source stop;
  auto waiting =
      std::async(std::launch::async, [&] { groups[0]->send(second, 1, stop.get_token()); });
  EXPECT_EQ(waiting.wait_for(50ms), std::future_status::timeout);
  stop.request_stop();
  EXPECT_THROW(waiting.get(), StopRequested);
  auto drained = std::async(std::launch::async, [&] { ranks[0].device->synchronize(); });
  ASSERT_EQ(drained.wait_for(60s), std::future_status::ready) << "the queue is stuck";
  drained.get();
}

TEST(DeviceGroup, JoinTimesOutSayingWhoIsMissing) {
  Rank lonely;
  const auto id = new_device_group_id(DeviceKind::cpu, 2);
  try {
    DeviceGroup group(lonely.device, id, 0, {.timeout = 50ms});
    FAIL() << "joined without rank 1";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("1 of 2 ranks joined"), std::string::npos) << e.what();
  }
  std::stop_source stop;
  stop.request_stop();
  EXPECT_THROW(DeviceGroup(lonely.device, id, 0, {.stop = stop.get_token()}), StopRequested);
}

TEST(DeviceGroup, RejectsMismatchedArguments) {
  Rank r;
  EXPECT_THROW(DeviceGroup(r.device, new_device_group_id(DeviceKind::cpu, 2), 2),
               std::invalid_argument);
  auto cuda_id = DeviceGroupId{.kind = DeviceKind::cuda, .size = 1};
  EXPECT_THROW(DeviceGroup(r.device, cuda_id, 0), std::invalid_argument);
  EXPECT_THROW(new_device_group_id(DeviceKind::cpu, 0), std::invalid_argument);
}

TEST(DeviceGroup, IdRoundTripsAsACapnpMessage) {
  auto id = new_device_group_id(DeviceKind::cpu, 8);
  id.nccl_version = 22809;
  const auto bytes = encode_device_group_id(id);
  EXPECT_EQ(decode_device_group_id(bytes, "test"), id);
}

TEST(DeviceGroup, CorruptIdsAreRejectedNamingTheSource) {
  const auto bytes = encode_device_group_id(new_device_group_id(DeviceKind::cpu, 2));
  auto expect_rejected = [](std::span<const std::byte> b, const char* cause) {
    try {
      decode_device_group_id(b, "rank-0 directory");
      ADD_FAILURE() << "accepted " << cause;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("rank-0 directory"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(cause), std::string::npos) << e.what();
    }
  };
  expect_rejected(std::span(bytes).first(bytes.size() - 3), "not a Cap'n Proto message");
  auto wrong_magic = bytes;
  for (std::size_t i = 0; i < wrong_magic.size(); ++i) {
    std::uint64_t word;
    if (i % 8 == 0 && i + 8 <= wrong_magic.size()) {
      std::memcpy(&word, &wrong_magic[i], 8);
      if (word == 0x4449474447495242ULL) wrong_magic[i] = std::byte{0};
    }
  }
  expect_rejected(wrong_magic, "wrong magic number");
  std::mt19937 rng(5);
  for (int trial = 0; trial < 500; ++trial) {  // random damage: an error, never a crash
    auto damaged = bytes;
    damaged[rng() % damaged.size()] ^= std::byte(1 + rng() % 255);
    try {
      decode_device_group_id(damaged, "fuzz");
    } catch (const std::invalid_argument&) {
    }
  }
}

TEST(DeviceGroup, IdTravelsThroughAFileInASharedFolder) {
  const fs::path dir = fs::temp_directory_path() / ("brigade-group-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto file = dir / "group.id";
  const auto id = new_device_group_id(DeviceKind::cpu, 4);
  // The reader looks for the file until it appears: whether it looks first or the
  // writer writes first, it reads the whole id (the publish is atomic).
  auto reader = std::async(std::launch::async, [&] { return read_device_group_id(file, 60s); });
  write_device_group_id(file, id);
  EXPECT_EQ(reader.get(), id);
  for (const auto& entry : fs::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().filename(), "group.id");  // no temporary file left behind
  }
  try {
    read_device_group_id(dir / "missing.id", 30ms);
    FAIL() << "read a missing file";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("missing.id"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace brigade::transport
