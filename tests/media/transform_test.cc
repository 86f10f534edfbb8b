#include "media/transform.h"

#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>

#include "media/detail/libjpeg.h"
#include "media/errors.h"
#include "media/image.h"
#include "media/synthetic.h"

namespace brigade::media {
namespace {

double mae(const std::uint8_t* a, const std::uint8_t* b, std::size_t n) {
  double sum = 0;
  for (std::size_t i = 0; i < n; ++i) sum += std::abs(int(a[i]) - int(b[i]));
  return sum / double(n);
}
double mae(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.nbytes(), b.nbytes());
  return mae(a.data_as<std::uint8_t>(), b.data_as<std::uint8_t>(),
             std::min(a.nbytes(), b.nbytes()));
}

struct Rgb {
  std::vector<std::uint8_t> px;
  int w = 0, h = 0;
};

// Full-size RGB decode with TurboJPEG (accurate DCT, fancy upsampling, as PIL decodes).
Rgb reference_decode(const Bytes& jpeg) {
  std::unique_ptr<void, int (*)(void*)> tj(tjInitDecompress(), tjDestroy);
  Rgb r;
  int ss = 0, cs = 0;
  tjDecompressHeader3(tj.get(), jpeg.data(), jpeg.size(), &r.w, &r.h, &ss, &cs);
  r.px.resize(std::size_t(r.w) * r.h * 3);
  EXPECT_EQ(tjDecompress2(tj.get(), jpeg.data(), jpeg.size(), r.px.data(), r.w, 0, r.h, TJPF_RGB,
                          TJFLAG_ACCURATEDCT),
            0);
  return r;
}

// PIL's Image.resize(BILINEAR) of the image cut to [lo, hi) on one axis, in double
// precision (no fixed-point weights, no rounding between the passes): output pixel
// `first + i` of `total` over the whole cut.
struct Axis {
  int lo, hi, total, first, count;
};
std::vector<double> pil_axis(const std::vector<double>& in, int w, int h, const Axis& a,
                             bool horizontal) {
  const double scale = double(a.hi - a.lo) / a.total, fs = std::max(scale, 1.0);
  const int other = horizontal ? h : w;
  const int ow = horizontal ? a.count : w;
  std::vector<double> out(std::size_t(other) * a.count * 3);
  for (int i = 0; i < a.count; ++i) {
    const double center = (a.first + i + 0.5) * scale;  // in the cut's coordinates
    const int xmin = std::max(0, int(center - fs + 0.5));
    const int xmax = std::min(a.hi - a.lo, int(center + fs + 0.5));
    std::vector<double> k;
    double total = 0;
    for (int x = xmin; x < xmax; ++x) {
      const double t = std::abs((x - center + 0.5) / fs);
      k.push_back(t < 1 ? 1 - t : 0);
      total += k.back();
    }
    for (int o = 0; o < other; ++o) {
      for (int c = 0; c < 3; ++c) {
        double acc = 0;
        for (int x = xmin; x < xmax; ++x) {
          const int s = a.lo + x;
          acc +=
              k[x - xmin] *
              in[horizontal ? (std::size_t(o) * w + s) * 3 + c : (std::size_t(s) * w + o) * 3 + c];
        }
        out[horizontal ? (std::size_t(o) * ow + i) * 3 + c : (std::size_t(i) * ow + o) * 3 + c] =
            acc / total;
      }
    }
  }
  return out;
}

std::vector<std::uint8_t> pil_reference(const Rgb& img, const Axis& x, const Axis& y, bool flip) {
  std::vector<double> f(img.px.begin(), img.px.end());
  const std::vector<double> horiz = pil_axis(f, img.w, img.h, x, true);
  const std::vector<double> both = pil_axis(horiz, x.count, img.h, y, false);
  std::vector<std::uint8_t> out(both.size());
  for (int r = 0; r < y.count; ++r) {
    for (int i = 0; i < x.count; ++i) {
      const int from = flip ? x.count - 1 - i : i;
      for (int c = 0; c < 3; ++c) {
        const double v = both[(std::size_t(r) * x.count + from) * 3 + c];
        out[(std::size_t(r) * x.count + i) * 3 + c] =
            std::uint8_t(std::clamp(std::floor(v + 0.5), 0.0, 255.0));
      }
    }
  }
  return out;
}

// torchvision's Resize(256) + CenterCrop(224) on PIL, computed here.
std::vector<std::uint8_t> pil_eval(const Rgb& img) {
  const EvalGeometry g = eval_geometry(TransformOptions{}, img.w, img.h);
  return pil_reference(img, {0, img.w, g.resized_width, g.left, 224},
                       {0, img.h, g.resized_height, g.top, 224}, false);
}

// torchvision's resized_crop(crop, 224) + flip on PIL.
std::vector<std::uint8_t> pil_train(const Rgb& img, const CropWindow& c, int size) {
  return pil_reference(img, {c.x, c.x + c.width, size, 0, size},
                       {c.y, c.y + c.height, size, 0, size}, c.flip);
}

Bytes encode_with(const Bytes& rgb, int w, int h, int subsamp, int quality, int flags = 0) {
  std::unique_ptr<void, int (*)(void*)> tj(tjInitCompress(), tjDestroy);
  unsigned char* out = nullptr;
  unsigned long size = 0;
  EXPECT_EQ(
      tjCompress2(tj.get(), rgb.data(), w, 0, h, TJPF_RGB, &out, &size, subsamp, quality, flags),
      0);
  Bytes jpeg(out, out + size);
  tjFree(out);
  return jpeg;
}

// Fine detail at every scale: the synthetic content (noise down to single pixels) plus
// extra grain, at several qualities and sizes.
struct Sample {
  Bytes jpeg;
  std::string name;
};
std::vector<Sample> varied_set() {
  std::vector<Sample> set;
  const std::pair<int, int> sizes[] = {{500, 375},  {375, 500}, {333, 250}, {640, 480},
                                       {1024, 683}, {257, 256}, {800, 1200}};
  int k = 0;
  for (auto [w, h] : sizes) {
    Bytes rgb = synthetic_rgb(w, h, std::uint64_t(w * 7 + h));
    if (k % 2 == 1) {  // grain
      std::uint64_t s = std::uint64_t(k) * 0x9e3779b97f4a7c15ULL + 1;
      for (auto& v : rgb) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        v = std::uint8_t(std::clamp(int(v) + int((s >> 59) & 31) - 16, 0, 255));
      }
    }
    const int quality = k % 3 == 0 ? 95 : k % 3 == 1 ? 90 : 75;
    set.push_back({encode_with(rgb, w, h, TJSAMP_420, quality),
                   std::to_string(w) + "x" + std::to_string(h) + " q" + std::to_string(quality)});
    ++k;
  }
  return set;
}

