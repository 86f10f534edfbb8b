#pragma once

// The messages of transport/remote/remote.capnp as plain values: write_*() builds a message's
// bytes, read_*() parses bytes a peer sent into a value or throws RemoteError — never
// anything else, never a crash, whatever the bytes (tests/transport/wire_test.cc feeds
// them mutations under AddressSanitizer). Reading copies out what it keeps, except
// DecodeResultFields::data, which points into the bytes given (keep them alive).

#include <cstdint>
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

/// The built-in decode operations' task (launch/loader/remote_ops.h gives it meaning).
struct DecodeTaskFields {
  std::uint8_t kind = 0, layout = 0;
  std::uint32_t side = 0, clip_frames = 0;
  std::uint64_t seed = 0, epoch = 0;
  std::uint8_t transform = 0;  // values unchecked here (launch/loader/remote_ops.cc checks them)
  std::uint32_t resize = 0;
  double scale_min = 0, scale_max = 0, ratio_min = 0, ratio_max = 0, flip_probability = 0;
  bool exif_orientation = false;
  std::uint32_t clip_stride = 0;
  bool roi_decode = true;
  struct Sample {
    std::uint64_t id = 0;
    std::string path;
  };
  std::vector<Sample> samples;
};
std::vector<char> write_decode_task(const DecodeTaskFields& task);
/// At most `max_samples` samples, paths of at most 4,096 bytes.
DecodeTaskFields read_decode_task(std::span<const char> bytes, std::size_t max_samples);

struct DecodeResultFields {
  std::vector<std::uint64_t> ids;
  std::vector<std::int64_t> shape;
  std::span<const std::uint8_t> data;  // into the bytes read
  struct Failure {
    std::uint32_t index = 0;
    std::uint64_t id = 0;
    std::string message, category;
    std::int32_t code = 0;
  };
  std::vector<Failure> failures;
};
/// Reads a result; `data` stays valid while `bytes` and the reader's storage do, so the
/// reader is kept in `keep` (aligned copies of misaligned input live there too).
DecodeResultFields read_decode_result(std::span<const char> bytes, std::shared_ptr<void>& keep);

}  // namespace brigade::transport::detail
