// The message decoders of the remote protocol against valid, mutated, truncated and
// random bytes: a value or a RemoteError, never a crash (run under ASan/UBSan in CI).
#include "transport/remote/detail/wire.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "transport/remote/detail/wire_messages.h"
#include "transport/remote/remote.capnp.h"

namespace brigade::transport::detail {
namespace {

// Feeds `decode` 2,000 mutations of `valid`; counts what was rejected.
int fuzz(const std::vector<char>& valid, const std::function<void(std::span<const char>)>& decode,
         unsigned seed) {
  std::mt19937 random(seed);
  int rejected = 0;
  for (int round = 0; round < 2000; ++round) {
    std::vector<char> bytes = valid;
    switch (round % 4) {
      case 0:  // flipped bits
        for (int i = 0, n = 1 + int(random() % 6); i < n; ++i)
          bytes[random() % bytes.size()] ^= char(1u << (random() % 8));
        break;
      case 1:  // truncated (to a word boundary or not)
        bytes.resize(random() % bytes.size());
        break;
      case 2:  // random words
        for (int i = 0, n = 1 + int(random() % 3); i < n; ++i) {
          const auto at = (random() % (bytes.size() / 8)) * 8;
          for (int k = 0; k < 8; ++k) bytes[at + k] = char(random());
        }
        break;
      default:  // random bytes of a random length
        bytes.resize(8 * (random() % 64));
        for (auto& c : bytes) c = char(random());
    }
    try {
      decode(bytes);
    } catch (const RemoteError&) {
      ++rejected;
    }
  }
  return rejected;
}

TEST(Wire, HelloRoundTripsAndSurvivesMutations) {
  HelloFields h{.protocol = 1,
                .build_id = "0.1.0+abc",
                .token = "token",
                .trainer_key = std::string(16, 'k'),
                .name = "rank 0",
                .operations = {{"brigade.decode.images", 1}, {"other", 7}},
                .fingerprint = 0xfeed};
  const auto bytes = write_hello(h);
  const auto back = read_hello(bytes);
  EXPECT_EQ(back.protocol, 1u);
  EXPECT_EQ(back.build_id, h.build_id);
  EXPECT_EQ(back.token, h.token);
  EXPECT_EQ(back.trainer_key, h.trainer_key);
  EXPECT_EQ(back.operations, h.operations);
  EXPECT_EQ(back.fingerprint, 0xfeedu);
  EXPECT_GT(fuzz(
                bytes, [](auto b) { read_hello(b); }, 1),
            0);
}

TEST(Wire, WelcomeJoinSubscribeAndWorkerListsSurviveMutations) {
  const auto welcome = write_welcome({.protocol = 1,
                                      .build_id = "b",
                                      .session_key = std::string(16, 's'),
                                      .name = "w",
                                      .window = 4,
                                      .threads = 2});
  EXPECT_EQ(read_welcome(welcome).window, 4u);
  EXPECT_GT(fuzz(
                welcome, [](auto b) { read_welcome(b); }, 2),
            0);
  const auto join = write_join({"token", "127.0.0.1:7000"});
  EXPECT_EQ(read_join(join).endpoint, "127.0.0.1:7000");
  EXPECT_GT(fuzz(
                join, [](auto b) { read_join(b); }, 3),
            0);
  const auto sub = write_subscribe({"token", "rank 1"});
  EXPECT_EQ(read_subscribe(sub).name, "rank 1");
  EXPECT_GT(fuzz(
                sub, [](auto b) { read_subscribe(b); }, 4),
            0);
  const auto list = write_worker_list({std::string(16, 'd'), {"a:1", "b:2"}});
  EXPECT_EQ(read_worker_list(list).endpoints, (std::vector<std::string>{"a:1", "b:2"}));
  EXPECT_GT(fuzz(
                list, [](auto b) { read_worker_list(b); }, 5),
            0);
}

TEST(Wire, DecodeTasksAndResultsSurviveMutations) {
  DecodeTaskFields t{.kind = 0,
                     .layout = 1,
                     .side = 224,
                     .clip_frames = 8,
                     .seed = 3,
                     .epoch = 2,
                     .transform = 1,
                     .resize = 288,
                     .scale_min = 0.25,
                     .scale_max = 0.9,
                     .ratio_min = 0.5,
                     .ratio_max = 2.0,
                     .flip_probability = 0.3,
                     .exif_orientation = true,
                     .roi_decode = false,
                     .samples = {}};
  for (std::uint64_t i = 0; i < 32; ++i) t.samples.push_back({i, "/data/img-" + std::to_string(i)});
  const auto task = write_decode_task(t);
  const auto back = read_decode_task(task, 1024);
  ASSERT_EQ(back.samples.size(), 32u);
  EXPECT_EQ(back.samples[31].path, "/data/img-31");
  EXPECT_EQ(back.side, 224u);
  // The transform's parameters cross exactly (a remote worker makes the same pixels).
  EXPECT_EQ(back.transform, 1);
  EXPECT_EQ(back.resize, 288u);
  EXPECT_EQ(back.scale_min, 0.25);
  EXPECT_EQ(back.scale_max, 0.9);
  EXPECT_EQ(back.ratio_min, 0.5);
  EXPECT_EQ(back.ratio_max, 2.0);
  EXPECT_EQ(back.flip_probability, 0.3);
  EXPECT_TRUE(back.exif_orientation);
  EXPECT_FALSE(back.roi_decode);  // default true: a full decode must be asked for
  EXPECT_THROW(read_decode_task(task, 31), RemoteError);  // more samples than allowed
  EXPECT_GT(fuzz(
                task, [](auto b) { read_decode_task(b, 1024); }, 6),
            0);

  // A valid result, built as a worker builds it.
  capnp::MallocMessageBuilder message;
  auto r = message.initRoot<wire::DecodeResult>();
  auto ids = r.initIds(3);
  for (unsigned i = 0; i < 3; ++i) ids.set(i, i);
  auto shape = r.initShape(4);
  shape.set(0, 3), shape.set(1, 4), shape.set(2, 4), shape.set(3, 3);
  auto data = r.initData(3 * 4 * 4 * 3);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<capnp::byte>(i);
  auto failures = r.initFailures(1);
  failures[0].setIndex(3);
  failures[0].setId(3);
  failures[0].setMessage("sample 3 (x): corrupt");
  const auto result = to_bytes(message);
  std::shared_ptr<void> keep;
  const auto f = read_decode_result(result, keep);
  EXPECT_EQ(f.ids, (std::vector<std::uint64_t>{0, 1, 2}));
  EXPECT_EQ(f.data.size(), 144u);
  EXPECT_EQ(f.data[143], 143);
  ASSERT_EQ(f.failures.size(), 1u);
  EXPECT_EQ(f.failures[0].message, "sample 3 (x): corrupt");
  EXPECT_GT(fuzz(
                result,
                [](auto b) {
                  std::shared_ptr<void> k;
                  const auto x = read_decode_result(b, k);
                  // What it returns is readable: touch every byte the span claims.
                  unsigned sum = 0;
                  for (auto byte : x.data) sum += byte;
                  (void)sum;
                },
                7),
            0);
}

TEST(Wire, MisalignedBytesAreCopiedNotRejected) {
  const auto bytes = write_join({"token", "h:1"});
  std::vector<char> shifted(bytes.size() + 1);
  std::copy(bytes.begin(), bytes.end(), shifted.begin() + 1);
  const auto j = read_join(std::span<const char>(shifted).subspan(1));
  EXPECT_EQ(j.endpoint, "h:1");
}

TEST(Wire, EmptyAndHugeClaimsAreRejected) {
  EXPECT_THROW(read_hello({}), RemoteError);
  std::vector<char> seven(7, 0);
  EXPECT_THROW(read_hello(seven), RemoteError);
  // A segment table claiming 2^32 - 1 words in a 16-byte message.
  std::vector<char> claim(16, 0);
  claim[4] = claim[5] = claim[6] = claim[7] = '\xff';
  EXPECT_THROW(read_hello(claim), RemoteError);
}

}  // namespace
}  // namespace brigade::transport::detail