TEST(Transform, EvalGeometryFollowsTorchvisionRounding) {
  const TransformOptions o;
  // 500x375: resized 341x256; (341 - 224) / 2 = 58.5 rounds to even (58), not up.
  EvalGeometry g = eval_geometry(o, 500, 375);
  EXPECT_EQ(g.resized_width, 341);
  EXPECT_EQ(g.resized_height, 256);
  EXPECT_EQ(g.left, 58);
  EXPECT_EQ(g.top, 16);
  // 333x250: int(256 * 333 / 250) = int(340.992) = 340; 116 / 2 = 58.
  g = eval_geometry(o, 250, 333);
  EXPECT_EQ(g.resized_width, 256);
  EXPECT_EQ(g.resized_height, 340);
  EXPECT_EQ(g.top, 58);
  // (343 - 224) / 2 = 59.5 rounds to 60.
  g = eval_geometry(o, 343, 256);
  EXPECT_EQ(g.resized_width, 343);
  EXPECT_EQ(g.left, 60);
}

TEST(Transform, EvalMatchesPilResizeThenCenterCrop) {
  double sum = 0;
  int n = 0;
  for (const auto& s : varied_set()) {
    const Rgb img = reference_decode(s.jpeg);
    const std::vector<std::uint8_t> ref = pil_eval(img);
    TransformOptions o;
    o.roi_decode = false;
    const Tensor t = load_transformed(Source::memory(s.jpeg, s.name), o, 0);
    const double e = mae(t.data_as<std::uint8_t>(), ref.data(), ref.size());
    // The same taps; PIL rounds to 8 bits between its two passes (as we do), this
    // reference does not: about 0.2 levels.
    EXPECT_LT(e, 0.3) << s.name;
    sum += e;
    ++n;
    std::fprintf(stderr, "eval %s: MAE %.4f vs the PIL reference\n", s.name.c_str(), e);
  }
  EXPECT_LE(sum / n, 1.9);  // torchvision's own tensor path against PIL measured 1.9
}

