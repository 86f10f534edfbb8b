#include "transport/device/device_normalize.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "transport/device/detail/device_cpu.h"

namespace brigade::transport {
namespace {

using media::DType;

std::vector<std::uint8_t> random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint8_t> v(n);
  for (auto& b : v) b = static_cast<std::uint8_t>(rng());
  return v;
}

const NormalizeOptions kImageNet{
    .mean = {0.485f, 0.456f, 0.406f}, .stddev = {0.229f, 0.224f, 0.225f}, .scale = 1.0f / 255.0f};

TEST(Normalize, ComputesScaledValueMinusMeanOverStddev) {
  const std::vector<std::int64_t> shape{3, 5, 7, 3};
  auto in = random_bytes(3 * 5 * 7 * 3, 1);
  std::vector<float> out(in.size());
  auto job = make_normalize_job(kImageNet, shape);
  job.src = in.data();
  job.dst = out.data();
  normalize_reference(job);
  for (int n = 0; n < 3; ++n) {
    for (int h = 0; h < 5; ++h) {
      for (int w = 0; w < 7; ++w) {
        for (int c = 0; c < 3; ++c) {
          const double x = in[((n * 5 + h) * 7 + w) * 3 + c];
          const double expected = (x / 255.0 - kImageNet.mean[c]) / kImageNet.stddev[c];
          const float got = out[((n * 3 + c) * 5 + h) * 7 + w];  // NCHW
          EXPECT_NEAR(got, expected, 2e-6 * std::max(1.0, std::abs(expected)));
        }
      }
    }
  }
}

TEST(Normalize, KeepsChannelsLastWhenAsked) {
  NormalizeOptions o{.mean = {1, 2}, .stddev = {1, 1}, .layout = Layout::nhwc};
  const std::vector<std::uint8_t> in{10, 20, 30, 40};  // [1, 1, 2, 2]
  std::vector<float> out(4);
  auto job = make_normalize_job(o, {1, 1, 2, 2});
  job.src = in.data();
  job.dst = out.data();
  normalize_reference(job);
  EXPECT_EQ(out, (std::vector<float>{9, 18, 29, 38}));
  EXPECT_EQ(normalized_shape(o, {1, 1, 2, 2}), (std::vector<std::int64_t>{1, 1, 2, 2}));
}

TEST(Normalize, ClipsKeepTheirLeadingDimensions) {
  NormalizeOptions o{.mean = {0, 0, 0}, .stddev = {1, 1, 1}};
  EXPECT_EQ(normalized_shape(o, {2, 8, 4, 6, 3}), (std::vector<std::int64_t>{2, 8, 3, 4, 6}));
  auto job = make_normalize_job(o, {2, 8, 4, 6, 3});
  EXPECT_EQ(job.images, 16);
  EXPECT_EQ(normalized_bytes(job), 2u * 8 * 4 * 6 * 3 * 4);
}

TEST(Normalize, RejectsWhatItCannotDo) {
  auto rejects = [](const NormalizeOptions& o, std::vector<std::int64_t> shape, const char* what) {
    try {
      make_normalize_job(o, shape);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  rejects(kImageNet, {4, 4, 1}, "1 channels");
  rejects(kImageNet, {4, 4}, "expected [..., H, W, C]");
  rejects(NormalizeOptions{.mean = {0, 0, 0}, .stddev = {1, 0, 1}}, {1, 2, 2, 3}, "channel 1");
  rejects(NormalizeOptions{.mean = {0, 0, 0}, .stddev = {1, 1, 1}, .dtype = DType::uint8},
          {1, 2, 2, 3}, "float32 or float16");
  rejects(NormalizeOptions{.mean = std::vector<float>(9, 0), .stddev = std::vector<float>(9, 1)},
          {1, 2, 2, 9}, "9 channels");
}

TEST(Normalize, HalfRoundingIsToNearestEven) {
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);                      // largest half
  EXPECT_EQ(float_to_half(65519.0f), 0x7bff);                      // below the halfway point
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);                      // halfway, rounds to inf
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);         // smallest subnormal
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);         // tie → even (0)
  EXPECT_EQ(float_to_half(std::ldexp(3.0f, -25)), 0x0002);         // tie → even (2)
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie → even
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // tie → even
  EXPECT_EQ(float_to_half(std::ldexp(1023.0f, -24)), 0x03ff);      // largest subnormal
  EXPECT_EQ(float_to_half(std::ldexp(2047.0f, -25)), 0x0400);      // rounds up to normal
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(float_to_half(std::nanf("")), 0x7fff);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
}

TEST(Normalize, HalfConversionsRoundTripEveryHalf) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    const float f = half_to_float(bits);
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_half(f), bits) << std::hex << h;
  }
}

#ifdef __FLT16_MAX__
// The compiler's own float → _Float16 conversion (IEEE round to nearest even) as an
// independent reference over many floats, subnormals and overflow included.
TEST(Normalize, HalfRoundingMatchesTheCompilersFloat16) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::uint32_t> exponent(100, 145);
  for (int i = 0; i < 200000; ++i) {
    const std::uint32_t bits = (rng() & 0x807fffffu) | (exponent(rng) << 23);
    const float f = std::bit_cast<float>(bits);
    const _Float16 expected = static_cast<_Float16>(f);
    ASSERT_EQ(float_to_half(f), std::bit_cast<std::uint16_t>(expected)) << f;
  }
}
#endif

TEST(Normalize, CpuDeviceMatchesTheReferenceBitForBit) {
  auto device = std::make_shared<detail::CpuDevice>();
  for (auto dtype : {DType::float32, DType::float16}) {
    for (auto layout : {Layout::nchw, Layout::nhwc}) {
      NormalizeOptions o = kImageNet;
      o.dtype = dtype;
      o.layout = layout;
      const std::vector<std::int64_t> shape{4, 9, 11, 3};
      auto in = random_bytes(4 * 9 * 11 * 3, 3);
      auto job = make_normalize_job(o, shape);
      const std::size_t out_bytes = normalized_bytes(job);
      std::vector<std::uint8_t> expected(out_bytes);
      job.src = in.data();
      job.dst = expected.data();
      normalize_reference(job);

      auto src = device->allocate_device(in.size());
      auto dst = device->allocate_device(out_bytes);
      device->copy_to_device(src.get(), in.data(), in.size());
      job.src = static_cast<const std::uint8_t*>(src.get());
      job.dst = dst.get();
      device->normalize(job);
      std::vector<std::uint8_t> got(out_bytes);
      device->copy_to_host(got.data(), dst.get(), out_bytes);
      device->synchronize();
      EXPECT_EQ(got, expected) << media::dtype_name(dtype) << " " << media::layout_name(layout);
    }
  }
}

}  // namespace
}  // namespace brigade::transport
