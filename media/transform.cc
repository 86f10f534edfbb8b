#include "media/transform.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>

#include "media/detail/jpeg.h"
#include "media/detail/libjpeg.h"
#include "media/detail/resample.h"
#include "media/errors.h"
#include "media/image.h"
#include "media/normalize.h"

namespace brigade::media {
namespace {

constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ULL;
constexpr std::uint64_t kSeedTag = 0x7472616e73666f72ULL;  // "transfor"
constexpr std::uint64_t kFlipCounter = 40;
constexpr std::uint64_t kClipStartCounter = 64;
constexpr int kAttempts = 10;
// Pixels decoded around the taps' reach, so that the decoder's own edge handling
// (chroma upsampling at a crop's border) never touches a pixel the taps read.
constexpr int kMargin = 2;

std::uint64_t fmix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// An integer uniform in [0, n].
int uniform_int(std::uint64_t key, std::uint64_t counter, int n) {
  __extension__ typedef unsigned __int128 U128;
  const U128 m = static_cast<U128>(transform_draw(key, counter)) * (static_cast<U128>(n) + 1);
  return static_cast<int>(m >> 64);
}

int round_half_even(double v) { return static_cast<int>(std::nearbyint(v)); }

void require(bool ok, const char* what) {
  if (!ok) throw MediaError(ErrorCode::invalid_argument, "transform options", what);
}

struct Plan {
  detail::AxisPlan x, y;
  bool flip = false;
};

Plan plan_transform(const TransformOptions& o, int w, int h, std::uint64_t id,
                    const std::string& name) {
  if (w <= 0 || h <= 0) throw MediaError(ErrorCode::bad_data, name, "zero image dimensions");
  Plan p;
  switch (o.kind) {
    case TransformKind::none:
      if (w != o.size || h != o.size) {
        throw MediaError(ErrorCode::invalid_argument, name,
                         "image of " + std::to_string(w) + "x" + std::to_string(h) +
                             ": transform none keeps the decoded size, so every image must be " +
                             std::to_string(o.size) + "x" + std::to_string(o.size) +
                             " (use transform eval or train to resize)");
      }
      p.x = {0, w, 0, double(w), w, 0, w};
      p.y = {0, h, 0, double(h), h, 0, h};
      break;
    case TransformKind::eval: {
      const EvalGeometry g = eval_geometry(o, w, h);
      p.x = {0, w, 0, double(w), g.resized_width, g.left, o.size};
      p.y = {0, h, 0, double(h), g.resized_height, g.top, o.size};
      break;
    }
    case TransformKind::train: {
      const CropWindow c = train_crop(o, w, h, id);
      p.x = {c.x, c.x + c.width, double(c.x), double(c.x + c.width), o.size, 0, o.size};
      p.y = {c.y, c.y + c.height, double(c.y), double(c.y + c.height), o.size, 0, o.size};
      p.flip = c.flip;
      break;
    }
  }
  return p;
}

// The largest DCT scaling whose scaled window keeps at least the output's pixels.
int choose_denom(const TransformOptions& o, const Plan& p) {
  if (!o.roi_decode || o.kind == TransformKind::none) return 1;
  for (int d : {8, 4, 2}) {
    if ((p.x.window1 - p.x.window0) / d >= p.x.out_total &&
        (p.y.window1 - p.y.window0) / d >= p.y.out_total) {
      return d;
    }
  }
  return 1;
}

detail::AxisPlan scaled_axis(detail::AxisPlan a, int denom, int scaled_size) {
  if (denom == 1) return a;
  a.in_lo = a.in_lo / denom;
  a.in_hi = std::min((a.in_hi + denom - 1) / denom, scaled_size);
  a.window0 /= denom;
  a.window1 /= denom;
  return a;
}

void resample_whole(const std::uint8_t* rgb, std::ptrdiff_t stride, const Plan& p,
                    std::uint8_t* dst) {
  detail::resample_rgb(rgb, stride, 0, 0, detail::make_taps(p.x), detail::make_taps(p.y), p.flip,
                       dst);
}

// `src` (w x h, stored) turned upright as EXIF orientation `o` says, into `dst`.
void orient(const std::uint8_t* src, std::ptrdiff_t stride, int w, int h, int o,
            std::vector<std::uint8_t>& dst, int& ow, int& oh) {
  const bool swap = o >= 5;
  ow = swap ? h : w;
  oh = swap ? w : h;
  dst.resize(std::size_t(ow) * oh * 3);
  for (int y = 0; y < oh; ++y) {
    for (int x = 0; x < ow; ++x) {
      int sx = x, sy = y;
      switch (o) {
        case 2:
          sx = w - 1 - x;
          break;
        case 3:
          sx = w - 1 - x;
          sy = h - 1 - y;
          break;
        case 4:
          sy = h - 1 - y;
          break;
        case 5:
          sx = y;
          sy = x;
          break;
        case 6:
          sx = y;
          sy = h - 1 - x;
          break;
        case 7:
          sx = w - 1 - y;
          sy = h - 1 - x;
          break;
        case 8:
          sx = w - 1 - y;
          sy = x;
          break;
        default:
          break;
      }
      std::memcpy(&dst[(std::size_t(y) * ow + x) * 3], src + sy * stride + sx * 3, 3);
    }
  }
}

// JPEG through libjpeg; false when this path cannot take it (CMYK).
bool transform_jpeg(std::span<const std::uint8_t> bytes, const TransformOptions& o,
                    std::uint64_t id, const std::string& name, std::uint8_t* dst) {
  detail::JpegDecoder decoder(bytes, name);
  const detail::JpegInfo& info = decoder.info();
  if (info.cmyk) return false;
  const int w = info.width, h = info.height;
  if (o.exif_orientation && info.orientation != 1) {
    const detail::JpegRegion r = decoder.decode(1, 0, 0, w, h);
    thread_local std::vector<std::uint8_t> upright;
    int ow = 0, oh = 0;
    orient(r.data, r.stride, w, h, info.orientation, upright, ow, oh);
    resample_whole(upright.data(), std::ptrdiff_t(ow) * 3, plan_transform(o, ow, oh, id, name),
                   dst);
    return true;
  }
  const Plan p = plan_transform(o, w, h, id, name);
  const int denom = choose_denom(o, p);
  const int sw = detail::JpegDecoder::scaled(w, denom), sh = detail::JpegDecoder::scaled(h, denom);
  const detail::Taps tx = detail::make_taps(scaled_axis(p.x, denom, sw));
  const detail::Taps ty = detail::make_taps(scaled_axis(p.y, denom, sh));
  const bool roi = o.roi_decode && o.kind != TransformKind::none;
  const detail::JpegRegion r = roi ? decoder.decode(denom, tx.lo() - kMargin, ty.lo() - kMargin,
                                                    tx.hi() + kMargin, ty.hi() + kMargin)
                                   : decoder.decode(1, 0, 0, w, h);
  detail::thread_jpeg_figures() = decoder.figures();
  detail::resample_rgb(r.data, r.stride, r.x0, r.y0, tx, ty, p.flip, dst);
  return true;
}

void transform_into(const Source& source, const TransformOptions& o, std::uint64_t id,
                    std::uint8_t* dst) {
  std::optional<std::vector<std::uint8_t>> file_bytes;
  std::span<const std::uint8_t> bytes = source.bytes();
  if (source.is_file()) bytes = file_bytes.emplace(read_file(source.name()));
  const std::string& name = source.name();
  if (bytes.empty()) throw MediaError(ErrorCode::bad_data, name, "empty input");
  if (detail::is_jpeg(bytes) && transform_jpeg(bytes, o, id, name, dst)) return;
  // Other formats and CMYK JPEGs: the whole image as RGB, then the same resample.
  const Tensor rgb = load_image(Source::memory(bytes, name));
  const int w = static_cast<int>(rgb.dim(1)), h = static_cast<int>(rgb.dim(0));
  resample_whole(rgb.data_as<std::uint8_t>(), std::ptrdiff_t(w) * 3,
                 plan_transform(o, w, h, id, name), dst);
}

}  // namespace

std::string_view to_string(TransformKind kind) {
  switch (kind) {
    case TransformKind::none:
      return "none";
    case TransformKind::eval:
      return "eval";
    case TransformKind::train:
      return "train";
  }
  return "?";
}

void check_transform_options(const TransformOptions& o) {
  require(o.size >= 1 && o.size <= 4096, "size must be 1-4096");
  require(o.kind != TransformKind::eval || (o.resize >= o.size && o.resize <= 65536),
          "resize (the shorter side) must be at least size and at most 65536");
  require(std::isfinite(o.scale_min) && std::isfinite(o.scale_max) && o.scale_min > 0 &&
              o.scale_min <= o.scale_max && o.scale_max <= 1,
          "scale must satisfy 0 < min <= max <= 1");
  require(std::isfinite(o.ratio_min) && std::isfinite(o.ratio_max) && o.ratio_min > 0 &&
              o.ratio_min <= o.ratio_max,
          "ratio must satisfy 0 < min <= max");
  require(o.flip_probability >= 0 && o.flip_probability <= 1, "flip probability must be in [0, 1]");
}

std::vector<std::int64_t> transform_output_shape(const TransformOptions& o) {
  return {o.size, o.size, 3};
}

std::uint64_t transform_key(std::uint64_t seed, std::uint64_t epoch, std::uint64_t id) {
  return fmix(fmix(fmix(seed ^ kSeedTag) ^ (epoch * kGolden)) ^ (id * kGolden));
}

std::uint64_t transform_draw(std::uint64_t key, std::uint64_t counter) {
  return fmix(key + (counter + 1) * kGolden);
}

double transform_uniform(std::uint64_t key, std::uint64_t counter) {
  return static_cast<double>(transform_draw(key, counter) >> 11) * 0x1.0p-53;
}

CropWindow train_crop(const TransformOptions& o, int width, int height, std::uint64_t id) {
  const std::uint64_t key = transform_key(o.seed, o.epoch, id);
  CropWindow c;
  c.flip = transform_uniform(key, kFlipCounter) < o.flip_probability;
  const double area = double(width) * height;
  const double log0 = std::log(o.ratio_min), log1 = std::log(o.ratio_max);
  for (int a = 0; a < kAttempts; ++a) {
    const double target =
        area * (o.scale_min + (o.scale_max - o.scale_min) * transform_uniform(key, 4 * a));
    const double aspect = std::exp(log0 + (log1 - log0) * transform_uniform(key, 4 * a + 1));
    const int w = round_half_even(std::sqrt(target * aspect));
    const int h = round_half_even(std::sqrt(target / aspect));
    if (0 < w && w <= width && 0 < h && h <= height) {
      c.y = uniform_int(key, 4 * a + 2, height - h);
      c.x = uniform_int(key, 4 * a + 3, width - w);
      c.width = w;
      c.height = h;
      return c;
    }
  }
  // torchvision's fallback: the whole image, cut to the ratio range, centred.
  const double in_ratio = double(width) / height;
  int w = width, h = height;
  if (in_ratio < o.ratio_min) {
    h = std::clamp(round_half_even(w / o.ratio_min), 1, height);
  } else if (in_ratio > o.ratio_max) {
    w = std::clamp(round_half_even(h * o.ratio_max), 1, width);
  }
  c.x = (width - w) / 2;
  c.y = (height - h) / 2;
  c.width = w;
  c.height = h;
  return c;
}

std::vector<std::int64_t> train_clip_frames(const TransformOptions& o, std::int64_t frames,
                                            int count, int stride, std::uint64_t id) {
  require(count >= 1, "a clip needs at least one frame");
  require(stride >= 1, "a clip's frame stride must be at least 1");
  std::vector<std::int64_t> out(static_cast<std::size_t>(count), 0);
  if (frames <= 1) return out;
  const std::int64_t span = std::int64_t(count - 1) * stride + 1;
  if (span > frames) {
    for (int k = 0; k < count; ++k) {
      out[std::size_t(k)] =
          count == 1 ? 0 : std::llround(double(k) * double(frames - 1) / double(count - 1));
    }
    return out;
  }
  const std::uint64_t key = transform_key(o.seed, o.epoch, id);
  __extension__ typedef unsigned __int128 U128;
  const auto starts = static_cast<U128>(frames - span) + 1;
  const auto first = static_cast<std::int64_t>(
      (static_cast<U128>(transform_draw(key, kClipStartCounter)) * starts) >> 64);
  for (int k = 0; k < count; ++k) out[std::size_t(k)] = first + std::int64_t(k) * stride;
  return out;
}

EvalGeometry eval_geometry(const TransformOptions& o, int width, int height) {
  // torchvision: new_long = int(requested_short * long / short), in double precision.
  const int short_side = std::min(width, height), long_side = std::max(width, height);
  const int resized_long =
      static_cast<int>(double(std::int64_t(o.resize) * long_side) / short_side);
  EvalGeometry g;
  g.resized_width = width <= height ? o.resize : resized_long;
  g.resized_height = width <= height ? resized_long : o.resize;
  g.left = round_half_even((g.resized_width - o.size) / 2.0);
  g.top = round_half_even((g.resized_height - o.size) / 2.0);
  return g;
}

void load_transformed_into(const Source& source, const TransformOptions& options, std::uint64_t id,
                           const Tensor& out) {
  check_transform_options(options);
  if (out.dtype() != DType::uint8 || !out.is_contiguous() ||
      out.shape() != transform_output_shape(options)) {
    throw MediaError(ErrorCode::invalid_argument, source.name(),
                     "output must be a contiguous uint8 tensor of [size, size, 3]");
  }
  transform_into(source, options, id, out.data_as<std::uint8_t>());
}

Tensor load_transformed(const Source& source, const TransformOptions& options, std::uint64_t id,
                        const Allocator& allocator) {
  check_transform_options(options);
  Tensor out = Tensor::empty(DType::uint8, transform_output_shape(options), allocator);
  transform_into(source, options, id, out.data_as<std::uint8_t>());
  return out;
}

Normalization imagenet_normalization() {
  return {{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};
}

void normalize_into(const Tensor& in, const Normalization& n, const Tensor& out) {
  const auto fail = [](const std::string& what) {
    throw MediaError(ErrorCode::invalid_argument, "normalize", what);
  };
  const auto& s = in.shape();
  if (in.dtype() != DType::uint8 || !in.is_contiguous() || s.size() < 3 || s.back() != 3)
    fail("input must be a contiguous uint8 tensor of [..., H, W, 3]");
  NormalizeOptions options{.mean = {n.mean.begin(), n.mean.end()},
                           .stddev = {n.stddev.begin(), n.stddev.end()},
                           .scale = 1.0f / 255.0f,
                           .dtype = DType::float32,
                           .layout = out.shape() == s ? Layout::nhwc : Layout::nchw};
  NormalizeJob job;
  try {
    job = make_normalize_job(options, s);
  } catch (const std::invalid_argument& e) {
    fail(e.what());
  }
  if (out.dtype() != DType::float32 || !out.is_contiguous() ||
      out.shape() != normalized_shape(options, s))
    fail("output must be a contiguous float32 tensor of [..., 3, H, W] or [..., H, W, 3]");
  job.src = in.data_as<std::uint8_t>();
  job.dst = out.data_as<float>();
  normalize_reference(job);
}

}  // namespace brigade::media