TEST(Transform, TrainMatchesPilCropThenResize) {
  TransformOptions o;
  o.kind = TransformKind::train;
  o.roi_decode = false;
  o.seed = 5;
  for (const auto& s : varied_set()) {
    const Rgb img = reference_decode(s.jpeg);
    for (std::uint64_t id : {0u, 1u, 2u}) {
      const CropWindow c = train_crop(o, img.w, img.h, id);
      const std::vector<std::uint8_t> ref = pil_train(img, c, 224);
      const Tensor t = load_transformed(Source::memory(s.jpeg, s.name), o, id);
      EXPECT_LT(mae(t.data_as<std::uint8_t>(), ref.data(), ref.size()), 0.3)
          << s.name << " id " << id;
    }
  }
}

TEST(Transform, TrainCropFollowsTheTenAttemptRule) {
  TransformOptions o;
  o.kind = TransformKind::train;
  o.seed = 11;
  int flips = 0;
  double area = 0;
  const int n = 4000;
  for (int id = 0; id < n; ++id) {
    const CropWindow c = train_crop(o, 500, 375, std::uint64_t(id));
    ASSERT_GT(c.width, 0);
    ASSERT_GT(c.height, 0);
    ASSERT_LE(c.x + c.width, 500);
    ASSERT_LE(c.y + c.height, 375);
    area += double(c.width) * c.height / (500.0 * 375.0);
    flips += c.flip;
  }
  EXPECT_NEAR(double(flips) / n, 0.5, 0.03);
  // Area uniform in (0.08, 1), less the attempts that did not fit: mean a little under 0.54.
  EXPECT_GT(area / n, 0.42);
  EXPECT_LT(area / n, 0.56);
  // The first attempt, re-derived from the documented draws.
  const std::uint64_t key = transform_key(o.seed, o.epoch, 7);
  const double target = 500.0 * 375 * (0.08 + 0.92 * transform_uniform(key, 0));
  const double aspect =
      std::exp(std::log(0.75) + (std::log(4.0 / 3) - std::log(0.75)) * transform_uniform(key, 1));
  const int w = int(std::nearbyint(std::sqrt(target * aspect)));
  const int h = int(std::nearbyint(std::sqrt(target / aspect)));
  if (w <= 500 && h <= 375) {
    const CropWindow c = train_crop(o, 500, 375, 7);
    EXPECT_EQ(c.width, w);
    EXPECT_EQ(c.height, h);
  }
  // Every attempt fails (the square crop of the whole area does not fit): the center
  // fallback, cut to the ratio range.
  o.scale_min = o.scale_max = 1.0;
  o.ratio_min = o.ratio_max = 1.0;
  const CropWindow c = train_crop(o, 500, 300, 3);
  EXPECT_EQ(c.width, 300);
  EXPECT_EQ(c.height, 300);
  EXPECT_EQ(c.x, 100);
  EXPECT_EQ(c.y, 0);
  // The documented key derivation, pinned: changing it changes every augmentation.
  auto fmix = [](std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  const std::uint64_t g = 0x9e3779b97f4a7c15ULL;
  EXPECT_EQ(transform_key(1, 2, 3), fmix(fmix(fmix(1 ^ 0x7472616e73666f72ULL) ^ 2 * g) ^ 3 * g));
  EXPECT_EQ(transform_draw(99, 4), fmix(99 + 5 * g));
}

TEST(Transform, TrainIsAPureFunctionOfSeedEpochAndId) {
  const Bytes jpeg = make_image(ImageCodec::jpeg, 640, 480, 3);
  TransformOptions o;
  o.kind = TransformKind::train;
  o.seed = 42;
  o.epoch = 3;
  std::vector<Tensor> first;
  for (std::uint64_t id = 0; id < 6; ++id)
    first.push_back(load_transformed(Source::memory(jpeg), o, id));
  // In another order, on other threads: byte-identical.
  std::vector<Tensor> again(6);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      for (int id = 5 - t; id >= 0; id -= 3)
        again[id] = load_transformed(Source::memory(jpeg), o, std::uint64_t(id));
    });
  }
  for (auto& t : threads) t.join();
  for (std::size_t id = 0; id < 6; ++id) {
    ASSERT_EQ(std::memcmp(first[id].data(), again[id].data(), first[id].nbytes()), 0) << id;
  }
  // Another epoch or seed draws other crops.
  int differ = 0;
  for (std::uint64_t id = 0; id < 6; ++id) {
    TransformOptions other = o;
    other.epoch = 4;
    differ += train_crop(o, 640, 480, id).x != train_crop(other, 640, 480, id).x;
  }
  EXPECT_GE(differ, 4);
}

