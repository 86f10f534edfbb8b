#pragma once
// Output pixel formats and their byte layouts.
//
//   rgb24, bgr24  packed, 3 bytes per pixel: shape [H, W, 3]
//   gray8         1 byte per pixel (full-range luma):  shape [H, W, 1]
//   yuv420p       planar BT.601 limited range: shape [H * 3 / 2, W] holding the
//                 Y plane (H x W), then U, then V (each H/2 x W/2, rows of W/2
//                 bytes, packed back to back). Width and height must be even.
//
// RGB output of YUV sources uses the source's colour matrix (BT.601 when
// unspecified) and range (JPEG and yuvj* sources are full range).

#include <cstdint>
#include <string_view>
#include <vector>

namespace brigade::media {

enum class PixelFormat { rgb24, bgr24, gray8, yuv420p };

std::string_view pixel_format_name(PixelFormat format);  // FFmpeg's name, e.g. "rgb24"

// Shape of one image of `width` x `height` in `format` (see the table above).
std::vector<std::int64_t> image_shape(PixelFormat format, int width, int height);

}  // namespace brigade::media
