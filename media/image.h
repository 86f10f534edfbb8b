#pragma once
// Image decoding into contiguous uint8 tensors.
//
// Formats: JPEG (decoded with libjpeg-turbo; CMYK/YCCK JPEGs with FFmpeg),
// PNG, WebP, BMP, and whatever else FFmpeg's demuxers recognise (decoded with
// FFmpeg); the format is found from the bytes, never from a file extension.
// Only the first frame is decoded.
//
// Quality contract: accurate integer IDCT (never the fast DCT), bilinear
// scaling (area-aware when shrinking, like PIL's antialiased bilinear) with
// full horizontal chroma resolution and accurate rounding. JPEG DCT-domain
// downscaling (libjpeg-turbo's scaled IDCT) is used only while the decoded
// region stays at least twice the output size, so the result is never
// upsampled afterwards and the final shrink still filters; it is opt-in
// (`dct_scaling = true`).
//
// Thread safety: every function may be called concurrently from any number of
// threads; each thread keeps its own decoder and scaler state.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "media/pixel_format.h"
#include "media/source.h"
#include "media/tensor.h"

namespace brigade::media {

// Images and video frames larger than this are rejected (unsupported) before
// any pixel memory is allocated: a corrupt header cannot make a decoder
// allocate gigabytes.
inline constexpr std::int64_t kMaxPixels = std::int64_t(1) << 27;  // e.g. 16384 x 8192

enum class ResizeMode {
  none,               // keep the decoded size (width/height ignored)
  stretch,            // scale to exactly width x height, ignoring the aspect ratio
  shorter_side_crop,  // scale the shorter side to `shorter_side`, then center-crop width x height
  fit,                // scale to fit inside width x height, keeping the aspect ratio (no padding)
};

struct ImageOptions {
  ResizeMode resize = ResizeMode::none;
  int width = 0;
  int height = 0;
  int shorter_side = 0;  // shorter_side_crop only; 0 means max(width, height)
  PixelFormat format = PixelFormat::rgb24;
  // An FFmpeg video filter description (e.g. "scale=224:224,hflip") applied to
  // the decoded image instead of `resize`; its output is converted to `format`.
  // With a filter, JPEG is decoded by FFmpeg too.
  std::string filter_desc;
  // A region of the decoded image, in whole pixels, that `resize` then applies to as if
  // it were the whole image (crop_width = crop_height = 0: the whole image). A region
  // not inside the image is invalid_argument, naming both. Not with filter_desc.
  int crop_x = 0, crop_y = 0, crop_width = 0, crop_height = 0;
  // Mirrors the output left to right (after the resize). Not with filter_desc.
  bool flip = false;
  // JPEG DCT-domain downscaling (see above). Off by default: on noisy content
  // a DCT-scaled image keeps more noise than a filtered resize (mean absolute
  // difference 2-4 levels against the float reference, vs under 2 without).
  bool dct_scaling = false;
};

// The ImageNet evaluation transform: shorter side to 256, center crop 224x224, RGB.
ImageOptions imagenet_eval_options();

// An FFmpeg filter description equivalent to `options`' resize and format for a
// `src_width` x `src_height` image (for use with load_video's or another tool's filters).
std::string make_filter_desc(const ImageOptions& options, int src_width, int src_height);

struct ImageInfo {
  int width = 0;
  int height = 0;
  std::string codec;  // "mjpeg", "png", ...
};

// Reads only the header where the format allows.
ImageInfo probe_image(const Source& source);

// The shape load_image returns for an image of `info`'s size (see pixel_format.h).
std::vector<std::int64_t> image_output_shape(const ImageOptions& options, int src_width,
                                             int src_height);

// Decodes `source` into a new tensor from `allocator` (default: aligned heap).
Tensor load_image(const Source& source, const ImageOptions& options = {},
                  const Allocator& allocator = {});

// Decodes into caller-provided memory: `out` must be a contiguous uint8 tensor of
// exactly the output shape (else invalid_argument, thrown before decoding).
// On any error the contents of `out` are unspecified.
void load_image_into(const Source& source, const ImageOptions& options, const Tensor& out);

// Decodes every source into one [N, ...image shape] buffer. The options must give
// a fixed output size (stretch or shorter_side_crop, no filter). Fails as a whole,
// with the failing input's error, if any image fails.
Tensor load_image_batch(std::span<const Source> sources, const ImageOptions& options,
                        const Allocator& allocator = {});

}  // namespace brigade::media