TEST(Transform, RegionDecodeStaysCloseToFullDecode) {
  // Large images, so that every DCT scale is chosen; fine detail everywhere.
  std::vector<Sample> set = varied_set();
  for (auto [w, h] : {std::pair{2400, 1800}, {1600, 1200}, {3000, 900}}) {
    set.push_back({make_image(ImageCodec::jpeg, w, h, std::uint64_t(w + h)),
                   std::to_string(w) + "x" + std::to_string(h)});
  }
  int scales[9] = {};
  for (TransformKind kind : {TransformKind::train, TransformKind::eval}) {
    TransformOptions roi;
    roi.kind = kind;
    roi.scale_min = 0.3;
    TransformOptions full = roi;
    full.roi_decode = false;
    double sum = 0;
    int n = 0;
    for (const auto& s : set) {
      for (std::uint64_t id = 0; id < (kind == TransformKind::train ? 4u : 1u); ++id) {
        const Tensor a = load_transformed(Source::memory(s.jpeg, s.name), roi, id);
        const int denom = detail::thread_jpeg_figures().scale_denom;
        ++scales[denom];
        const Tensor b = load_transformed(Source::memory(s.jpeg, s.name), full, id);
        const double e = mae(a, b);
        if (denom == 1) {
          EXPECT_EQ(e, 0.0) << s.name << " " << to_string(kind) << " id " << id;
        }
        EXPECT_LT(e, 3.0) << s.name << " " << to_string(kind) << " id " << id << " 1/" << denom;
        sum += e;
        ++n;
      }
    }
    EXPECT_LE(sum / n, 2.0) << to_string(kind);
    std::fprintf(stderr, "%s: region decode vs full decode, mean MAE %.3f over %d\n",
                 std::string(to_string(kind)).c_str(), sum / n, n);
  }
  EXPECT_GT(scales[1], 0);
  EXPECT_GT(scales[2], 0);
  EXPECT_GT(scales[4], 0);
}

TEST(Transform, RegionDecodeHandlesEveryJpegLayout) {
  const int w = 487, h = 365;
  const Bytes rgb = synthetic_rgb(w, h, 21);
  TransformOptions roi;
  roi.kind = TransformKind::train;
  TransformOptions full = roi;
  full.roi_decode = false;
  for (int subsamp : {TJSAMP_444, TJSAMP_422, TJSAMP_420, TJSAMP_440, TJSAMP_411, TJSAMP_GRAY}) {
    for (int flags : {0, TJFLAG_PROGRESSIVE}) {
      const Bytes jpeg = encode_with(rgb, w, h, subsamp, 90, flags);
      for (std::uint64_t id = 0; id < 3; ++id) {
        const Tensor a = load_transformed(Source::memory(jpeg), roi, id);
        const Tensor b = load_transformed(Source::memory(jpeg), full, id);
        EXPECT_EQ(mae(a, b), 0.0) << "subsampling " << subsamp << " flags " << flags;
      }
    }
  }
}

TEST(Transform, OtherFormatsTakeTheSameGeometry) {
  const Bytes png = make_image(ImageCodec::png, 320, 240, 11);
  const Bytes rgb = synthetic_rgb(320, 240, 11);
  const Rgb img{rgb, 320, 240};
  const Tensor t = load_transformed(Source::memory(png, "a.png"), TransformOptions{}, 0);
  const std::vector<std::uint8_t> ref = pil_eval(img);
  EXPECT_LT(mae(t.data_as<std::uint8_t>(), ref.data(), ref.size()), 0.3);
}

TEST(Transform, NoneDecodesOnlyImagesOfTheGivenSize) {
  TransformOptions o;
  o.kind = TransformKind::none;
  o.size = 64;
  const Bytes png = make_image(ImageCodec::png, 64, 64, 1);
  const Tensor t = load_transformed(Source::memory(png), o, 0);
  const Bytes rgb = synthetic_rgb(64, 64, 1);
  EXPECT_EQ(std::memcmp(t.data(), rgb.data(), rgb.size()), 0);
  const Bytes jpeg = make_image(ImageCodec::jpeg, 80, 60, 1);
  try {
    load_transformed(Source::memory(jpeg, "odd.jpg"), o, 0);
    FAIL() << "a mixed size was accepted";
  } catch (const MediaError& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_EQ(e.input(), "odd.jpg");
    EXPECT_NE(e.cause().find("80x60"), std::string::npos) << e.what();
    EXPECT_NE(e.cause().find("64x64"), std::string::npos) << e.what();
  }
}

