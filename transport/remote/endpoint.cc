#include "transport/remote/endpoint.h"

#include <fmt/format.h>

#include <charconv>

namespace brigade::transport {

std::string Endpoint::to_string() const {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

Endpoint parse_endpoint(std::string_view text, std::string_view where, bool allow_port_zero) {
  auto fail = [&](std::string_view why) {
    return EndpointError(
        fmt::format("{}: expected HOST:PORT ({}), got '{}'", where, why, std::string(text)));
  };
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos) throw fail("no port");
  std::string_view host = text.substr(0, colon);
  const std::string_view port = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    throw fail("an IPv6 host goes in brackets");
  }
  if (host.empty()) throw fail("empty host");
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc{} || end != port.data() + port.size() || value > 65535) {
    throw fail("the port is a number 0-65535");
  }
  if (value == 0 && !allow_port_zero) throw fail("port 0 is only for listening");
  return {std::string(host), static_cast<std::uint16_t>(value)};
}

}  // namespace brigade::transport
