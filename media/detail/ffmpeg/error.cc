#include "media/detail/ffmpeg/error.h"

#include <cerrno>

extern "C" {
#include <libavutil/error.h>
}

namespace brigade::media::detail {

std::string averror_text(int errnum) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(errnum, buf, sizeof(buf));
  return buf;
}

ErrorCode averror_code(int errnum) {
  switch (errnum) {
    case AVERROR(ENOENT):
      return ErrorCode::not_found;
    case AVERROR(EAGAIN):
    case AVERROR(ETIMEDOUT):
    case AVERROR(EINTR):
    case AVERROR(ECONNRESET):
    case AVERROR(ECONNREFUSED):
      return ErrorCode::unavailable;
    case AVERROR(EIO):
    case AVERROR(EACCES):
    case AVERROR(EPERM):
    case AVERROR(ENOMEM):
    case AVERROR(EISDIR):
      return ErrorCode::io;
    case AVERROR_DECODER_NOT_FOUND:
    case AVERROR_DEMUXER_NOT_FOUND:
    case AVERROR_ENCODER_NOT_FOUND:
    case AVERROR_MUXER_NOT_FOUND:
    case AVERROR_FILTER_NOT_FOUND:
    case AVERROR_PROTOCOL_NOT_FOUND:
    case AVERROR_STREAM_NOT_FOUND:
    case AVERROR_PATCHWELCOME:
    case AVERROR(ENOSYS):
      return ErrorCode::unsupported;
    default:
      return ErrorCode::bad_data;  // INVALIDDATA, EOF, EINVAL from a decoder, ...
  }
}

void throw_averror(int errnum, std::string_view input, std::string_view doing) {
  throw MediaError(averror_code(errnum), std::string(input),
                   std::string(doing) + ": " + averror_text(errnum));
}

}  // namespace brigade::media::detail
