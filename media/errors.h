#pragma once
// Typed errors of the media library.
//
// Every function of brigade::media reports failure by throwing MediaError (and
// nothing else, except std::bad_alloc). The error names the input (a file path,
// or the name the caller gave a byte buffer) and the cause, including the C
// library's own message (FFmpeg's av_strerror text, TurboJPEG's, zlib's).
// A function that throws leaves no partly filled result behind as a success:
// a caller-provided output buffer may hold garbage after an exception.
//
// CODES. MediaError is a std::system_error whose std::error_code (error_code(), or
// code() through a std::system_error reference) is in media_category(), so code
// that knows nothing of media (the pipeline engine, remote workers) can keep
// and compare the typed code. Each code maps to a generic std::errc condition:
//   not_found        -> no_such_file_or_directory
//   io               -> io_error
//   unavailable      -> resource_unavailable_try_again   (transient: a retry may help)
//   bad_data         -> illegal_byte_sequence
//   unsupported      -> not_supported
//   invalid_argument -> invalid_argument
// Only `unavailable` is transient (actors::is_transient); corrupt data never becomes
// valid by retrying. The numeric values are stable: they cross processes.

#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

namespace brigade::media {

enum class ErrorCode {
  not_found = 1,         // the file does not exist
  io = 2,                // reading failed (permission, I/O error, not a regular file)
  unavailable = 3,       // a transient failure: retrying may succeed (timeouts, EAGAIN)
  bad_data = 4,          // corrupt, truncated or empty input; zero dimensions
  unsupported = 5,       // format, codec, pixel format or dtype we do not handle
  invalid_argument = 6,  // the caller's options are inconsistent with the input
};

std::string_view error_code_name(ErrorCode code);

/// The category of ErrorCode ("brigade.media"); see CODES.
const std::error_category& media_category() noexcept;
std::error_code make_error_code(ErrorCode code) noexcept;

class MediaError : public std::system_error {
 public:
  // what() is "<input>: <cause> [<code>]".
  MediaError(ErrorCode code, std::string input, std::string cause);

  const char* what() const noexcept override { return text_.c_str(); }
  // The media code. (It hides std::system_error::code(); `error_code()` and a
  // `const std::system_error&` give the std::error_code.)
  ErrorCode code() const noexcept { return media_code_; }
  std::error_code error_code() const noexcept { return std::system_error::code(); }
  const std::string& input() const noexcept { return input_; }
  const std::string& cause() const noexcept { return cause_; }
  // True when retrying the same call may succeed (only ErrorCode::unavailable);
  // corrupt data never becomes valid by retrying.
  bool transient() const noexcept { return media_code_ == ErrorCode::unavailable; }

 private:
  ErrorCode media_code_;
  std::string input_;
  std::string cause_;
  std::string text_;
};

}  // namespace brigade::media

template <>
struct std::is_error_code_enum<brigade::media::ErrorCode> : std::true_type {};
