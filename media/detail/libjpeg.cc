#include "media/detail/libjpeg.h"

// jpeglib.h needs FILE and size_t declared before it.
#include <jpeglib.h>

#include <algorithm>
#include <csetjmp>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <vector>

#include "media/detail/jpeg_entropy.h"
#include "media/errors.h"
#include "media/image.h"

namespace brigade::media::detail {

// Everything libjpeg touches, on the heap (its address is fixed while libjpeg holds
// pointers into it), trivially destructible but for what ~JpegDecoder releases.
struct JpegDecoder::State {
  jpeg_decompress_struct cinfo{};
  jpeg_error_mgr err{};
  std::jmp_buf jump{};
  char message[JMSG_LENGTH_MAX] = {};
  bool created = false;
  std::span<const std::uint8_t> bytes;
  // Arguments and results of the steps.
  int denom = 1;
  JDIMENSION xoffset = 0, width = 0;
  JDIMENSION skip = 0, rows = 0;
  std::uint8_t* out = nullptr;
  std::size_t stride = 0;
  std::size_t bytes_unread = 0;
  bool own_entropy = false;
};

namespace {

enum class Step { header, start, read };

[[noreturn]] void error_exit(j_common_ptr c) {
  auto* s = static_cast<JpegDecoder::State*>(c->client_data);
  (*c->err->format_message)(c, s->message);
  std::longjmp(s->jump, 1);
}

// Level -1 is a warning: corrupt data libjpeg would decode anyway. Fail instead.
void emit_message(j_common_ptr c, int level) {
  if (level < 0) error_exit(c);
}

// The only setjmp: every libjpeg call that can fail runs below it, in this frame, which
// holds no object with a destructor. Returns false with s.message set on an error.
[[gnu::noinline]] bool call(JpegDecoder::State& s, Step step) {
  if (setjmp(s.jump) != 0) return false;
  j_decompress_ptr c = &s.cinfo;
  switch (step) {
    case Step::header:
      c->err = jpeg_std_error(&s.err);
      s.err.error_exit = error_exit;
      s.err.emit_message = emit_message;
      c->client_data = &s;
      jpeg_create_decompress(c);
      s.created = true;
      jpeg_mem_src(c, s.bytes.data(), static_cast<unsigned long>(s.bytes.size()));
      jpeg_save_markers(c, JPEG_APP0 + 1, 0xFFFF);
      jpeg_read_header(c, TRUE);
      return true;
    case Step::start:
      c->scale_num = 1;
      c->scale_denom = static_cast<unsigned>(s.denom);
      c->out_color_space = JCS_RGB;
      c->dct_method = JDCT_ISLOW;
      c->do_fancy_upsampling = TRUE;
      jpeg_start_decompress(c);
      if (s.xoffset > 0 || s.width < c->output_width) jpeg_crop_scanline(c, &s.xoffset, &s.width);
      s.width = c->output_width;
      s.own_entropy = install_entropy_decoder(c);
      return true;
    case Step::read: {
      if (s.skip > 0 && jpeg_skip_scanlines(c, s.skip) != s.skip) {
        std::strcpy(s.message, "the image ends before the region");
        return false;
      }
      JSAMPROW rows[16];
      for (JDIMENSION done = 0; done < s.rows;) {
        const JDIMENSION n = s.rows - done < 16 ? s.rows - done : 16;
        for (JDIMENSION i = 0; i < n; ++i) rows[i] = s.out + (done + i) * s.stride;
        const JDIMENSION got = jpeg_read_scanlines(c, rows, n);
        if (got == 0) {
          std::strcpy(s.message, "the image ends before the region");
          return false;
        }
        done += got;
      }
      s.bytes_unread = c->src->bytes_in_buffer;
      jpeg_abort_decompress(c);
      return true;
    }
  }
  return true;
}

std::uint8_t* decoded_rows_scratch(std::size_t n) {
  thread_local std::vector<std::uint8_t> buf;
  if (buf.size() < n) buf.resize(n + n / 4);
  return buf.data();
}

std::uint32_t read_u(std::span<const std::uint8_t> b, std::size_t at, int n, bool little) {
  std::uint32_t v = 0;
  for (int i = 0; i < n; ++i) {
    const std::uint32_t byte = b[at + (little ? n - 1 - i : i)];
    v = (v << 8) | byte;
  }
  return v;
}

}  // namespace

JpegDecodeFigures& thread_jpeg_figures() {
  thread_local JpegDecodeFigures figures;
  return figures;
}

int exif_orientation(std::span<const std::uint8_t> app1) {
  constexpr std::size_t kTiff = 6;  // after "Exif\0\0"
  if (app1.size() < kTiff + 8 || std::memcmp(app1.data(), "Exif\0\0", 6) != 0) return 1;
  const auto tiff = app1.subspan(kTiff);
  const bool little = tiff[0] == 'I' && tiff[1] == 'I';
  if (!little && !(tiff[0] == 'M' && tiff[1] == 'M')) return 1;
  if (read_u(tiff, 2, 2, little) != 42) return 1;
  const std::size_t ifd = read_u(tiff, 4, 4, little);
  if (ifd + 2 > tiff.size()) return 1;
  const std::size_t entries = read_u(tiff, ifd, 2, little);
  for (std::size_t i = 0; i < entries; ++i) {
    const std::size_t at = ifd + 2 + 12 * i;
    if (at + 12 > tiff.size()) return 1;
    if (read_u(tiff, at, 2, little) != 0x0112) continue;  // Orientation
    if (read_u(tiff, at + 2, 2, little) != 3 || read_u(tiff, at + 4, 4, little) != 1) return 1;
    const auto v = static_cast<int>(read_u(tiff, at + 8, 2, little));  // a SHORT, inline
    return v >= 1 && v <= 8 ? v : 1;
  }
  return 1;
}

JpegDecoder::JpegDecoder(std::span<const std::uint8_t> bytes, std::string_view input)
    : state_(std::make_unique<State>()), input_(input) {
  state_->bytes = bytes;
  // A constructor that throws runs no destructor: release what libjpeg holds here.
  try {
    read_header();
  } catch (...) {
    if (state_->created) jpeg_destroy_decompress(&state_->cinfo);
    throw;
  }
}

void JpegDecoder::read_header() {
  const std::span<const std::uint8_t> bytes = state_->bytes;
  if (!call(*state_, Step::header)) fail("while reading the JPEG header");
  const jpeg_decompress_struct& c = state_->cinfo;
  info_.width = static_cast<int>(c.image_width);
  info_.height = static_cast<int>(c.image_height);
  info_.cmyk = c.jpeg_color_space == JCS_CMYK || c.jpeg_color_space == JCS_YCCK;
  const std::int64_t pixels = std::int64_t(info_.width) * info_.height;
  const std::string size = std::to_string(info_.width) + "x" + std::to_string(info_.height);
  if (pixels > kMaxPixels) {
    throw MediaError(ErrorCode::unsupported, input_,
                     "image of " + size + " exceeds the pixel limit");
  }
  // Every 8x8 luma block costs at least one bit, even in a flat image: a header claiming
  // far more pixels than the bytes can hold is corrupt, and must not make us allocate.
  if (pixels > 2048 * std::int64_t(bytes.size()) + (1 << 20)) {
    throw MediaError(
        ErrorCode::bad_data, input_,
        "JPEG header claims " + size + " in " + std::to_string(bytes.size()) + " bytes");
  }
  for (jpeg_saved_marker_ptr m = c.marker_list; m != nullptr; m = m->next) {
    if (m->marker != JPEG_APP0 + 1) continue;
    const int o = exif_orientation({m->data, m->data_length});
    if (o != 1) info_.orientation = o;
  }
}

JpegDecoder::~JpegDecoder() {
  if (state_->created) jpeg_destroy_decompress(&state_->cinfo);
}

void JpegDecoder::fail(const char* doing) {
  const std::string msg = state_->message;
  const ErrorCode code =
      msg.find("nsupported") != std::string::npos ? ErrorCode::unsupported : ErrorCode::bad_data;
  throw MediaError(code, input_, std::string(doing) + ": " + msg);
}

JpegRegion JpegDecoder::decode(int denom, int x0, int y0, int x1, int y1) {
  State& s = *state_;
  const int sw = scaled(info_.width, denom), sh = scaled(info_.height, denom);
  x0 = std::max(x0, 0);
  y0 = std::max(y0, 0);
  x1 = std::min(x1, sw);
  y1 = std::min(y1, sh);
  if (info_.cmyk || x0 >= x1 || y0 >= y1) {
    throw MediaError(ErrorCode::invalid_argument, input_, "no region of this JPEG to decode");
  }
  s.denom = denom;
  s.xoffset = static_cast<JDIMENSION>(x0);
  s.width = static_cast<JDIMENSION>(x1 - x0);
  if (!call(s, Step::start)) fail("while decoding JPEG");
  if (static_cast<int>(s.cinfo.output_height) != sh) {
    throw MediaError(ErrorCode::bad_data, input_, "libjpeg scaled the image unexpectedly");
  }
  s.stride = (static_cast<std::size_t>(s.width) * 3 + 63) / 64 * 64;
  s.skip = static_cast<JDIMENSION>(y0);
  s.rows = static_cast<JDIMENSION>(y1 - y0);
  s.out = decoded_rows_scratch(s.stride * s.rows + 64);
  if (!call(s, Step::read)) fail("while decoding JPEG");
  figures_ = {std::int64_t(sw) * sh,
              std::int64_t(s.width) * s.rows,
              static_cast<std::int64_t>(s.bytes.size()),
              static_cast<std::int64_t>(s.bytes_unread),
              denom,
              s.own_entropy};
  return {s.out, static_cast<std::ptrdiff_t>(s.stride), static_cast<int>(s.xoffset),
          y0,    static_cast<int>(s.xoffset + s.width), y1};
}

}  // namespace brigade::media::detail
