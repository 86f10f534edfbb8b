#pragma once

// Cap'n Proto messages that cross the network, for the rooms that own them: the remote
// layer's protocol (transport/remote/remote.capnp) and the decode operation
// (launch/loader/decode_op.capnp). Writing a built message into the bytes a CAF message
// carries, and reading the bytes a peer sent without trusting them.
//
// AN INTERNAL ROOM. Header-only (brigade_wire, an INTERFACE target) and never installed:
// it names Cap'n Proto types, which no installed header may. Rooms link it PRIVATE and
// include it only from their sources and detail/ headers (DESIGN.md).
//
// ERRORS. Malformed bytes become the reading room's own error `Error` (constructed from
// one string) — never a kj::Exception, never a crash: "malformed message: <cause>", or
// "message of <n> bytes exceeds the limit of <kMaxMessageBytes>". The remote layer and the
// decode operation both read with Error = transport::RemoteError.
//
// THREADING. A Reader is one thread's; the functions are plain.

#include <capnp/serialize.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace brigade::transport::wire {

/// Largest message accepted from the network (a batch of 1,024 224² images is 154 MB).
inline constexpr std::size_t kMaxMessageBytes = std::size_t{1} << 30;

/// Serializes a built message into the bytes a CAF message carries.
inline std::vector<char> to_bytes(capnp::MessageBuilder& message) {
  std::vector<char> out(capnp::computeSerializedSizeInWords(message) * sizeof(capnp::word));
  kj::ArrayOutputStream stream(kj::arrayPtr(reinterpret_cast<kj::byte*>(out.data()), out.size()));
  capnp::writeMessage(stream, message);
  return out;
}

/// Calls `fn` (reading a message's fields) and turns any kj::Exception it throws into
/// Error("malformed message: <cause>").
template <class Error, class F>
auto checked_read(F&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const kj::Exception& e) {
    throw Error(std::string("malformed message: ") + e.getDescription().cStr());
  }
}

/// Reads Cap'n Proto bytes received from a peer: checks size and alignment (copying
/// into aligned memory if needed) and bounds traversal by the message's size. The
/// constructor and root<T>() throw Error for malformed bytes; what a root's getters
/// read is checked by checked_read().
template <class Error>
class Reader {
 public:
  explicit Reader(std::span<const char> bytes) {
    if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0) {
      throw Error("malformed message: " + std::to_string(bytes.size()) +
                  " bytes is not a whole number of words");
    }
    if (bytes.size() > kMaxMessageBytes) {
      throw Error("message of " + std::to_string(bytes.size()) + " bytes exceeds the limit of " +
                  std::to_string(kMaxMessageBytes));
    }
    const auto words = bytes.size() / sizeof(capnp::word);
    const auto* begin = reinterpret_cast<const capnp::word*>(bytes.data());
    if (reinterpret_cast<std::uintptr_t>(bytes.data()) % alignof(capnp::word) != 0) {
      aligned_.resize(words);
      std::memcpy(aligned_.data(), bytes.data(), bytes.size());
      begin = aligned_.data();
    }
    capnp::ReaderOptions options;
    options.traversalLimitInWords = words + 64;
    options.nestingLimit = 16;
    reader_ = checked_read<Error>([&] {
      return std::make_unique<capnp::FlatArrayMessageReader>(kj::arrayPtr(begin, words), options);
    });
  }

  template <class T>
  typename T::Reader root() {
    return checked_read<Error>([&] { return reader_->getRoot<T>(); });
  }

 private:
  std::vector<capnp::word> aligned_;
  std::unique_ptr<capnp::FlatArrayMessageReader> reader_;
};

inline std::string to_string(capnp::Data::Reader data) {
  return {reinterpret_cast<const char*>(data.begin()), data.size()};
}
inline capnp::Data::Reader as_data(std::string_view s) {
  return {reinterpret_cast<const capnp::byte*>(s.data()), s.size()};
}

}  // namespace brigade::transport::wire
