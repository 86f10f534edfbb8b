#pragma once
// What the synthetic media generators share between the core (synthetic_content.cc) and
// the FFmpeg plugin's encoders (detail/ffmpeg/synthetic.cc).

#include <algorithm>
#include <cstdint>
#include <string>

#include "media/errors.h"

namespace brigade::media::detail {

// splitmix64: small, fast and the same everywhere.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull) {}
  std::uint64_t next() {
    std::uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float uniform() { return float(next() >> 40) / float(1 << 24); }  // [0, 1)
  float uniform(float a, float b) { return a + (b - a) * uniform(); }
  // Approximately normal (Irwin-Hall of 4), unit variance.
  float normal() { return (uniform() + uniform() + uniform() + uniform() - 2.0f) * 1.7320508f; }

 private:
  std::uint64_t s_;
};

inline std::uint8_t clamp8(float v) {
  return static_cast<std::uint8_t>(std::clamp(v + 0.5f, 0.0f, 255.0f));
}

[[noreturn]] inline void synthetic_fail(const std::string& what, const std::string& why) {
  throw MediaError(ErrorCode::invalid_argument, "synthetic " + what, why);
}

}  // namespace brigade::media::detail
