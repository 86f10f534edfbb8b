#pragma once
// Training and evaluation transforms of images, as torchvision defines them, decoded
// into uint8 HWC RGB; and normalization to float32 CHW.
//
// TRANSFORMS (TransformKind):
//   eval  torchvision's Resize(resize) + CenterCrop(size) on PIL: the shorter side
//         becomes `resize`, the longer int(resize * long / short); the crop's offsets
//         are int(round((resized - size) / 2.0)) with Python's round (half to even).
//   train RandomResizedCrop(size, scale, ratio) + RandomHorizontalFlip(flip_probability):
//         up to 10 attempts of area = W*H * U(scale), aspect = exp(U(log ratio)),
//         w = round(sqrt(area * aspect)), h = round(sqrt(area / aspect)), accepted when
//         0 < w <= W and 0 < h <= H, with offsets uniform integers in [0, H - h] and
//         [0, W - w]; else the center fallback (the whole image, clamped to the ratio
//         range). Then the crop is resized to size x size and flipped with probability p.
//   none  decode only: every image must already be size x size (a batch has one shape),
//         else an invalid_argument error naming the image and its size.
// Resampling is PIL's antialiased bilinear (detail/resample.h) on the exact window: the
// eval crop lands on whole pixels of the resized image, hence on fractional source
// coordinates, and is computed there, not rounded to source pixels. On the same decoded
// pixels the output equals PIL's + torchvision's up to a level, rarely.
//
// DETERMINISM. Every random choice of sample `id` in epoch `epoch` of a job seeded `seed`
// is a pure function of (seed, epoch, id) — the same on any rank, any worker, after any
// resume, in any completion order:
//   key       = transform_key(seed, epoch, id)
//             = fmix(fmix(fmix(seed ^ kSeedTag) ^ epoch * G) ^ id * G), G = 0x9e3779b97f4a7c15,
//               fmix = SplitMix64's finalizer (Steele, Lea, Flood 2014), the mixer the
//               samplers use;
//   draw(c)   = fmix(key + (c + 1) * G)            (a counter-based stream: draw c is
//               independent of how many others were made)
//   uniform(c) = (draw(c) >> 11) * 2^-53 in [0, 1);
//   integer in [0, n] = (draw(c) * (n + 1)) >> 64 (multiply-high; bias below n / 2^64).
// Counters: train attempt a (0-9) uses 4a (area), 4a + 1 (aspect), 4a + 2 (top), 4a + 3
// (left); 40 is the flip (flip when uniform(40) < p). Counters 64 and up are reserved for
// clips (a temporal window per clip, drawn from the same key). Changing any of this
// changes every augmented pixel: it is part of the reproducibility contract.
//
// REGION OF INTEREST (roi_decode, JPEG only). The decoder reconstructs only the MCU
// rows and columns the resampler's taps reach (rows above are skipped, decoding stops
// after the last), at the largest DCT scaling factor 1/2, 1/4 or 1/8 whose scaled
// window still has at least the output's pixels on both axes; the resample then runs
// on the scaled pixels. Against a full decode at scale 1 with the same resample, mean
// absolute error stays under 2 levels (tests/media/transform_test.cc). Other formats,
// CMYK JPEGs (through FFmpeg) and `none` decode the whole image.
//
// EXIF ORIENTATION (exif_orientation, JPEG only; default off). When on, the image is
// first turned upright as its EXIF orientation tag says (PIL's ImageOps.exif_transpose),
// and the transform applies to the upright image (decoded whole, no region). Off by
// default because torchvision's and timm's PIL loaders do not apply it: a model trained
// on their pipelines saw the stored pixels, and matching them matters more.
//
// Thread safety: every function may be called concurrently; scratch memory is per thread.

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "media/source.h"
#include "media/tensor.h"

