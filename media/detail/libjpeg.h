#pragma once
// JPEG decoding through the libjpeg API of libjpeg-turbo (not TurboJPEG, which has no
// cropping in 2.1): a region of interest (jpeg_crop_scanline for columns,
// jpeg_skip_scanlines for the rows above it, and stopping after its last row) at a DCT
// scaling factor of 1/1, 1/2, 1/4 or 1/8, into RGB24 rows. Accurate integer IDCT and
// fancy upsampling, as TurboJPEG's accurate mode and PIL decode. Single-scan Huffman
// files are entropy-decoded by media/detail/jpeg_entropy.h (the same coefficients, less
// work on the blocks outside the region).
//
// ERRORS. libjpeg reports errors by calling error_exit, which must not return. Ours
// longjmps back into JpegDecoder's single call site of setjmp (libjpeg.cc, `call`),
// whose frame holds no C++ object with a destructor, so no C++ frame is ever jumped
// over; the message is converted there, once, into a MediaError naming the input.
// Warnings (corrupt data that libjpeg would paper over) are errors too, as with
// TurboJPEG's TJFLAG_STOPONWARNING.
//
// Thread safety: one JpegDecoder per thread at a time; any number of them concurrently.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace brigade::media::detail {

struct JpegInfo {
  int width = 0, height = 0;
  bool cmyk = false;    // CMYK or YCCK: libjpeg gives no RGB for these (FFmpeg does)
  int orientation = 1;  // EXIF orientation (1-8); 1 when absent or unreadable
};

/// Decoded rows of a region: pixel (x, y) of the scaled image, for x in [x0, x1) and y
/// in [y0, y1), is at data + (y - y0) * stride + (x - x0) * 3. Valid until the next
/// decode on this thread.
struct JpegRegion {
  const std::uint8_t* data = nullptr;
  std::ptrdiff_t stride = 0;
  int x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};

/// What one decode skipped, for benchmarks: scaled-image pixels not reconstructed
/// (outside the region), and compressed bytes never entropy-decoded (after its last row).
struct JpegDecodeFigures {
  std::int64_t pixels = 0, pixels_decoded = 0;
  std::int64_t bytes = 0, bytes_unread = 0;
  int scale_denom = 1;
  bool own_entropy = false;  // media/detail/jpeg_entropy.h decoded the scan (else libjpeg)
};

class JpegDecoder {
 public:
  /// Reads the header (and the EXIF orientation). Throws MediaError: bad_data for a
  /// corrupt header or one claiming more pixels than the bytes can hold, unsupported
  /// past kMaxPixels. `bytes` must outlive the decoder.
  JpegDecoder(std::span<const std::uint8_t> bytes, std::string_view input);
  ~JpegDecoder();
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;

  const JpegInfo& info() const { return info_; }

  /// The size of the image decoded at 1/denom (libjpeg's: ceil(size / denom)).
  static int scaled(int size, int denom) { return (size + denom - 1) / denom; }

  /// Decodes, at 1/denom (1, 2, 4 or 8), at least the region [x0, x1) x [y0, y1) of the
  /// scaled image (the columns widen to whole iMCUs). Once per decoder. Not for CMYK.
  JpegRegion decode(int denom, int x0, int y0, int x1, int y1);

  const JpegDecodeFigures& figures() const { return figures_; }

  struct State;  // libjpeg's structures (libjpeg.cc)

 private:
  std::unique_ptr<State> state_;
  std::string input_;
  JpegInfo info_;
  JpegDecodeFigures figures_;
  void read_header();  // the constructor's work (it cleans up if this throws)
  [[noreturn]] void fail(const char* doing);
};

/// The figures of this thread's last region decode made by media/transform (benchmarks).
JpegDecodeFigures& thread_jpeg_figures();

/// The EXIF orientation in an APP1 payload ("Exif\0\0" + TIFF); 1 if none or malformed.
int exif_orientation(std::span<const std::uint8_t> app1);

}  // namespace brigade::media::detail
