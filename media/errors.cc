#include "media/errors.h"

#include <atomic>

namespace brigade::media {
namespace {

class MediaCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "brigade.media"; }
  std::string message(int code) const override {
    return std::string(error_code_name(static_cast<ErrorCode>(code)));
  }
  std::error_condition default_error_condition(int code) const noexcept override {
    switch (static_cast<ErrorCode>(code)) {
      case ErrorCode::not_found:
        return std::errc::no_such_file_or_directory;
      case ErrorCode::io:
        return std::errc::io_error;
      case ErrorCode::unavailable:
        return std::errc::resource_unavailable_try_again;
      case ErrorCode::bad_data:
        return std::errc::illegal_byte_sequence;
      case ErrorCode::unsupported:
        return std::errc::not_supported;
      case ErrorCode::invalid_argument:
        return std::errc::invalid_argument;
    }
    return {code, *this};
  }
};

}  // namespace

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

#ifdef BRIGADE_MEDIA_FFMPEG_PLUGIN
// Inside the FFmpeg plugin, which builds its own copy of this file: the loading core's
// category (the plugin's entry point sets it), so that the plugin's error codes compare
// equal to the core's (std::error_category compares by address).
namespace detail {
std::atomic<const std::error_category*> host_media_category{nullptr};
}  // namespace detail
#endif

const std::error_category& media_category() noexcept {
#ifdef BRIGADE_MEDIA_FFMPEG_PLUGIN
  if (const std::error_category* host = detail::host_media_category.load()) return *host;
#endif
  static const MediaCategory category;
  return category;
}

std::error_code make_error_code(ErrorCode code) noexcept {
  return {static_cast<int>(code), media_category()};
}

MediaError::MediaError(ErrorCode code, std::string input, std::string cause)
    : std::system_error(make_error_code(code)),
      media_code_(code),
      input_(std::move(input)),
      cause_(std::move(cause)),
      text_(input_ + ": " + cause_ + " [" + std::string(error_code_name(code)) + "]") {}

}  // namespace brigade::media
