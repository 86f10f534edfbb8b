#include "media/detail/ffmpeg/jpeg.h"

#include <turbojpeg.h>

#include <cstring>
#include <memory>
#include <string>

#include "media/detail/ffmpeg/scale.h"
#include "media/errors.h"

namespace brigade::media::detail {
namespace {

constexpr int kDecodeFlags = TJFLAG_ACCURATEDCT | TJFLAG_STOPONWARNING;
constexpr std::size_t kAlign = 64;
constexpr int kDctHeadroom = 2;

struct TjDeleter {
  void operator()(void* h) const { tjDestroy(h); }
};
using TjHandle = std::unique_ptr<void, TjDeleter>;

TjHandle& thread_handle() {
  thread_local TjHandle handle;
  return handle;
}

tjhandle thread_decompressor() {
  TjHandle& handle = thread_handle();
  if (!handle) handle.reset(tjInitDecompress());
  if (!handle) throw std::bad_alloc();
  return handle.get();
}

// Per-thread scratch memory for decoded planes, reused across calls.
std::uint8_t* scratch(std::size_t nbytes) {
  thread_local std::unique_ptr<std::uint8_t[]> buf;
  thread_local std::size_t capacity = 0;
  if (capacity < nbytes + kAlign) {
    capacity = nbytes + kAlign + nbytes / 4;
    buf = std::make_unique_for_overwrite<std::uint8_t[]>(capacity);
  }
  auto addr = reinterpret_cast<std::uintptr_t>(buf.get());
  return buf.get() + ((kAlign - addr % kAlign) % kAlign);
}

[[noreturn]] void throw_tj(tjhandle h, std::string_view input, const char* doing) {
  std::string msg = tjGetErrorStr2(h);
  // A handle that failed mid-stream can keep stale decoder state: start afresh.
  thread_handle().reset();
  ErrorCode code =
      msg.find("nsupported") != std::string::npos ? ErrorCode::unsupported : ErrorCode::bad_data;
  throw MediaError(code, std::string(input), std::string(doing) + ": " + msg);
}

int align_up(int v) { return int((v + kAlign - 1) / kAlign * kAlign); }

AVPixelFormat yuv_format(int subsamp) {
  switch (subsamp) {
    case TJSAMP_444:
      return AV_PIX_FMT_YUV444P;
    case TJSAMP_422:
      return AV_PIX_FMT_YUV422P;
    case TJSAMP_420:
      return AV_PIX_FMT_YUV420P;
    case TJSAMP_440:
      return AV_PIX_FMT_YUV440P;
    case TJSAMP_411:
      return AV_PIX_FMT_YUV411P;
    case TJSAMP_GRAY:
      return AV_PIX_FMT_GRAY8;
    default:
      return AV_PIX_FMT_NONE;
  }
}

// The smallest DCT scaling factor that keeps the source rectangle at least
// kDctHeadroom times the output size: nothing is upsampled afterwards, and the
// final bilinear shrink still does the filtering (a DCT-scaled image alone is
// sharper and noisier than a filtered one; see image_test's reference MAE).
tjscalingfactor choose_scale(const ImageOptions& o, const Geometry& g, int w, int h) {
  tjscalingfactor best{1, 1};
  if (!o.dct_scaling) return best;
  int n = 0;
  const tjscalingfactor* factors = tjGetScalingFactors(&n);
  for (int i = 0; i < n; ++i) {
    const tjscalingfactor f = factors[i];
    if (f.num * best.denom >= best.num * f.denom) continue;  // not smaller than best
    int sw = TJSCALED(w, f), sh = TJSCALED(h, f);
    Geometry s = rescale_source(g, w, h, sw, sh);
    if (s.src.w >= kDctHeadroom * g.out_w && s.src.h >= kDctHeadroom * g.out_h) best = f;
  }
  return best;
}

}  // namespace

JpegHeader read_jpeg_header(std::span<const std::uint8_t> bytes, std::string_view input) {
  tjhandle h = thread_decompressor();
  int w = 0, ht = 0, subsamp = 0, cs = 0;
  if (tjDecompressHeader3(h, bytes.data(), static_cast<unsigned long>(bytes.size()), &w, &ht,
                          &subsamp, &cs) != 0) {
    throw_tj(h, input, "while reading the JPEG header");
  }
  return {w, ht, cs == TJCS_CMYK || cs == TJCS_YCCK};
}

void decode_jpeg(std::span<const std::uint8_t> bytes, const ImageOptions& options,
                 const Geometry& g, std::uint8_t* dst, std::string_view input) {
  tjhandle h = thread_decompressor();
  const auto size = static_cast<unsigned long>(bytes.size());
  int w = 0, ht = 0, subsamp = 0, cs = 0;
  if (tjDecompressHeader3(h, bytes.data(), size, &w, &ht, &subsamp, &cs) != 0) {
    throw_tj(h, input, "while reading the JPEG header");
  }
  if (std::int64_t(w) * ht > kMaxPixels) {
    throw MediaError(
        ErrorCode::unsupported, std::string(input),
        "image of " + std::to_string(w) + "x" + std::to_string(ht) + " exceeds the pixel limit");
  }
  // Every 8x8 luma block costs at least one bit, even in a flat image: a
  // header claiming far more pixels than the bytes can hold is corrupt, and
  // must not make us allocate planes for it.
  if (std::int64_t(w) * ht > 2048 * std::int64_t(bytes.size()) + (1 << 20)) {
    throw MediaError(ErrorCode::bad_data, std::string(input),
                     "JPEG header claims " + std::to_string(w) + "x" + std::to_string(ht) + " in " +
                         std::to_string(bytes.size()) + " bytes");
  }
  const tjscalingfactor f = choose_scale(options, g, w, ht);
  const int sw = TJSCALED(w, f), sh = TJSCALED(ht, f);
  const Geometry sg = rescale_source(g, w, ht, sw, sh);
  Picture pic;
  pic.width = sw;
  pic.height = sh;
  pic.full_range = true;
  pic.colorspace = AVCOL_SPC_BT470BG;
  pic.chroma_location = AVCHROMA_LOC_CENTER;
  const AVPixelFormat yuv = yuv_format(subsamp);
  if ((cs == TJCS_YCbCr || cs == TJCS_GRAY) && yuv != AV_PIX_FMT_NONE) {
    const int planes = subsamp == TJSAMP_GRAY ? 1 : 3;
    int strides[3] = {};
    int heights[3] = {};
    std::size_t total = 0;
    for (int i = 0; i < planes; ++i) {
      strides[i] = align_up(tjPlaneWidth(i, sw, subsamp));
      heights[i] = tjPlaneHeight(i, sh, subsamp);
      total += static_cast<std::size_t>(strides[i]) * heights[i] + kAlign;
    }
    std::uint8_t* base = scratch(total);
    unsigned char* plane_ptrs[3] = {};
    for (int i = 0; i < planes; ++i) {
      plane_ptrs[i] = base;
      pic.data[i] = base;
      pic.linesize[i] = strides[i];
      base += static_cast<std::size_t>(strides[i]) * heights[i] + kAlign;
    }
    if (tjDecompressToYUVPlanes(h, bytes.data(), size, plane_ptrs, sw, strides, sh, kDecodeFlags) !=
        0) {
      throw_tj(h, input, "while decoding JPEG");
    }
    pic.format = yuv;
  } else {
    const int stride = align_up(sw * 3);
    std::uint8_t* base = scratch(static_cast<std::size_t>(stride) * sh + kAlign);
    if (tjDecompress2(h, bytes.data(), size, base, sw, stride, sh, TJPF_RGB, kDecodeFlags) != 0) {
      throw_tj(h, input, "while decoding JPEG");
    }
    pic.data[0] = base;
    pic.linesize[0] = stride;
    pic.format = AV_PIX_FMT_RGB24;
  }
  thread_scaler().scale(pic, sg, options.format, dst, input);
}

}  // namespace brigade::media::detail