TEST(Transform, BadOptionsNameTheirField) {
  auto cause = [](auto change) {
    TransformOptions o;
    o.kind = TransformKind::train;
    change(o);
    try {
      check_transform_options(o);
    } catch (const MediaError& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      return e.cause();
    }
    return std::string("accepted");
  };
  EXPECT_NE(cause([](auto& o) { o.size = 0; }).find("size"), std::string::npos);
  EXPECT_NE(cause([](auto& o) { o.scale_min = 0.9, o.scale_max = 0.5; }).find("scale"),
            std::string::npos);
  EXPECT_NE(cause([](auto& o) { o.ratio_min = 0; }).find("ratio"), std::string::npos);
  EXPECT_NE(cause([](auto& o) { o.flip_probability = 1.5; }).find("flip"), std::string::npos);
  EXPECT_NE(cause([](auto& o) { o.kind = TransformKind::eval, o.resize = 100; }).find("resize"),
            std::string::npos);
  EXPECT_EQ(cause([](auto&) {}), "accepted");
}

TEST(Transform, CorruptJpegGivesBadDataNamingTheInput) {
  Bytes jpeg = make_image(ImageCodec::jpeg, 320, 240, 4);
  Bytes cut(jpeg.begin(), jpeg.begin() + 300);
  for (TransformKind kind : {TransformKind::eval, TransformKind::train}) {
    TransformOptions o;
    o.kind = kind;
    o.scale_min = 1.0;  // a crop reaching the missing rows
    try {
      load_transformed(Source::memory(cut, "cut.jpg"), o, 0);
      FAIL() << "a truncated JPEG decoded";
    } catch (const MediaError& e) {
      EXPECT_EQ(e.code(), ErrorCode::bad_data) << e.what();
      EXPECT_EQ(e.input(), "cut.jpg");
    }
  }
  Bytes header_only(jpeg.begin(), jpeg.begin() + 20);
  EXPECT_THROW(load_transformed(Source::memory(header_only, "h.jpg"), TransformOptions{}, 0),
               MediaError);
}

// A JPEG with an APP1 EXIF segment whose IFD0 holds one Orientation entry.
Bytes with_orientation(const Bytes& jpeg, int orientation, bool little_endian) {
  auto u16 = [&](std::vector<std::uint8_t>& b, unsigned v) {
    if (little_endian) {
      b.push_back(std::uint8_t(v));
      b.push_back(std::uint8_t(v >> 8));
    } else {
      b.push_back(std::uint8_t(v >> 8));
      b.push_back(std::uint8_t(v));
    }
  };
  auto u32 = [&](std::vector<std::uint8_t>& b, unsigned v) {
    if (little_endian) {
      u16(b, v & 0xffff);
      u16(b, v >> 16);
    } else {
      u16(b, v >> 16);
      u16(b, v & 0xffff);
    }
  };
  std::vector<std::uint8_t> tiff{std::uint8_t(little_endian ? 'I' : 'M'),
                                 std::uint8_t(little_endian ? 'I' : 'M')};
  u16(tiff, 42);
  u32(tiff, 8);
  u16(tiff, 1);
  u16(tiff, 0x0112);
  u16(tiff, 3);
  u32(tiff, 1);
  u16(tiff, unsigned(orientation));
  u16(tiff, 0);
  u32(tiff, 0);
  std::vector<std::uint8_t> app1{'E', 'x', 'i', 'f', 0, 0};
  app1.insert(app1.end(), tiff.begin(), tiff.end());
  const std::size_t len = app1.size() + 2;
  Bytes out;
  out.reserve(jpeg.size() + len + 2);
  for (std::uint8_t b : {std::uint8_t(0xFF), std::uint8_t(0xD8), std::uint8_t(0xFF),
                         std::uint8_t(0xE1), std::uint8_t(len >> 8), std::uint8_t(len)})
    out.push_back(b);
  for (std::uint8_t b : app1) out.push_back(b);
  for (std::size_t i = 2; i < jpeg.size(); ++i) out.push_back(jpeg[i]);
  return out;
}

