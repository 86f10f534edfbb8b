#pragma once
// Encodes RGB bytes with TurboJPEG directly, for tests that need a JPEG the synthetic
// encoder does not make (any chroma subsampling and quality, optionally progressive).

#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace brigade::media::testing {

inline std::vector<std::uint8_t> encode_with(const std::vector<std::uint8_t>& rgb, int w, int h,
                                             int subsamp, int quality, int flags = 0) {
  std::unique_ptr<void, int (*)(void*)> tj(tjInitCompress(), tjDestroy);
  unsigned char* out = nullptr;
  unsigned long size = 0;
  EXPECT_EQ(
      tjCompress2(tj.get(), rgb.data(), w, 0, h, TJPF_RGB, &out, &size, subsamp, quality, flags),
      0);
  std::vector<std::uint8_t> jpeg(out, out + size);
  tjFree(out);
  return jpeg;
}

}  // namespace brigade::media::testing
