#include "media/detail/geometry.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "media/errors.h"

namespace brigade::media::detail {
namespace {

void require(bool ok, std::string_view input, const char* what) {
  if (!ok) throw MediaError(ErrorCode::invalid_argument, std::string(input), what);
}

}  // namespace

Geometry plan_geometry(const ImageOptions& o, int src_w, int src_h, std::string_view input) {
  if (src_w <= 0 || src_h <= 0) {
    throw MediaError(
        ErrorCode::bad_data, std::string(input),
        "zero image dimensions " + std::to_string(src_w) + "x" + std::to_string(src_h));
  }
  const bool cropped = o.crop_width != 0 || o.crop_height != 0 || o.crop_x != 0 || o.crop_y != 0;
  if (cropped) {
    require(o.filter_desc.empty(), input, "a crop does not apply with filter_desc");
    if (o.crop_x < 0 || o.crop_y < 0 || o.crop_width <= 0 || o.crop_height <= 0 ||
        std::int64_t(o.crop_x) + o.crop_width > src_w ||
        std::int64_t(o.crop_y) + o.crop_height > src_h) {
      throw MediaError(ErrorCode::invalid_argument, std::string(input),
                       "crop " + std::to_string(o.crop_width) + "x" +
                           std::to_string(o.crop_height) + "+" + std::to_string(o.crop_x) + "+" +
                           std::to_string(o.crop_y) + " is not inside the " +
                           std::to_string(src_w) + "x" + std::to_string(src_h) + " image");
    }
    ImageOptions inner = o;
    inner.crop_x = inner.crop_y = inner.crop_width = inner.crop_height = 0;
    Geometry g = plan_geometry(inner, o.crop_width, o.crop_height, input);
    g.src.x += o.crop_x;
    g.src.y += o.crop_y;
    return g;
  }
  require(!o.flip || o.filter_desc.empty(), input, "flip does not apply with filter_desc");
  Geometry g{{0, 0, src_w, src_h}, src_w, src_h, o.flip};
  switch (o.resize) {
    case ResizeMode::none:
      break;
    case ResizeMode::stretch:
      require(o.width > 0 && o.height > 0, input, "stretch needs width and height > 0");
      g.out_w = o.width;
      g.out_h = o.height;
      break;
    case ResizeMode::fit: {
      require(o.width > 0 && o.height > 0, input, "fit needs width and height > 0");
      double s = std::min(double(o.width) / src_w, double(o.height) / src_h);
      g.out_w = std::clamp(int(std::lround(src_w * s)), 1, o.width);
      g.out_h = std::clamp(int(std::lround(src_h * s)), 1, o.height);
      break;
    }
    case ResizeMode::shorter_side_crop: {
      require(o.width > 0 && o.height > 0, input, "shorter_side_crop needs width and height > 0");
      int side = o.shorter_side > 0 ? o.shorter_side : std::max(o.width, o.height);
      // torchvision: the longer side is int(side * long / short).
      int rw = src_w <= src_h ? side : int(std::int64_t(side) * src_w / src_h);
      int rh = src_w <= src_h ? int(std::int64_t(side) * src_h / src_w) : side;
      require(rw >= o.width && rh >= o.height, input, "crop is larger than the resized image");
      int left = int(std::lround((rw - o.width) / 2.0));
      int top = int(std::lround((rh - o.height) / 2.0));
      double sx = double(src_w) / rw, sy = double(src_h) / rh;
      int x0 = int(std::lround(left * sx)), x1 = int(std::lround((left + o.width) * sx));
      int y0 = int(std::lround(top * sy)), y1 = int(std::lround((top + o.height) * sy));
      g.src = {x0, y0, std::max(1, x1 - x0), std::max(1, y1 - y0)};
      g.out_w = o.width;
      g.out_h = o.height;
      break;
    }
  }
  if (o.format == PixelFormat::yuv420p) {
    require(g.out_w % 2 == 0 && g.out_h % 2 == 0, input,
            "yuv420p output needs even width and height");
  }
  return g;
}

void check_filter_geometry(const ImageOptions& o, std::string_view input) {
  if (o.filter_desc.empty()) return;
  require(o.crop_x == 0 && o.crop_y == 0 && o.crop_width == 0 && o.crop_height == 0, input,
          "a crop does not apply with filter_desc");
  require(!o.flip, input, "flip does not apply with filter_desc");
}

Geometry rescale_source(const Geometry& g, int src_w, int src_h, int scaled_w, int scaled_h) {
  Geometry r = g;
  double sx = double(scaled_w) / src_w, sy = double(scaled_h) / src_h;
  int x0 = int(std::lround(g.src.x * sx)), x1 = int(std::lround((g.src.x + g.src.w) * sx));
  int y0 = int(std::lround(g.src.y * sy)), y1 = int(std::lround((g.src.y + g.src.h) * sy));
  x1 = std::min(x1, scaled_w);
  y1 = std::min(y1, scaled_h);
  r.src = {x0, y0, std::max(1, x1 - x0), std::max(1, y1 - y0)};
  return r;
}

}  // namespace brigade::media::detail
