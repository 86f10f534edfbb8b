#pragma once

// The messages of transport/remote/remote.capnp as plain values: write_*() builds a message's
// bytes, read_*() parses bytes a peer sent into a value or throws RemoteError — never
// anything else, never a crash, whatever the bytes (tests/transport/remote/wire_test.cc
// feeds them mutations under AddressSanitizer). Reading copies out what it keeps.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "transport/remote/remote.h"

namespace brigade::transport::detail {

struct HelloFields {
  std::uint32_t protocol = 0;
  std::string build_id, token, trainer_key, name;
  std::vector<OperationVersion> operations;
  std::uint64_t fingerprint = 0;
  std::optional<std::uint32_t> rank{};  // the trainer's, if it has one
};
std::vector<char> write_hello(const HelloFields& hello);
HelloFields read_hello(std::span<const char> bytes);

struct WelcomeFields {
  std::uint32_t protocol = 0;
  std::string build_id, session_key, name;
  std::uint32_t window = 0, threads = 0;
};
std::vector<char> write_welcome(const WelcomeFields& welcome);
WelcomeFields read_welcome(std::span<const char> bytes);

struct JoinFields {
  std::string token, endpoint;
};
std::vector<char> write_join(const JoinFields& join);
JoinFields read_join(std::span<const char> bytes);

struct SubscribeFields {
  std::string token, name;
};
std::vector<char> write_subscribe(const SubscribeFields& subscribe);
SubscribeFields read_subscribe(std::span<const char> bytes);

struct WorkerListFields {
  std::string directory_key;
  std::vector<std::string> endpoints;
};
std::vector<char> write_worker_list(const WorkerListFields& list);
WorkerListFields read_worker_list(std::span<const char> bytes);

/// At most kMaxRanks weights, each 1 .. kMaxRankWeight.
struct RankWeightsFields {
  static constexpr std::size_t kMaxRanks = 1 << 16;
  std::string token{};
  std::vector<std::uint32_t> weights{};
};
std::vector<char> write_rank_weights(const RankWeightsFields& weights);
RankWeightsFields read_rank_weights(std::span<const char> bytes);

}  // namespace brigade::transport::detail
