#include "media/pixel_format.h"

namespace brigade::media {

std::string_view pixel_format_name(PixelFormat format) {
  switch (format) {
    case PixelFormat::rgb24:
      return "rgb24";
    case PixelFormat::bgr24:
      return "bgr24";
    case PixelFormat::gray8:
      return "gray";
    case PixelFormat::yuv420p:
      return "yuv420p";
  }
  return "none";
}

std::vector<std::int64_t> image_shape(PixelFormat format, int width, int height) {
  switch (format) {
    case PixelFormat::rgb24:
    case PixelFormat::bgr24:
      return {height, width, 3};
    case PixelFormat::gray8:
      return {height, width, 1};
    case PixelFormat::yuv420p:
      return {std::int64_t(height) * 3 / 2, width};
  }
  return {};
}

}  // namespace brigade::media
