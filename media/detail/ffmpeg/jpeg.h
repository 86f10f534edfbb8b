#pragma once
// Inside the FFmpeg plugin: JPEG decoding with libjpeg-turbo's TurboJPEG API (faster than FFmpeg's
// MJPEG decoder on the same files; see bench/bench_decode.cc). Decodes to the JPEG's own YUV planes
// (possibly DCT-scaled), then colour-converts and scales at the output size with swscale.

#include <cstdint>
#include <span>
#include <string_view>

#include "media/detail/geometry.h"
#include "media/detail/jpeg.h"
#include "media/image.h"

namespace brigade::media::detail {

struct JpegHeader {
  int width = 0;
  int height = 0;
  bool cmyk = false;  // CMYK or YCCK: TurboJPEG cannot convert these to RGB, FFmpeg can
};
JpegHeader read_jpeg_header(std::span<const std::uint8_t> bytes, std::string_view input);

// Decodes `bytes` and writes `g` (planned for the full-size image) in `options.format` at dst.
void decode_jpeg(std::span<const std::uint8_t> bytes, const ImageOptions& options,
                 const Geometry& g, std::uint8_t* dst, std::string_view input);

}  // namespace brigade::media::detail
