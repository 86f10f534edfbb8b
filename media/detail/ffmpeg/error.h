#pragma once
// The one place where FFmpeg's negative return codes become MediaError.

#include <string>
#include <string_view>

#include "media/errors.h"

namespace brigade::media::detail {

// FFmpeg's own text for an AVERROR code (av_strerror).
std::string averror_text(int errnum);
// Which ErrorCode an AVERROR code maps to.
ErrorCode averror_code(int errnum);

[[noreturn]] void throw_averror(int errnum, std::string_view input, std::string_view doing);

// Returns `ret` when it is not an error; throws MediaError naming `input` and
// saying what was being done ("while opening the decoder: Invalid data found...").
inline int check_averror(int ret, std::string_view input, std::string_view doing) {
  if (ret < 0) throw_averror(ret, input, doing);
  return ret;
}

}  // namespace brigade::media::detail