namespace brigade::media {

enum class TransformKind { none, eval, train };

std::string_view to_string(TransformKind kind);

struct TransformOptions {
  TransformKind kind = TransformKind::eval;
  int size = 224;    // output height = width
  int resize = 256;  // eval: the shorter side before the center crop (>= size)
  double scale_min = 0.08, scale_max = 1.0;             // train: area fraction range
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;  // train: aspect (w / h) range
  double flip_probability = 0.5;                        // train
  bool exif_orientation = false;
  bool roi_decode = true;
  std::uint64_t seed = 0, epoch = 0;
};

/// Throws MediaError(invalid_argument) naming the first bad field: size 1-4096, resize
/// >= size and <= 65536, 0 < scale_min <= scale_max <= 1, 0 < ratio_min <= ratio_max,
/// flip_probability in [0, 1], all finite.
void check_transform_options(const TransformOptions& options);

/// The shape of one transformed image: [size, size, 3].
std::vector<std::int64_t> transform_output_shape(const TransformOptions& options);

/// DETERMINISM's key and draws.
std::uint64_t transform_key(std::uint64_t seed, std::uint64_t epoch, std::uint64_t id);
std::uint64_t transform_draw(std::uint64_t key, std::uint64_t counter);
double transform_uniform(std::uint64_t key, std::uint64_t counter);

/// A crop of the source image (whole pixels) and whether the output is mirrored.
struct CropWindow {
  int x = 0, y = 0, width = 0, height = 0;
  bool flip = false;
};

/// The train transform's crop and flip for sample `id` of a `width` x `height` image
/// (torchvision's RandomResizedCrop.get_params, then the flip), as DETERMINISM says.
CropWindow train_crop(const TransformOptions& options, int width, int height, std::uint64_t id);

/// CLIPS (train). A clip's frames and crop are drawn from the same key as an image's:
/// `count` frames at a stride of `stride` frames from a random first frame — frames
/// first + k * stride, k = 0 … count - 1, with first = integer in [0, frames - span]
/// from counter 64, span = (count - 1) * stride + 1 — or, when the clip has fewer than
/// span frames, `count` frames evenly spaced over the whole clip (round(k * (frames - 1)
/// / (count - 1)), as eval's evenly spaced selection); and one train_crop (crop and
/// flip) on the frame size for every frame of the clip alike. `frames` is the container's
/// count or the estimated one (media/video.h VideoInfo::frames); with 1 or fewer every
/// index is 0. Throws MediaError (invalid_argument) for count or stride < 1.
std::vector<std::int64_t> train_clip_frames(const TransformOptions& options, std::int64_t frames,
                                            int count, int stride, std::uint64_t id);

/// The eval transform's geometry: the resized size and the crop's offset in it.
struct EvalGeometry {
  int resized_width = 0, resized_height = 0, left = 0, top = 0;
};
EvalGeometry eval_geometry(const TransformOptions& options, int width, int height);

/// Decodes sample `id` (its bytes in `source`) and applies the transform, into `out`: a
/// contiguous uint8 tensor of transform_output_shape() (else invalid_argument, before
/// decoding). Errors are MediaErrors naming the source; on error `out` is unspecified.
void load_transformed_into(const Source& source, const TransformOptions& options, std::uint64_t id,
                           const Tensor& out);
Tensor load_transformed(const Source& source, const TransformOptions& options, std::uint64_t id,
                        const Allocator& allocator = {});

/// Per-channel normalization: out = (x / 255 - mean[c]) / stddev[c], with the arithmetic
/// of media/normalize.h (scale 1/255): bit for bit what the CPU device and the CUDA
/// kernel give.
struct Normalization {
  std::array<float, 3> mean{}, stddev{};
};
/// torchvision's ImageNet mean (0.485, 0.456, 0.406) and std (0.229, 0.224, 0.225).
Normalization imagenet_normalization();

/// `in`: contiguous uint8 [..., H, W, 3] (HWC images, a leading batch dimension or
/// none); `out`: contiguous float32 [..., 3, H, W] (channels moved) or [..., H, W, 3]
/// (kept) of the same leading dimensions. Throws MediaError(invalid_argument) for other
/// shapes or dtypes, or a stddev that is not positive and finite.
void normalize_into(const Tensor& in, const Normalization& normalization, const Tensor& out);

}  // namespace brigade::media
