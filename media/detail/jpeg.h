#pragma once
// JPEG recognition (the core's; libjpeg decoding for the transforms is libjpeg.h). The
// TurboJPEG + swscale decoder behind load_image is the FFmpeg plugin's
// (detail/ffmpeg/jpeg.h).

#include <cstdint>
#include <span>

namespace brigade::media::detail {

// The JPEG SOI marker followed by another marker.
inline bool is_jpeg(std::span<const std::uint8_t> b) {
  return b.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF;
}

}  // namespace brigade::media::detail
