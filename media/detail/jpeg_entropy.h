#pragma once
// A Huffman entropy decoder for libjpeg-turbo's decompressor (media/detail/libjpeg.cc),
// installed in place of libjpeg's own for single-scan Huffman JPEGs, that gives the
// same coefficients with less work where the region decode throws them away:
//
// - Blocks whose coefficients nobody reads (the MCU rows jpeg_skip_scanlines discards,
//   and the MCU columns outside jpeg_crop_scanline's window, which libjpeg
//   entropy-decodes but never transforms) are only parsed: each code is consumed without
//   extending its value or storing it; the DC differences are still summed, since the
//   blocks after them predict from them.
// - Short codes are decoded with their value bits in one table look-up (11 bits: the
//   code and the magnitude together), the rest as libjpeg does.
//
// EXACTNESS. Huffman decoding is lossless: for a valid stream every stored coefficient
// is the one libjpeg's decoder stores, so every decoded pixel is libjpeg's
// (tests/media/jpeg_entropy_test.cc compares whole images and regions, every chroma
// layout). Corrupt streams (a code no table holds, data ending before the region, a DC
// sum overflowing) are reported through libjpeg's own warning and error messages
// (JWRN_HUFF_BAD_CODE, JWRN_HIT_MARKER, JERR_BAD_DCT_COEF), which JpegDecoder turns
// into errors.
//
// Scope: 8-bit, sequential (not progressive), Huffman (not arithmetic), one scan
// holding every component, no restart interval; anything else keeps libjpeg's decoder.
// Reads the compressed bytes in place from the memory source (jpeg_mem_src), which
// must hold the rest of the file.
//
// Thread safety: the decoder lives in the decompressor's image pool, one per
// decompressor; its look-up tables are cached per thread (rebuilt when a file's tables
// differ), so a thread runs one decode at a time, as JpegDecoder::decode does.

struct jpeg_decompress_struct;

namespace brigade::media::detail {

/// Replaces `cinfo`'s entropy decoder, after jpeg_start_decompress (and any
/// jpeg_crop_scanline) and before the first scanline is read, where the file is in
/// scope (above). Returns whether it did; its memory goes with the image pool
/// (jpeg_abort_decompress, jpeg_destroy_decompress).
bool install_entropy_decoder(jpeg_decompress_struct* cinfo);

}  // namespace brigade::media::detail
