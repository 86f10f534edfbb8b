#include "media/detail/ffmpeg/scale.h"

#include <string>
#include <utility>

extern "C" {
#include <libavutil/frame.h>
#include <libavutil/opt.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>
}

#include "media/detail/ffmpeg/error.h"

namespace brigade::media::detail {
namespace {

constexpr int kSwsFlags = SWS_BILINEAR | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT;

AVPixelFormat unjpeg(AVPixelFormat f, bool& full_range) {
  switch (f) {
    case AV_PIX_FMT_YUVJ420P:
      full_range = true;
      return AV_PIX_FMT_YUV420P;
    case AV_PIX_FMT_YUVJ422P:
      full_range = true;
      return AV_PIX_FMT_YUV422P;
    case AV_PIX_FMT_YUVJ444P:
      full_range = true;
      return AV_PIX_FMT_YUV444P;
    case AV_PIX_FMT_YUVJ440P:
      full_range = true;
      return AV_PIX_FMT_YUV440P;
    case AV_PIX_FMT_YUVJ411P:
      full_range = true;
      return AV_PIX_FMT_YUV411P;
    default:
      return f;
  }
}

int sws_colorspace(AVColorSpace cs) {
  switch (cs) {
    case AVCOL_SPC_BT709:
      return SWS_CS_ITU709;
    case AVCOL_SPC_FCC:
      return SWS_CS_FCC;
    case AVCOL_SPC_SMPTE240M:
      return SWS_CS_SMPTE240M;
    case AVCOL_SPC_BT2020_NCL:
    case AVCOL_SPC_BT2020_CL:
      return SWS_CS_BT2020;
    default:
      return SWS_CS_ITU601;
  }
}

// Chroma sample 0's position relative to luma sample 0, in 1/256 luma pixels
// (swscale's src_h_chr_pos); -513 lets swscale choose.
void chroma_position(const Picture& p, int& h, int& v) {
  h = v = -513;
  switch (p.chroma_location) {
    case AVCHROMA_LOC_LEFT:
      h = 0;
      v = 128;
      break;
    case AVCHROMA_LOC_CENTER:
      h = 128;
      v = 128;
      break;
    case AVCHROMA_LOC_TOPLEFT:
      h = 0;
      v = 0;
      break;
    default:
      break;
  }
}

}  // namespace

Picture picture_of(const AVFrame* frame) {
  Picture p;
  for (int i = 0; i < 4; ++i) {
    p.data[i] = frame->data[i];
    p.linesize[i] = frame->linesize[i];
  }
  p.width = frame->width;
  p.height = frame->height;
  p.full_range = frame->color_range == AVCOL_RANGE_JPEG;
  p.format = unjpeg(static_cast<AVPixelFormat>(frame->format), p.full_range);
  p.colorspace = frame->colorspace;
  p.chroma_location = frame->chroma_location;
  return p;
}

AVPixelFormat av_pixel_format(PixelFormat format) {
  switch (format) {
    case PixelFormat::rgb24:
      return AV_PIX_FMT_RGB24;
    case PixelFormat::bgr24:
      return AV_PIX_FMT_BGR24;
    case PixelFormat::gray8:
      return AV_PIX_FMT_GRAY8;
    case PixelFormat::yuv420p:
      return AV_PIX_FMT_YUV420P;
  }
  return AV_PIX_FMT_NONE;
}

void Scaler::scale(const Picture& src, const Geometry& g, PixelFormat format, std::uint8_t* dst,
                   std::string_view input) {
  const AVPixFmtDescriptor* desc = av_pix_fmt_desc_get(src.format);
  if (desc == nullptr || !sws_isSupportedInput(src.format)) {
    throw MediaError(ErrorCode::unsupported, std::string(input),
                     std::string("unsupported pixel format ") + (desc ? desc->name : "none"));
  }
  const Rect& r = g.src;
  if (r.x < 0 || r.y < 0 || r.w <= 0 || r.h <= 0 || r.x + r.w > src.width ||
      r.y + r.h > src.height) {
    throw MediaError(ErrorCode::invalid_argument, std::string(input),
                     "source rectangle outside the picture");
  }
  // Offset each plane to the rectangle. With subsampled chroma and an odd
  // offset, the chroma row/column starts half a luma pixel early: tell swscale.
  Picture p = src;
  int h_chr = 0, v_chr = 0;
  chroma_position(src, h_chr, v_chr);
  const bool planar = desc->flags & AV_PIX_FMT_FLAG_PLANAR;
  const int xs = desc->log2_chroma_w, ys = desc->log2_chroma_h;
  for (int i = 0; i < 4 && p.data[i] != nullptr; ++i) {
    bool chroma = planar && (i == 1 || i == 2) && desc->nb_components >= 3;
    int x = chroma ? (r.x >> xs) : r.x;
    int y = chroma ? (r.y >> ys) : r.y;
    int bpp = planar ? (desc->comp[0].depth + 7) / 8 : av_get_bits_per_pixel(desc) / 8;
    if (desc->flags & AV_PIX_FMT_FLAG_PAL && i == 1) continue;  // palette, not a plane
    if (!planar && i > 0) continue;
    if (bpp <= 0 && x != 0) {
      throw MediaError(ErrorCode::unsupported, std::string(input),
                       "cropping a bitstream pixel format");
    }
    p.data[i] +=
        static_cast<std::ptrdiff_t>(y) * p.linesize[i] + static_cast<std::ptrdiff_t>(x) * bpp;
  }
  if (planar && desc->nb_components >= 3) {
    if (xs > 0 && (r.x & ((1 << xs) - 1)))
      h_chr = (h_chr == -513 ? 128 : h_chr) - 256 * (r.x & ((1 << xs) - 1));
    if (ys > 0 && (r.y & ((1 << ys) - 1)))
      v_chr = (v_chr == -513 ? 128 : v_chr) - 256 * (r.y & ((1 << ys) - 1));
  }
  const AVPixelFormat dst_fmt = av_pixel_format(format);
  Key key{r.w,   r.h,   src.format, src.full_range, src.colorspace,
          h_chr, v_chr, g.out_w,    g.out_h,        dst_fmt};
  if (!ctx_ || !(key == key_)) {
    ctx_.reset();
    SwsContextPtr ctx(sws_alloc_context());
    if (!ctx) throw std::bad_alloc();
    SwsContext* c = ctx.get();
    av_opt_set_int(c, "srcw", r.w, 0);
    av_opt_set_int(c, "srch", r.h, 0);
    av_opt_set_int(c, "src_format", src.format, 0);
    av_opt_set_int(c, "dstw", g.out_w, 0);
    av_opt_set_int(c, "dsth", g.out_h, 0);
    av_opt_set_int(c, "dst_format", dst_fmt, 0);
    av_opt_set_int(c, "sws_flags", kSwsFlags, 0);
    av_opt_set_int(c, "src_range", src.full_range ? 1 : 0, 0);
    av_opt_set_int(c, "dst_range", format == PixelFormat::yuv420p ? 0 : 1, 0);
    av_opt_set_int(c, "src_h_chr_pos", h_chr, 0);
    av_opt_set_int(c, "src_v_chr_pos", v_chr, 0);
    check_averror(sws_init_context(c, nullptr, nullptr), input, "while initialising the scaler");
    const int* coeffs = sws_getCoefficients(sws_colorspace(src.colorspace));
    sws_setColorspaceDetails(c, coeffs, src.full_range ? 1 : 0, sws_getCoefficients(SWS_CS_ITU601),
                             format == PixelFormat::yuv420p ? 0 : 1, 0, 1 << 16, 1 << 16);
    ctx_ = std::move(ctx);
    key_ = key;
  }
  std::uint8_t* out[4] = {dst, nullptr, nullptr, nullptr};
  int out_linesize[4] = {0, 0, 0, 0};
  switch (format) {
    case PixelFormat::rgb24:
    case PixelFormat::bgr24:
      out_linesize[0] = g.out_w * 3;
      break;
    case PixelFormat::gray8:
      out_linesize[0] = g.out_w;
      break;
    case PixelFormat::yuv420p:
      out_linesize[0] = g.out_w;
      out_linesize[1] = out_linesize[2] = g.out_w / 2;
      out[1] = dst + static_cast<std::size_t>(g.out_w) * g.out_h;
      out[2] = out[1] + static_cast<std::size_t>(g.out_w / 2) * (g.out_h / 2);
      break;
  }
  int rows = sws_scale(ctx_.get(), p.data, p.linesize, 0, r.h, out, out_linesize);
  if (rows != g.out_h) {
    throw MediaError(
        ErrorCode::bad_data, std::string(input),
        "scaler wrote " + std::to_string(rows) + " of " + std::to_string(g.out_h) + " rows");
  }
  if (g.flip) {
    const int planes = format == PixelFormat::yuv420p ? 3 : 1;
    const int bpp = format == PixelFormat::rgb24 || format == PixelFormat::bgr24 ? 3 : 1;
    for (int i = 0; i < planes; ++i) {
      const int w = i == 0 ? g.out_w : g.out_w / 2, h = i == 0 ? g.out_h : g.out_h / 2;
      mirror_rows(out[i], w, h, bpp);
    }
  }
}

void mirror_rows(std::uint8_t* rows, int width, int height, int bpp) {
  for (int y = 0; y < height; ++y) {
    std::uint8_t* row = rows + static_cast<std::size_t>(y) * width * bpp;
    for (int a = 0, b = width - 1; a < b; ++a, --b) {
      for (int k = 0; k < bpp; ++k) std::swap(row[a * bpp + k], row[b * bpp + k]);
    }
  }
}

Scaler& thread_scaler() {
  thread_local Scaler scaler;
  return scaler;
}

}  // namespace brigade::media::detail
