#include "media/errors.h"

namespace brigade::media {

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::not_found:
      return "not_found";
    case ErrorCode::io:
      return "io";
    case ErrorCode::unavailable:
      return "unavailable";
    case ErrorCode::bad_data:
      return "bad_data";
    case ErrorCode::unsupported:
      return "unsupported";
    case ErrorCode::invalid_argument:
      return "invalid_argument";
  }
  return "unknown";
}

MediaError::MediaError(ErrorCode code, std::string input, std::string cause)
    : std::runtime_error(input + ": " + cause + " [" + std::string(error_code_name(code)) + "]"),
      code_(code),
      input_(std::move(input)),
      cause_(std::move(cause)) {}

}  // namespace brigade::media
