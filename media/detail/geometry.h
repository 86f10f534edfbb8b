#pragma once
// Where the output pixels come from: the source rectangle and the output size.

#include <string_view>

#include "media/image.h"

namespace brigade::media::detail {

struct Rect {
  int x = 0, y = 0, w = 0, h = 0;
};

struct Geometry {
  Rect src;  // region of the decoded image that becomes the output
  int out_w = 0;
  int out_h = 0;
  bool flip = false;  // mirror the output left to right
};

// Throws MediaError (bad_data for zero source dimensions, invalid_argument for
// options that cannot apply). Follows torchvision's Resize + CenterCrop rounding. A
// crop (ImageOptions::crop_*) is planned as an image of the crop's size, then
// offset to the crop's origin.
Geometry plan_geometry(const ImageOptions& options, int src_w, int src_h, std::string_view input);

// Throws invalid_argument when `options` ask for a crop or a flip with filter_desc (the
// filter graph does all the geometry then).
void check_filter_geometry(const ImageOptions& options, std::string_view input);

// The same plan for a source that is `scale_num/scale_den` times smaller (a
// DCT-scaled decode): the source rect shrinks, the output stays.
Geometry rescale_source(const Geometry& g, int src_w, int src_h, int scaled_w, int scaled_h);

}  // namespace brigade::media::detail
