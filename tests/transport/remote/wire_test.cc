// The message decoders of the remote protocol against valid, mutated, truncated and
// random bytes: a value or a RemoteError, never a crash (run under ASan/UBSan in CI).
#include "transport/remote/detail/wire.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "tests/transport/wire/mutations.h"
#include "transport/remote/detail/wire_messages.h"

namespace brigade::transport::detail {
namespace {

// Feeds `decode` 2,000 mutations of `valid`; counts what was rejected.
int fuzz(const std::vector<char>& valid, const std::function<void(std::span<const char>)>& decode,
         unsigned seed) {
  std::mt19937 random(seed);
  int rejected = 0;
  for (int round = 0; round < 2000; ++round) {
    const auto bytes = test::mutated(valid, round, random);
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

// A hello names its rank (or none); rank weights carry the token's digest, and a weight
// of 0 or past kMaxRankWeight is malformed.
TEST(Wire, AHellosRankAndRankWeightsRoundTripAndBadWeightsAreRejected) {
  HelloFields h;
  h.protocol = 1;
  h.trainer_key = std::string(16, 'k');
  h.rank = 3;
  EXPECT_EQ(read_hello(write_hello(h)).rank, std::optional<std::uint32_t>(3));
  h.rank.reset();
  EXPECT_EQ(read_hello(write_hello(h)).rank, std::nullopt);
  const auto weights = write_rank_weights({"digest", {1000, 4000, 1}});
  const auto back = read_rank_weights(weights);
  EXPECT_EQ(back.token, "digest");
  EXPECT_EQ(back.weights, (std::vector<std::uint32_t>{1000, 4000, 1}));
  EXPECT_THROW(read_rank_weights(write_rank_weights({"digest", {1000, 0}})), RemoteError);
  EXPECT_THROW(read_rank_weights(write_rank_weights({"digest", {kMaxRankWeight + 1}})),
               RemoteError);
  EXPECT_GT(fuzz(
                weights, [](auto b) { read_rank_weights(b); }, 6),
            0);
}

// The decode operation's task and result are the loader's own schema:
// tests/launch/loader/decode_task_test.cc.
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

// RemoteError carries a std::error_code whose generic condition says whether retrying
// may help (the engine's actors::is_transient reads those conditions: checked in
// tests/launch/loader/remote_ops_test.cc); its what() is the text alone.
TEST(RemoteError, CodesSayWhetherRetryingHelps) {
  const RemoteError plain("a task of unknown kind");
  EXPECT_STREQ(plain.what(), "a task of unknown kind");
  EXPECT_EQ(plain.code(), RemoteErrc::failed);
  EXPECT_EQ(plain.code(), std::errc::protocol_error);
  EXPECT_EQ(RemoteError(RemoteErrc::unreachable, "x").code(), std::errc::connection_refused);
  EXPECT_EQ(make_error_code(RemoteErrc::timed_out), std::errc::timed_out);
  EXPECT_EQ(make_error_code(RemoteErrc::connection_lost), std::errc::connection_aborted);
  EXPECT_EQ(make_error_code(RemoteErrc::refused), std::errc::permission_denied);
  // A sample lost on every attempt allowed (a poison file) matches no generic
  // condition, so no transient one.
  const auto lost = make_error_code(RemoteErrc::lost_on_attempts);
  EXPECT_EQ(lost.default_error_condition().category(), remote_category());
  EXPECT_NE(lost, std::errc::connection_aborted);
  EXPECT_EQ(remote_code_name(RemoteErrc::lost_on_attempts), "lost_on_attempts");
  EXPECT_STREQ(remote_category().name(), "brigade.remote");
}

}  // namespace
}  // namespace brigade::transport::detail
