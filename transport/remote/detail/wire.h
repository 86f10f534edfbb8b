#pragma once

// Cap'n Proto bytes that cross the network (transport/remote/remote.capnp): writing them into
// a CAF message's std::vector<char>, and reading what a peer sent without trusting it.

#include <capnp/serialize.h>

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "transport/remote/remote.h"

namespace brigade::transport::detail {

/// Largest message accepted from the network (a batch of 1,024 224² images is 154 MB).
inline constexpr std::size_t kMaxMessageBytes = std::size_t{1} << 30;

/// Serializes a built message into the bytes a CAF message carries.
std::vector<char> to_bytes(capnp::MessageBuilder& message);

/// Reads Cap'n Proto bytes received from a peer: checks size and alignment (copying
/// into aligned memory if needed), bounds traversal by the message's size. root<T>()
/// throws RemoteError for malformed bytes (never crashes).
class WireReader {
 public:
  explicit WireReader(std::span<const char> bytes);
  template <class T>
  typename T::Reader root() {
    try {
      return reader_->getRoot<T>();
    } catch (const kj::Exception& e) {
      throw RemoteError(std::string("malformed message: ") + e.getDescription().cStr());
    }
  }

 private:
  std::vector<capnp::word> aligned_;
  std::unique_ptr<capnp::FlatArrayMessageReader> reader_;
};

/// Calls `fn` and turns any kj::Exception it throws (reading a malformed message's
/// fields) into RemoteError.
template <class F>
auto checked_read(F&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const kj::Exception& e) {
    throw RemoteError(std::string("malformed message: ") + e.getDescription().cStr());
  }
}

inline std::string to_string(capnp::Data::Reader data) {
  return {reinterpret_cast<const char*>(data.begin()), data.size()};
}
inline capnp::Data::Reader as_data(std::string_view s) {
  return {reinterpret_cast<const capnp::byte*>(s.data()), s.size()};
}

}  // namespace brigade::transport::detail
