#pragma once
// Colour conversion and scaling of a decoded picture into a contiguous buffer,
// through swscale with a per-thread cached context.

#include <cstdint>
#include <string_view>

extern "C" {
#include <libavutil/pixfmt.h>
}

#include "media/detail/ffmpeg/wrappers.h"
#include "media/detail/geometry.h"
#include "media/pixel_format.h"

struct AVFrame;

namespace brigade::media::detail {

// A decoded picture described in FFmpeg's terms; does not own its planes. Plane
// rows must be readable up to a 64-byte-aligned width past their end (as
// FFmpeg's frames and our JPEG scratch buffers are).
struct Picture {
  const std::uint8_t* data[4] = {};
  int linesize[4] = {};
  int width = 0;
  int height = 0;
  AVPixelFormat format = AV_PIX_FMT_NONE;
  bool full_range = false;
  AVColorSpace colorspace = AVCOL_SPC_UNSPECIFIED;
  AVChromaLocation chroma_location = AVCHROMA_LOC_UNSPECIFIED;
};

// Maps the deprecated yuvj* formats to their yuv* equivalent with full range.
Picture picture_of(const AVFrame* frame);
AVPixelFormat av_pixel_format(PixelFormat format);

// Converts `g.src` of `src` to `g.out_w` x `g.out_h` in `format`, written
// contiguously at `dst` (layout of pixel_format.h). Bilinear, accurate rounding,
// full chroma. Not thread-safe per instance; use one per thread.
class Scaler {
 public:
  void scale(const Picture& src, const Geometry& g, PixelFormat format, std::uint8_t* dst,
             std::string_view input);

 private:
  struct Key {
    int src_w, src_h, src_fmt, full_range, colorspace, h_chr, v_chr, dst_w, dst_h, dst_fmt;
    bool operator==(const Key&) const = default;
  };
  SwsContextPtr ctx_;
  Key key_{};
};

// Mirrors `height` packed rows of `width` pixels of `bpp` bytes left to right.
void mirror_rows(std::uint8_t* rows, int width, int height, int bpp);

// This thread's Scaler.
Scaler& thread_scaler();

}  // namespace brigade::media::detail
