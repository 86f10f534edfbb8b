#include "media/image.h"

#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <thread>

#include "media/errors.h"
#include "media/synthetic.h"
#include "tests/media/jpeg_encode.h"

namespace brigade::media {
namespace {

using testing::encode_with;

double mean_abs_diff(const std::uint8_t* a, const std::uint8_t* b, std::size_t n) {
  double sum = 0;
  for (std::size_t i = 0; i < n; ++i) sum += std::abs(int(a[i]) - int(b[i]));
  return sum / double(n);
}

// Full-size RGB decode with TurboJPEG (accurate DCT, fancy upsampling).
std::vector<std::uint8_t> reference_decode(const Bytes& jpeg, int& w, int& h) {
  std::unique_ptr<void, int (*)(void*)> tj(tjInitDecompress(), tjDestroy);
  int ss = 0, cs = 0;
  tjDecompressHeader3(tj.get(), jpeg.data(), jpeg.size(), &w, &h, &ss, &cs);
  std::vector<std::uint8_t> rgb(std::size_t(w) * h * 3);
  EXPECT_EQ(tjDecompress2(tj.get(), jpeg.data(), jpeg.size(), rgb.data(), w, 0, h, TJPF_RGB,
                          TJFLAG_ACCURATEDCT),
            0);
  return rgb;
}

// Separable antialiased bilinear (triangle filter whose support grows with
// the shrink factor, as PIL and torchvision's antialias=True do), in float.
std::vector<float> resize_axis(const std::vector<float>& in, int w, int h, int out_w,
                               bool horizontal) {
  const int n_in = horizontal ? w : h, n_out = out_w;
  const double scale = double(n_in) / n_out, support = std::max(scale, 1.0);
  const int other = horizontal ? h : w;
  std::vector<float> out(std::size_t(other) * n_out * 3);
  for (int o = 0; o < n_out; ++o) {
    const double center = (o + 0.5) * scale;
    const int lo = std::max(0, int(std::floor(center - support))),
              hi = std::min(n_in, int(std::ceil(center + support)));
    std::vector<double> wts;
    double total = 0;
    for (int i = lo; i < hi; ++i) {
      double wt = std::max(0.0, 1.0 - std::abs((i + 0.5 - center) / support));
      wts.push_back(wt);
      total += wt;
    }
    for (int k = 0; k < other; ++k) {
      for (int c = 0; c < 3; ++c) {
        double acc = 0;
        for (int i = lo; i < hi; ++i) {
          std::size_t idx =
              horizontal ? (std::size_t(k) * w + i) * 3 + c : (std::size_t(i) * w + k) * 3 + c;
          acc += wts[i - lo] * in[idx];
        }
        std::size_t oidx =
            horizontal ? (std::size_t(k) * n_out + o) * 3 + c : (std::size_t(o) * w + k) * 3 + c;
        out[oidx] = float(acc / total);
      }
    }
  }
  return out;
}

// The eval transform done the straightforward way: full decode, float
// bilinear resize of the shorter side to 256, center crop 224.
std::vector<std::uint8_t> reference_eval224(const Bytes& jpeg) {
  int w = 0, h = 0;
  std::vector<std::uint8_t> rgb = reference_decode(jpeg, w, h);
  const int rw = w <= h ? 256 : int(256LL * w / h), rh = w <= h ? int(256LL * h / w) : 256;
  std::vector<float> f(rgb.begin(), rgb.end());
  std::vector<float> horiz = resize_axis(f, w, h, rw, true);
  std::vector<float> both = resize_axis(horiz, rw, h, rh, false);
  const int left = int(std::lround((rw - 224) / 2.0)), top = int(std::lround((rh - 224) / 2.0));
  std::vector<std::uint8_t> out(224 * 224 * 3);
  for (int y = 0; y < 224; ++y) {
    for (int x = 0; x < 224 * 3; ++x) {
      float v = both[(std::size_t(y + top) * rw + left) * 3 + x];
      out[std::size_t(y) * 224 * 3 + x] = std::uint8_t(std::clamp(v + 0.5f, 0.0f, 255.0f));
    }
  }
  return out;
}

TEST(Image, DecodesJpegCloseToItsSource) {
  const Bytes rgb = synthetic_rgb(96, 64, 1);
  const Bytes jpeg = encode_jpeg(rgb, 96, 64, 90);
  Tensor t = load_image(Source::memory(jpeg, "a.jpg"));
  ASSERT_EQ(t.shape(), (std::vector<std::int64_t>{64, 96, 3}));
  EXPECT_LT(mean_abs_diff(t.data_as<std::uint8_t>(), rgb.data(), rgb.size()), 9.0);
}

TEST(Image, DecodesLosslessFormatsExactly) {
  const Bytes rgb = synthetic_rgb(50, 37, 2);
  for (ImageCodec codec : {ImageCodec::png, ImageCodec::bmp}) {
    Tensor t = load_image(Source::memory(make_image(codec, 50, 37, 2)));
    ASSERT_EQ(t.shape(), (std::vector<std::int64_t>{37, 50, 3}));
    EXPECT_TRUE(std::equal(rgb.begin(), rgb.end(), t.data_as<std::uint8_t>())) << int(codec);
  }
}

TEST(Image, DecodesWebp) {
  const Bytes rgb = synthetic_rgb(64, 48, 3);
  Tensor t = load_image(Source::memory(make_image(ImageCodec::webp, 64, 48, 3)));
  ASSERT_EQ(t.shape(), (std::vector<std::int64_t>{48, 64, 3}));
  EXPECT_LT(mean_abs_diff(t.data_as<std::uint8_t>(), rgb.data(), rgb.size()), 12.0);
}

TEST(Image, SyntheticJpegLooksLikeImageNet) {
  const Bytes jpeg = make_image(ImageCodec::jpeg, 500, 375, 7);
  EXPECT_GT(jpeg.size(), 50'000u);
  EXPECT_LT(jpeg.size(), 250'000u);
  EXPECT_EQ(jpeg, make_image(ImageCodec::jpeg, 500, 375, 7));  // deterministic
  EXPECT_NE(jpeg, make_image(ImageCodec::jpeg, 500, 375, 8));
  ImageInfo info = probe_image(Source::memory(jpeg));
  EXPECT_EQ(info.width, 500);
  EXPECT_EQ(info.height, 375);
}

TEST(Image, EvalTransformMatchesFloatBilinearReference) {
  for (auto [w, h] : {std::pair{500, 375}, {375, 500}, {333, 250}, {640, 480}, {1024, 683}}) {
    const Bytes jpeg = make_image(ImageCodec::jpeg, w, h, std::uint64_t(w * h));
    const std::vector<std::uint8_t> ref = reference_eval224(jpeg);
    for (bool dct : {true, false}) {
      ImageOptions o = imagenet_eval_options();
      o.dct_scaling = dct;
      Tensor t = load_image(Source::memory(jpeg), o);
      ASSERT_EQ(t.shape(), (std::vector<std::int64_t>{224, 224, 3}));
      const double mae = mean_abs_diff(t.data_as<std::uint8_t>(), ref.data(), ref.size());
      // The crop's source rectangle is rounded to whole pixels (up to half a
      // source pixel at each edge), which on this deliberately noisy content
      // costs about 1-2 levels; DCT scaling (opt-in) keeps more of the noise.
      EXPECT_LT(mae, dct ? 5.0 : 2.5) << w << "x" << h << " dct_scaling=" << dct;
      std::fprintf(stderr, "eval224 %dx%d dct_scaling=%d MAE=%.3f\n", w, h, int(dct), mae);
    }
  }
}

TEST(Image, EvalTransformHandlesEveryJpegLayout) {
  // Odd crop offsets in subsampled chroma, grayscale and progressive files.
  const int w = 487, h = 365;
  const Bytes rgb = synthetic_rgb(w, h, 21);
  for (int subsamp : {TJSAMP_444, TJSAMP_422, TJSAMP_420, TJSAMP_440, TJSAMP_411, TJSAMP_GRAY}) {
    for (int flags : {0, TJFLAG_PROGRESSIVE}) {
      const Bytes jpeg = encode_with(rgb, w, h, subsamp, 90, flags);
      Tensor t = load_image(Source::memory(jpeg), imagenet_eval_options());
      const std::vector<std::uint8_t> ref = reference_eval224(jpeg);
      const double mae = mean_abs_diff(t.data_as<std::uint8_t>(), ref.data(), ref.size());
      EXPECT_LT(mae, 2.5) << "subsampling " << subsamp << " flags " << flags;
    }
  }
}

TEST(Image, DecodesCmykJpeg) {
  // TurboJPEG cannot turn CMYK/YCCK into RGB; load_image hands these to FFmpeg.
  const int w = 64, h = 48;
  std::vector<unsigned char> cmyk(std::size_t(w) * h * 4);
  for (std::size_t i = 0; i < cmyk.size(); ++i) cmyk[i] = std::uint8_t(i * 7 % 255);
  std::unique_ptr<void, int (*)(void*)> tj(tjInitCompress(), tjDestroy);
  unsigned char* out = nullptr;
  unsigned long size = 0;
  ASSERT_EQ(tjCompress2(tj.get(), cmyk.data(), w, 0, h, TJPF_CMYK, &out, &size, TJSAMP_420, 90, 0),
            0);
  const Bytes jpeg(out, out + size);
  tjFree(out);
  EXPECT_EQ(load_image(Source::memory(jpeg, "cmyk.jpg")).shape(),
            (std::vector<std::int64_t>{48, 64, 3}));
}

TEST(Image, EvalTransformOfPngMatchesReferenceGeometry) {
  // The same geometry through the FFmpeg path: compare JPEG and PNG of the same content.
  const Bytes jpeg = make_image(ImageCodec::jpeg, 320, 240, 11, 100);
  const Bytes png = make_image(ImageCodec::png, 320, 240, 11);
  ImageOptions o = imagenet_eval_options();
  o.dct_scaling = false;
  Tensor a = load_image(Source::memory(jpeg), o), b = load_image(Source::memory(png), o);
  EXPECT_LT(mean_abs_diff(a.data_as<std::uint8_t>(), b.data_as<std::uint8_t>(), a.nbytes()), 3.0);
}

TEST(Image, OutputFormatsHaveDocumentedLayout) {
  const Bytes png = make_image(ImageCodec::png, 40, 30, 4);
  ImageOptions o;
  Tensor rgb = load_image(Source::memory(png), o);
  o.format = PixelFormat::bgr24;
  Tensor bgr = load_image(Source::memory(png), o);
  for (int i = 0; i < 40 * 30; ++i) {
    ASSERT_EQ(rgb.data_as<std::uint8_t>()[i * 3], bgr.data_as<std::uint8_t>()[i * 3 + 2]);
  }
  o.format = PixelFormat::gray8;
  EXPECT_EQ(load_image(Source::memory(png), o).shape(), (std::vector<std::int64_t>{30, 40, 1}));
  o.format = PixelFormat::yuv420p;
  EXPECT_EQ(load_image(Source::memory(png), o).shape(), (std::vector<std::int64_t>{45, 40}));
  o.resize = ResizeMode::stretch;
  o.width = 21;
  o.height = 20;
  try {
    load_image(Source::memory(png, "odd"), o);
    FAIL();
  } catch (const MediaError& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
  }
}

TEST(Image, ResizeModesGiveExpectedShapes) {
  const Bytes jpeg = make_image(ImageCodec::jpeg, 200, 100, 5);
  ImageOptions o;
  o.resize = ResizeMode::stretch;
  o.width = 64;
  o.height = 64;
  EXPECT_EQ(load_image(Source::memory(jpeg), o).shape(), (std::vector<std::int64_t>{64, 64, 3}));
  o.resize = ResizeMode::fit;
  EXPECT_EQ(load_image(Source::memory(jpeg), o).shape(), (std::vector<std::int64_t>{32, 64, 3}));
  o.resize = ResizeMode::shorter_side_crop;
  o.shorter_side = 80;
  EXPECT_EQ(load_image(Source::memory(jpeg), o).shape(), (std::vector<std::int64_t>{64, 64, 3}));
  EXPECT_EQ(image_output_shape(o, 200, 100), (std::vector<std::int64_t>{64, 64, 3}));
}

TEST(Image, DecodesIntoCallerBuffer) {
  const Bytes jpeg = make_image(ImageCodec::jpeg, 300, 200, 6);
  const ImageOptions o = imagenet_eval_options();
  Tensor expected = load_image(Source::memory(jpeg), o);
  Tensor out = Tensor::empty(DType::uint8, {224, 224, 3});
  load_image_into(Source::memory(jpeg), o, out);
  EXPECT_TRUE(std::equal(out.bytes().begin(), out.bytes().end(), expected.bytes().begin()));
  Tensor wrong = Tensor::empty(DType::uint8, {224, 224, 1});
  EXPECT_THROW(load_image_into(Source::memory(jpeg), o, wrong), MediaError);
}

TEST(Image, BatchDecodesIntoOneNhwcBuffer) {
  std::vector<Bytes> files;
  for (int i = 0; i < 4; ++i) files.push_back(make_image(ImageCodec::jpeg, 260 + 10 * i, 240, i));
  files.push_back(make_image(ImageCodec::png, 300, 260, 9));
  std::vector<Source> sources;
  for (const auto& f : files) sources.push_back(Source::memory(f));
  int allocations = 0;
  Allocator counting = [&](std::size_t n) {
    ++allocations;
    return default_allocate(n);
  };
  Tensor batch = load_image_batch(sources, imagenet_eval_options(), counting);
  EXPECT_EQ(allocations, 1);
  ASSERT_EQ(batch.shape(), (std::vector<std::int64_t>{5, 224, 224, 3}));
  for (int i = 0; i < 5; ++i) {
    Tensor one = load_image(sources[i], imagenet_eval_options());
    Tensor slot = batch[i];
    EXPECT_TRUE(std::equal(one.bytes().begin(), one.bytes().end(), slot.data_as<std::uint8_t>()))
        << i;
  }
  Bytes bad(100, 7);
  sources.push_back(Source::memory(bad, "sample-5"));
  try {
    load_image_batch(sources, imagenet_eval_options());
    FAIL();
  } catch (const MediaError& e) {
    EXPECT_EQ(e.input(), "sample-5");
  }
}

TEST(Image, ConcurrentDecodesGiveTheSameResults) {
  std::vector<Bytes> files;
  for (int i = 0; i < 6; ++i) {
    files.push_back(make_image(i % 2 ? ImageCodec::png : ImageCodec::jpeg, 200 + 16 * i, 180,
                               std::uint64_t(i)));
  }
  std::vector<Tensor> expected;
  for (const auto& f : files)
    expected.push_back(load_image(Source::memory(f), imagenet_eval_options()));
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round) {
        for (std::size_t i = 0; i < files.size(); ++i) {
          const std::size_t k = (i + std::size_t(t)) % files.size();
          Tensor got = load_image(Source::memory(files[k]), imagenet_eval_options());
          if (std::memcmp(got.data(), expected[k].data(), got.nbytes()) != 0) ++mismatches;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(Image, AppliesFilterDescription) {
  const Bytes png = make_image(ImageCodec::png, 64, 48, 12);
  ImageOptions o;
  o.filter_desc = "scale=32:24";
  Tensor plain = load_image(Source::memory(png), o);
  ASSERT_EQ(plain.shape(), (std::vector<std::int64_t>{24, 32, 3}));
  o.filter_desc = "scale=32:24,hflip";
  Tensor flipped = load_image(Source::memory(png), o);
  const std::uint8_t* a = plain.data_as<std::uint8_t>();
  const std::uint8_t* b = flipped.data_as<std::uint8_t>();
  for (int c = 0; c < 3; ++c) EXPECT_EQ(a[c], b[31 * 3 + c]);
  o.filter_desc = "nosuchfilter=1";
  try {
    load_image(Source::memory(png, "f.png"), o);
    FAIL();
  } catch (const MediaError& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("nosuchfilter"), std::string::npos);
  }
  EXPECT_NE(make_filter_desc(imagenet_eval_options(), 500, 375).find("crop="), std::string::npos);
}

TEST(Image, CropAndFlipApplyBeforeAndAfterTheResize) {
  const Bytes rgb = synthetic_rgb(50, 37, 2);
  const Bytes png = make_image(ImageCodec::png, 50, 37, 2);
  ImageOptions o;
  o.crop_x = 7;
  o.crop_y = 5;
  o.crop_width = 20;
  o.crop_height = 11;
  Tensor crop = load_image(Source::memory(png), o);
  ASSERT_EQ(crop.shape(), (std::vector<std::int64_t>{11, 20, 3}));
  o.flip = true;
  Tensor mirrored = load_image(Source::memory(png), o);
  const std::uint8_t* c = crop.data_as<std::uint8_t>();
  const std::uint8_t* m = mirrored.data_as<std::uint8_t>();
  for (int y = 0; y < 11; ++y) {
    for (int x = 0; x < 20; ++x) {
      for (int k = 0; k < 3; ++k) {
        const std::uint8_t want = rgb[(std::size_t(y + 5) * 50 + x + 7) * 3 + k];
        ASSERT_EQ(c[(y * 20 + x) * 3 + k], want) << x << "," << y;
        ASSERT_EQ(m[(y * 20 + (19 - x)) * 3 + k], want) << x << "," << y;
      }
    }
  }
  // A crop then a resize is the resize of the cropped image, on the JPEG path too and
  // in every output format; the flip mirrors each plane.
  const Bytes jpeg = make_image(ImageCodec::jpeg, 96, 80, 3);
  for (PixelFormat f : {PixelFormat::rgb24, PixelFormat::gray8, PixelFormat::yuv420p}) {
    ImageOptions whole;
    whole.format = f;
    whole.resize = ResizeMode::stretch;
    whole.width = 32;
    whole.height = 16;
    ImageOptions part = whole;
    part.crop_x = 16;
    part.crop_y = 8;
    part.crop_width = 64;
    part.crop_height = 32;
    Tensor a = load_image(Source::memory(jpeg), part);
    ImageOptions pixels;
    pixels.format = PixelFormat::rgb24;
    Tensor full = load_image(Source::memory(jpeg), pixels);
    ASSERT_EQ(a.shape(), image_shape(f, 32, 16));
    part.flip = true;
    Tensor b = load_image(Source::memory(jpeg), part);
    const int bpp = f == PixelFormat::rgb24 ? 3 : 1;
    const std::uint8_t* pa = a.data_as<std::uint8_t>();
    const std::uint8_t* pb = b.data_as<std::uint8_t>();
    for (int y = 0; y < 16; ++y) {
      for (int x = 0; x < 32; ++x) {
        for (int k = 0; k < bpp; ++k) {
          ASSERT_EQ(pa[(y * 32 + x) * bpp + k], pb[(y * 32 + 31 - x) * bpp + k]) << int(f);
        }
      }
    }
    if (f == PixelFormat::rgb24) {
      // The crop's content: against the stretch of the crop cut from a full decode.
      const std::uint8_t* px = full.data_as<std::uint8_t>();
      double diff = 0;
      for (int y = 0; y < 16; ++y) {
        for (int x = 0; x < 32; ++x) {
          for (int k = 0; k < 3; ++k) {
            diff += std::abs(int(pa[(y * 32 + x) * 3 + k]) -
                             int(px[(std::size_t(8 + 2 * y) * 96 + 16 + 2 * x) * 3 + k]));
          }
        }
      }
      EXPECT_LT(diff / (32 * 16 * 3), 12.0);  // a 2x shrink of noisy content vs point samples
    }
  }
  ImageOptions outside;
  outside.crop_x = 40;
  outside.crop_width = 20;
  outside.crop_height = 10;
  try {
    load_image(Source::memory(png, "p.png"), outside);
    FAIL();
  } catch (const MediaError& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("20x10+40+0 is not inside the 50x37 image"),
              std::string::npos)
        << e.what();
  }
  ImageOptions flip_filter;
  flip_filter.flip = true;
  flip_filter.filter_desc = "scale=10:10";
  EXPECT_THROW(load_image(Source::memory(png), flip_filter), MediaError);
  ImageOptions both;
  both.crop_x = 7;
  both.crop_width = both.crop_height = 20;
  both.flip = true;
  both.resize = ResizeMode::stretch;
  both.width = both.height = 10;
  EXPECT_EQ(make_filter_desc(both, 50, 37),
            "crop=20:20:7:0,scale=10:10:flags=bilinear+accurate_rnd+full_chroma_int,hflip,"
            "format=rgb24");
}

TEST(Image, FfmpegMjpegPathMatchesTurboJpeg) {
  // With a filter, JPEG goes through FFmpeg's MJPEG decoder (yuvj420p frames).
  const Bytes jpeg = make_image(ImageCodec::jpeg, 160, 120, 15);
  ImageOptions o;
  Tensor tj = load_image(Source::memory(jpeg), o);
  o.filter_desc = "null";
  Tensor ff = load_image(Source::memory(jpeg), o);
  ASSERT_EQ(tj.shape(), ff.shape());
  // Different IDCTs and chroma upsampling (the filter graph converts with its own swscale
  // settings).
  EXPECT_LT(mean_abs_diff(tj.data_as<std::uint8_t>(), ff.data_as<std::uint8_t>(), tj.nbytes()),
            3.0);
}

TEST(Image, ReadsFilesWhateverTheirExtension) {
  const auto dir = std::filesystem::temp_directory_path();
  const std::string path = (dir / "brigade_image_test_png_named.jpg").string();
  write_file(path, make_image(ImageCodec::png, 30, 20, 13));
  Tensor t = load_image(Source::file(path));
  EXPECT_EQ(t.shape(), (std::vector<std::int64_t>{20, 30, 3}));
  std::filesystem::remove(path);
}

ErrorCode error_of(const Source& s, const ImageOptions& o = {}) {
  try {
    load_image(s, o);
  } catch (const MediaError& e) {
    EXPECT_NE(std::string(e.what()).find(s.name()), std::string::npos) << e.what();
    return e.code();
  }
  ADD_FAILURE() << "no error for " << s.name();
  return ErrorCode::io;
}

TEST(Image, BadInputsGiveTypedErrorsNamingTheInput) {
  EXPECT_EQ(error_of(Source::file("/nonexistent/brigade.jpg")), ErrorCode::not_found);
  const Bytes empty;
  EXPECT_EQ(error_of(Source::memory(empty, "empty-input")), ErrorCode::bad_data);
  Bytes jpeg = make_image(ImageCodec::jpeg, 64, 64, 14);
  Bytes truncated(jpeg.begin(), jpeg.begin() + jpeg.size() / 2);
  EXPECT_EQ(error_of(Source::memory(truncated, "truncated.jpg")), ErrorCode::bad_data);
  Bytes png = make_image(ImageCodec::png, 64, 64, 14);
  Bytes truncated_png(png.begin(), png.begin() + png.size() / 2);
  EXPECT_EQ(error_of(Source::memory(truncated_png, "truncated.png")), ErrorCode::bad_data);
  Bytes text(200, 'x');
  const ErrorCode garbage = error_of(Source::memory(text, "garbage.bin"));
  EXPECT_TRUE(garbage == ErrorCode::bad_data || garbage == ErrorCode::unsupported);
  // Zero width in the JPEG's SOF0 marker.
  for (std::size_t i = 0; i + 8 < jpeg.size(); ++i) {
    if (jpeg[i] == 0xFF && jpeg[i + 1] == 0xC0) {
      jpeg[i + 7] = 0;
      jpeg[i + 8] = 0;
      break;
    }
  }
  EXPECT_EQ(error_of(Source::memory(jpeg, "zero-width.jpg")), ErrorCode::bad_data);
  ImageOptions crop_too_big = imagenet_eval_options();
  crop_too_big.shorter_side = 100;
  EXPECT_EQ(error_of(Source::memory(png, "small.png"), crop_too_big), ErrorCode::invalid_argument);
}

}  // namespace
}  // namespace brigade::media
