#pragma once
// Typed errors of the media library.
//
// Every function of brigade::media reports failure by throwing MediaError (and
// nothing else, except std::bad_alloc). The error names the input (a file path,
// or the name the caller gave a byte buffer) and the cause, including the C
// library's own message (FFmpeg's av_strerror text, TurboJPEG's, zlib's).
// A function that throws leaves no partly filled result behind as a success:
// a caller-provided output buffer may hold garbage after an exception.

#include <stdexcept>
#include <string>
#include <string_view>

namespace brigade::media {

enum class ErrorCode {
  not_found,         // the file does not exist
  io,                // reading failed (permission, I/O error, out of memory)
  unavailable,       // a transient failure: retrying may succeed (timeouts, EAGAIN)
  bad_data,          // corrupt, truncated or empty input; zero dimensions
  unsupported,       // format, codec, pixel format or dtype we do not handle
  invalid_argument,  // the caller's options are inconsistent with the input
};

std::string_view error_code_name(ErrorCode code);

class MediaError : public std::runtime_error {
 public:
  // what() is "<input>: <cause> [<code>]".
  MediaError(ErrorCode code, std::string input, std::string cause);

  ErrorCode code() const noexcept { return code_; }
  const std::string& input() const noexcept { return input_; }
  const std::string& cause() const noexcept { return cause_; }
  // True when retrying the same call may succeed (only ErrorCode::unavailable);
  // corrupt data never becomes valid by retrying.
  bool transient() const noexcept { return code_ == ErrorCode::unavailable; }

 private:
  ErrorCode code_;
  std::string input_;
  std::string cause_;
};

}  // namespace brigade::media
