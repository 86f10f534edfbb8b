// synthetic.h's content generators and the JPEG encoder: no FFmpeg, so the core and the
// FFmpeg plugin (which encodes the other formats) both build this file.
#include <turbojpeg.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numbers>

#include "media/detail/synthetic.h"
#include "media/errors.h"
#include "media/synthetic.h"

namespace brigade::media {
namespace {

using detail::clamp8;
using detail::Rng;

[[noreturn]] void fail(const std::string& what, const std::string& why) {
  detail::synthetic_fail(what, why);
}

// One octave of smooth value noise, 3 channels, cells of `cell` pixels.
class ValueNoise {
 public:
  ValueNoise(int width, int height, int cell, Rng& rng)
      : cell_(cell), gw_(width / cell + 2), grid_(std::size_t(gw_) * (height / cell + 2) * 3) {
    for (auto& v : grid_) v = rng.uniform(-1.0f, 1.0f);
  }
  void at(int x, int y, float out[3]) const {
    const int cx = x / cell_, cy = y / cell_;
    float fx = float(x % cell_) / cell_, fy = float(y % cell_) / cell_;
    fx = fx * fx * (3 - 2 * fx);
    fy = fy * fy * (3 - 2 * fy);
    const float* a = &grid_[(std::size_t(cy) * gw_ + cx) * 3];
    const float* b = a + 3;
    const float* c = a + std::size_t(gw_) * 3;
    const float* d = c + 3;
    for (int k = 0; k < 3; ++k) {
      float top = a[k] + (b[k] - a[k]) * fx, bottom = c[k] + (d[k] - c[k]) * fx;
      out[k] = top + (bottom - top) * fy;
    }
  }

 private:
  int cell_;
  int gw_;
  std::vector<float> grid_;
};

struct Shape {
  float cx, cy, rx, ry;
  float color[3];
  float freq, cos_a, sin_a, amp;
};

}  // namespace

Bytes synthetic_rgb(int width, int height, std::uint64_t seed) {
  if (width <= 0 || height <= 0) fail("image", "width and height must be positive");
  Rng rng(seed);
  const ValueNoise coarse(width, height, 96, rng), mid(width, height, 24, rng),
      fine(width, height, 5, rng);
  float c0[3], c1[3];
  for (int k = 0; k < 3; ++k) {
    c0[k] = rng.uniform(30, 220);
    c1[k] = rng.uniform(30, 220);
  }
  std::vector<Shape> shapes(6 + rng.next() % 8);
  for (auto& s : shapes) {
    s.cx = rng.uniform(0, float(width));
    s.cy = rng.uniform(0, float(height));
    s.rx = rng.uniform(0.05f, 0.35f) * width;
    s.ry = rng.uniform(0.05f, 0.35f) * height;
    for (float& c : s.color) c = rng.uniform(0, 255);
    s.freq = rng.uniform(0.08f, 1.2f);
    float a = rng.uniform(0, std::numbers::pi_v<float>);
    s.cos_a = std::cos(a);
    s.sin_a = std::sin(a);
    s.amp = rng.uniform(8, 40);
  }
  Bytes out(std::size_t(width) * height * 3);
  std::uint8_t* p = out.data();
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x, p += 3) {
      const float t = (float(x) / width + float(y) / height) * 0.5f;
      float v[3], n1[3], n2[3], n3[3];
      coarse.at(x, y, n1);
      mid.at(x, y, n2);
      fine.at(x, y, n3);
      for (int k = 0; k < 3; ++k)
        v[k] = c0[k] + (c1[k] - c0[k]) * t + 45 * n1[k] + 22 * n2[k] + 14 * n3[k];
      for (const Shape& s : shapes) {
        const float dx = (x - s.cx) / s.rx, dy = (y - s.cy) / s.ry;
        const float r2 = dx * dx + dy * dy;
        if (r2 >= 1) continue;
        const float stripe = s.amp * std::sin(s.freq * (x * s.cos_a + y * s.sin_a));
        const float alpha = r2 > 0.9f ? (1 - r2) * 10 : 1.0f;  // soft edge
        for (int k = 0; k < 3; ++k) v[k] += alpha * (s.color[k] + stripe - v[k]);
      }
      const float noise = 5.0f * rng.normal();
      for (int k = 0; k < 3; ++k) p[k] = clamp8(v[k] + noise + 2.0f * rng.normal());
    }
  }
  return out;
}

Bytes encode_jpeg(std::span<const std::uint8_t> rgb, int width, int height, int quality) {
  if (width <= 0 || height <= 0 || rgb.size() < std::size_t(width) * height * 3) {
    fail("jpeg", "bad dimensions or too few pixels");
  }
  struct TjDeleter {
    void operator()(void* h) const { tjDestroy(h); }
  };
  std::unique_ptr<void, TjDeleter> tj(tjInitCompress());
  if (!tj) throw std::bad_alloc();
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  int ret = tjCompress2(tj.get(), rgb.data(), width, width * 3, height, TJPF_RGB, &jpeg, &size,
                        TJSAMP_420, quality, TJFLAG_ACCURATEDCT);
  std::unique_ptr<unsigned char, void (*)(unsigned char*)> owned(
      jpeg, [](unsigned char* q) { tjFree(q); });
  if (ret != 0) fail("jpeg", tjGetErrorStr2(tj.get()));
  return Bytes(jpeg, jpeg + size);
}

std::vector<float> synthetic_audio(int sample_rate, int channels, std::int64_t samples,
                                   std::uint64_t seed) {
  if (sample_rate <= 0 || channels <= 0 || samples < 0) fail("audio", "bad parameters");
  Rng rng(seed);
  std::vector<float> out(std::size_t(samples) * channels);
  const double f0 = rng.uniform(100, 400), f1 = rng.uniform(800, 3000),
               tone = rng.uniform(200, 1000);
  const double duration = std::max(1.0, double(samples) / sample_rate);
  for (std::int64_t i = 0; i < samples; ++i) {
    const double t = double(i) / sample_rate;
    // Linear chirp from f0 to f1 over the clip, a steady tone, and noise.
    const double phase = 2 * std::numbers::pi * (f0 * t + (f1 - f0) * t * t / (2 * duration));
    const double base = 0.4 * std::sin(phase) + 0.2 * std::sin(2 * std::numbers::pi * tone * t);
    for (int c = 0; c < channels; ++c) {
      out[std::size_t(i) * channels + c] = float(base * (1.0 - 0.2 * c) + 0.05 * rng.normal());
    }
  }
  return out;
}

void write_file(const std::string& path, std::span<const std::uint8_t> bytes) {
  const std::string tmp = path + ".tmp";
  struct Closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  {
    std::unique_ptr<std::FILE, Closer> f(std::fopen(tmp.c_str(), "wb"));
    if (!f)
      throw MediaError(ErrorCode::io, path, std::string("cannot create: ") + std::strerror(errno));
    if (std::fwrite(bytes.data(), 1, bytes.size(), f.get()) != bytes.size() ||
        std::fflush(f.get()) != 0) {
      throw MediaError(ErrorCode::io, path, std::string("cannot write: ") + std::strerror(errno));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw MediaError(ErrorCode::io, path, std::string("cannot rename: ") + std::strerror(errno));
  }
}

}  // namespace brigade::media
