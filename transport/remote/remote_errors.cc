#include <string>

#include "transport/remote/remote.h"

namespace brigade::transport {
namespace {

class RemoteCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "brigade.remote"; }
  std::string message(int value) const override {
    switch (static_cast<RemoteErrc>(value)) {
      case RemoteErrc::failed:
        return "remote setup or protocol error";
      case RemoteErrc::refused:
        return "refused by the peer";
      case RemoteErrc::unreachable:
        return "peer unreachable";
      case RemoteErrc::timed_out:
        return "peer timed out";
      case RemoteErrc::connection_lost:
        return "connection lost";
      case RemoteErrc::lost_on_attempts:
        return "lost on every attempt allowed";
    }
    return "unknown remote error";
  }
  // lost_on_attempts has no generic equivalent: no transient condition matches it.
  std::error_condition default_error_condition(int value) const noexcept override {
    switch (static_cast<RemoteErrc>(value)) {
      case RemoteErrc::failed:
        return std::errc::protocol_error;
      case RemoteErrc::refused:
        return std::errc::permission_denied;
      case RemoteErrc::unreachable:
        return std::errc::connection_refused;
      case RemoteErrc::timed_out:
        return std::errc::timed_out;
      case RemoteErrc::connection_lost:
        return std::errc::connection_aborted;
      case RemoteErrc::lost_on_attempts:
        break;
    }
    return {value, *this};
  }
};

}  // namespace

const std::error_category& remote_category() noexcept {
  static const RemoteCategory category;
  return category;
}

std::error_code make_error_code(RemoteErrc code) noexcept {
  return {static_cast<int>(code), remote_category()};
}

std::string_view remote_code_name(RemoteErrc code) {
  switch (code) {
    case RemoteErrc::failed:
      return "failed";
    case RemoteErrc::refused:
      return "refused";
    case RemoteErrc::unreachable:
      return "unreachable";
    case RemoteErrc::timed_out:
      return "timed_out";
    case RemoteErrc::connection_lost:
      return "connection_lost";
    case RemoteErrc::lost_on_attempts:
      return "lost_on_attempts";
  }
  return "unknown";
}

RemoteError::RemoteError(const std::string& what, RemoteErrc code)
    : std::system_error(make_error_code(code), what), text_(what) {}

}  // namespace brigade::transport
