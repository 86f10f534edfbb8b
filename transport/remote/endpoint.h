#pragma once

// A network address as the command line and config files write it: "HOST:PORT", with
// IPv6 hosts in brackets ("[::1]:7000"). Port 0 asks the system for a free port where
// an address is listened on.
//
// THREADING. Plain values and functions.

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace brigade::transport {

struct Endpoint {
  std::string host{};
  std::uint16_t port = 0;

  /// "host:port" (IPv6 hosts in brackets).
  std::string to_string() const;
  friend bool operator==(const Endpoint&, const Endpoint&) = default;
  friend auto operator<=>(const Endpoint&, const Endpoint&) = default;
};

/// A malformed endpoint; what() names `where` (a flag, a key, a variable) and the text.
class EndpointError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// Parses "HOST:PORT" ("[V6]:PORT"). The host must not be empty and the port must be
/// 0–65535 (port 0 only if `allow_port_zero`). Throws EndpointError naming `where`.
Endpoint parse_endpoint(std::string_view text, std::string_view where,
                        bool allow_port_zero = false);

}  // namespace brigade::transport