// The stored image turned upright as orientation `o` says (PIL's exif_transpose).
Rgb upright(const Rgb& s, int o) {
  Rgb r;
  const bool swap = o >= 5;
  r.w = swap ? s.h : s.w;
  r.h = swap ? s.w : s.h;
  r.px.resize(s.px.size());
  for (int y = 0; y < r.h; ++y) {
    for (int x = 0; x < r.w; ++x) {
      // Where output (x, y) comes from, by the inverse of each operation.
      int sx = x, sy = y;
      if (o == 2) sx = s.w - 1 - x;
      if (o == 3) sx = s.w - 1 - x, sy = s.h - 1 - y;
      if (o == 4) sy = s.h - 1 - y;
      if (o == 5) sx = y, sy = x;                      // transpose
      if (o == 6) sx = y, sy = s.h - 1 - x;            // 90 degrees clockwise
      if (o == 7) sx = s.w - 1 - y, sy = s.h - 1 - x;  // transverse
      if (o == 8) sx = s.w - 1 - y, sy = x;            // 90 degrees counter-clockwise
      std::memcpy(&r.px[(std::size_t(y) * r.w + x) * 3], &s.px[(std::size_t(sy) * s.w + sx) * 3],
                  3);
    }
  }
  return r;
}

TEST(Transform, ExifOrientationIsAppliedOnlyWhenAsked) {
  const Bytes plain = make_image(ImageCodec::jpeg, 400, 300, 9);
  const Rgb stored = reference_decode(plain);
  for (int o : {2, 3, 4, 5, 6, 7, 8}) {
    const Bytes jpeg = with_orientation(plain, o, o % 2 == 0);
    TransformOptions off;
    const Tensor a = load_transformed(Source::memory(jpeg), off, 0);
    const std::vector<std::uint8_t> stored_ref = pil_eval(stored);
    EXPECT_LT(mae(a.data_as<std::uint8_t>(), stored_ref.data(), stored_ref.size()), 0.3) << o;
    TransformOptions on;
    on.exif_orientation = true;
    const Tensor b = load_transformed(Source::memory(jpeg), on, 0);
    const std::vector<std::uint8_t> ref = pil_eval(upright(stored, o));
    EXPECT_LT(mae(b.data_as<std::uint8_t>(), ref.data(), ref.size()), 0.3) << o;
    EXPECT_GT(mae(b.data_as<std::uint8_t>(), stored_ref.data(), stored_ref.size()), 1.0) << o;
  }
  // A malformed EXIF segment counts as no orientation.
  Bytes bad = with_orientation(plain, 6, false);
  bad[4 + 2 + 6 + 3] = 0;  // the TIFF magic 42 (big-endian: its low byte)
  EXPECT_EQ(detail::exif_orientation({bad.data() + 6, bad.size() - 6}), 1);
}

TEST(Transform, NormalizeGivesFloatChw) {
  Tensor in = Tensor::empty(DType::uint8, {2, 2, 3});
  for (int i = 0; i < 12; ++i) in.data_as<std::uint8_t>()[i] = std::uint8_t(i * 20);
  Tensor out = Tensor::empty(DType::float32, {3, 2, 2});
  normalize_into(in, imagenet_normalization(), out);
  Normalization n = imagenet_normalization();
  for (int c = 0; c < 3; ++c) {
    for (int p = 0; p < 4; ++p) {
      const float want =
          (float(in.data_as<std::uint8_t>()[p * 3 + c]) / 255.0f - n.mean[c]) / n.stddev[c];
      EXPECT_NEAR(out.data_as<float>()[c * 4 + p], want, 1e-5);
    }
  }
  Tensor hwc = Tensor::empty(DType::float32, {2, 2, 3});
  normalize_into(in, n, hwc);
  for (int p = 0; p < 4; ++p)
    for (int c = 0; c < 3; ++c)
      EXPECT_EQ(hwc.data_as<float>()[p * 3 + c], out.data_as<float>()[c * 4 + p]);
  Tensor wrong = Tensor::empty(DType::float32, {3, 2, 3});
  EXPECT_THROW(normalize_into(in, n, wrong), MediaError);
  n.stddev[1] = 0;
  EXPECT_THROW(normalize_into(in, n, out), MediaError);
}

}  // namespace
}  // namespace brigade::media
