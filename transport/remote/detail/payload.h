#pragma once

// A result's bytes on the wire (issue 21: the trainer's CPU per remotely decoded sample).
// The worker sends its std::vector<char> as it is; the trainer reads the bytes straight
// into recycled memory: a block a dropped result gave back (up to kMaxFree blocks), no
// zero fill, no fresh pages — a std::vector<char> would take fresh mmap'ed pages for
// every large result (at a batch of 256 images, 38 MB: its page faults cost more than
// the copies) and zero them before the copy.
//
// TRUST. Reading a payload allocates only what the received message holds (never what
// its size field claims beyond that) and at most wire::kMaxMessageBytes.
//
// THREADING. The recycling pool is shared by every system of the process (a mutex).

#include <caf/all.hpp>
#include <cstring>
#include <string>
#include <type_traits>

#include "transport/remote/detail/wire.h"
#include "transport/remote/remote.h"

namespace brigade::transport::detail {

/// At most this many free blocks, of at most this many bytes in all, are kept for reuse.
inline constexpr std::size_t kMaxFreePayloads = 8;
inline constexpr std::size_t kMaxFreePayloadBytes = std::size_t{1} << 30;

/// `size` bytes of uninitialized memory, from a recycled block if one fits (its
/// capacity at least `size` and at most twice it); goes back to the pool when the last
/// owner drops it.
SharedBytes recycled_bytes(std::size_t size, char** data);

/// Free blocks held now (tests).
std::size_t free_payloads();

struct WirePayload {
  SharedBytes bytes;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, WirePayload& x) {
  if constexpr (std::is_base_of_v<caf::serializer, Inspector>) {
    auto n = x.bytes.size();
    return caf::error::eval(
        [&] { return f.begin_sequence(n); },
        [&] { return n > 0 ? f.apply_raw(n, const_cast<char*>(x.bytes.data())) : caf::none; },
        [&] { return f.end_sequence(); });
  } else if constexpr (std::is_base_of_v<caf::deserializer, Inspector>) {
    std::size_t n = 0;
    if (auto err = f.begin_sequence(n)) return err;
    // Never more than the message holds: a size field is only a claim.
    auto* binary = dynamic_cast<caf::binary_deserializer*>(&f);
    if (n > wire::kMaxMessageBytes || (binary && n > binary->remaining()))
      return caf::make_error(caf::sec::end_of_stream);
    char* data = nullptr;
    auto bytes = recycled_bytes(n, &data);
    if (n > 0)
      if (auto err = f.apply_raw(n, data)) return err;
    x.bytes = std::move(bytes);
    return f.end_sequence();
  } else {
    auto n = x.bytes.size();
    return f(caf::meta::type_name("brigade.payload"), n);
  }
}

}  // namespace brigade::transport::detail
