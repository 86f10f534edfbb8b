#include "media/detail/jpeg_entropy.h"

// jpeglib.h needs FILE and size_t declared before it; jpegint.h declares the modules.
#include <cstddef>
#include <cstdio>
// clang-format off
#include <jpeglib.h>
#include <jpegint.h>
#include <jerror.h>
// clang-format on

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <new>

namespace brigade::media::detail {
namespace {
namespace huffman {  // (named: a unity build puts other files' anonymous names beside these)

constexpr int kAcLook = 11;  // bits of an AC look-up (code and magnitude together)
constexpr int kDcLook = 9;   // bits of a DC look-up (the code)

// Zigzag position k to natural position, with 16 entries past the end (a corrupt run
// past coefficient 63 lands on 63, as in libjpeg).
constexpr int kNatural[64 + 16] = {0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,
                                   12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6,  7,  14, 21, 28,
                                   35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51,
                                   58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
                                   63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63};

// A look-up entry: bits 0-7 the symbol (run << 4 | size), bits 8-12 the bits to consume
// (0: the code is longer than the look-up, decode it bit by bit), bit 13 set when the
// entry holds the whole coefficient (code and magnitude: consume both, value in bits
// 16-31).
constexpr std::uint32_t kWhole = 1u << 13;

struct Table {
  std::int32_t maxcode[18];  // the largest code of each length, -1 when none
  std::int32_t valoffset[18];
  std::uint8_t huffval[256];
};

struct AcTable {
  Table t;
  std::uint32_t look[1 << kAcLook];
};

struct DcTable {
  Table t;
  std::uint32_t look[1 << kDcLook];
};

int extend(int v, int s) { return v < (1 << (s - 1)) ? v - (1 << s) + 1 : v; }

// Canonical codes of `h` into `t` and the look-up `look` of `bits` bits; `ac` fills whole
// coefficients where they fit. libjpeg's start_pass has validated the table already.
void build(const JHUFF_TBL& h, bool ac, int bits, Table& t, std::uint32_t* look) {
  std::memset(look, 0, sizeof(std::uint32_t) << bits);
  std::memcpy(t.huffval, h.huffval, sizeof t.huffval);
  int code = 0, index = 0;
  for (int l = 1; l <= 16; ++l) {
    const int n = h.bits[l];
    t.valoffset[l] = index - code;
    t.maxcode[l] = n > 0 ? code + n - 1 : -1;
    for (int i = 0; i < n && index + i < 256; ++i) {
      if (l > bits) continue;
      const int sym = h.huffval[index + i];
      const int c = code + i;
      const int spare = bits - l;
      for (int fill = 0; fill < (1 << spare); ++fill) {
        std::uint32_t e = std::uint32_t(sym) | std::uint32_t(l) << 8;
        const int s = sym & 15;
        if (ac && s != 0 && l + s <= bits) {
          const int v = extend(fill >> (spare - s), s);
          e = std::uint32_t(sym) | std::uint32_t(l + s) << 8 | kWhole |
              std::uint32_t(std::uint16_t(std::int16_t(v))) << 16;
        }
        look[(c << spare) | fill] = e;
      }
    }
    index += n;
    code = (code + n) << 1;
  }
  t.maxcode[17] = INT32_MAX;  // a sentinel: every code ends by length 17
  t.valoffset[17] = 0;
}

struct Decoder {
  jpeg_entropy_decoder pub;  // first: libjpeg sees this
  // The bit reader: `buf` holds `bits` bits, most significant first; the last `pad` of
  // them are zeros standing in for data past a marker or the end of the bytes.
  const std::uint8_t* p;
  const std::uint8_t* end;
  std::uint64_t buf;
  int bits, pad;
  bool at_marker;
  int last_dc[MAX_COMPS_IN_SCAN];
  JDIMENSION column;  // the MCU column of the next call
  const DcTable* dc[D_MAX_BLOCKS_IN_MCU];
  const AcTable* ac[D_MAX_BLOCKS_IN_MCU];
  int comp[D_MAX_BLOCKS_IN_MCU];
  bool ac_needed[D_MAX_BLOCKS_IN_MCU];
  bool interleaved;

  // At least 57 bits (counting padding) in `buf`.
  void refill() {
    if (!at_marker && end - p >= 8) {
      std::uint64_t w;
      std::memcpy(&w, p, 8);
      const std::uint64_t x = ~w;  // a byte 0xFF in w is a zero byte here
      if (((x - 0x0101010101010101ULL) & ~x & 0x8080808080808080ULL) == 0) {
        buf |= __builtin_bswap64(w) >> bits;
        p += (63 - bits) >> 3;
        bits |= 56;
        return;
      }
    }
    while (bits <= 56) {
      std::uint64_t b = 0;
      if (at_marker || p >= end) {
        at_marker = true;
        pad += 8;
      } else if (*p != 0xFF) {
        b = *p++;
      } else if (end - p >= 2 && p[1] == 0x00) {
        b = 0xFF;
        p += 2;
      } else {
        at_marker = true;  // a marker: the entropy-coded data ends here
        pad += 8;
      }
      buf |= b << (56 - bits);
      bits += 8;
    }
  }

  void consume(int n) {
    buf <<= n;
    bits -= n;
  }

  // A code longer than the look-up: bit by bit from length `from`, as jpeg_huff_decode.
  int slow(j_decompress_ptr cinfo, const Table& t, int from) {
    int l = from;
    std::int32_t code = static_cast<std::int32_t>(buf >> (64 - l));
    while (code > t.maxcode[l]) {
      ++l;
      code = static_cast<std::int32_t>(buf >> (64 - l));
    }
    if (l > 16) {
      WARNMS(cinfo, JWRN_HUFF_BAD_CODE);
      consume(0);
      return 0;
    }
    consume(l);
    return t.huffval[(code + t.valoffset[l]) & 0xFF];
  }

  int decode_dc(j_decompress_ptr cinfo, const DcTable& d) {
    const std::uint32_t e = d.look[buf >> (64 - kDcLook)];
    const int len = (e >> 8) & 31;
    int s;
    if (len != 0) {
      consume(len);
      s = static_cast<int>(e & 0xFF);
    } else {
      s = slow(cinfo, d.t, kDcLook + 1);
    }
    if (s == 0) return 0;
    if (s > 15) s = 15;  // libjpeg's start_pass rejects such tables; stay in range regardless
    const int v = static_cast<int>(buf >> (64 - s));
    consume(s);
    return extend(v, s);
  }

  // The AC coefficients of one block into `block` (natural order), or parsed only.
  template <bool kStore>
  void decode_ac(j_decompress_ptr cinfo, const AcTable& a, JCOEF* block) {
    for (int k = 1; k < 64;) {
      if (bits < 32) refill();
      const std::uint32_t e = a.look[buf >> (64 - kAcLook)];
      const int len = (e >> 8) & 31;
      if (e & kWhole) {
        consume(len);
        k += static_cast<int>((e >> 4) & 15);
        if constexpr (kStore) block[kNatural[k]] = static_cast<JCOEF>(std::int32_t(e) >> 16);
        ++k;
        continue;
      }
      int rs;
      if (len != 0) {
        consume(len);
        rs = static_cast<int>(e & 0xFF);
      } else {
        rs = slow(cinfo, a.t, kAcLook + 1);
      }
      const int r = rs >> 4, s = rs & 15;
      if (s != 0) {
        k += r;
        if constexpr (kStore) {
          const int v = static_cast<int>(buf >> (64 - s));
          block[kNatural[k]] = static_cast<JCOEF>(extend(v, s));
        }
        consume(s);
        ++k;
      } else {
        if (r != 15) break;
        k += 16;
      }
    }
  }
};

// The look-up tables of this thread's last files, by table slot: files usually share
// their Huffman tables (the standard ones, or one encoder's), and building them costs
// more than comparing. A decoder's tables stay valid while it decodes: one decoder per
// thread at a time.
struct TableCache {
  JHUFF_TBL dc_key[NUM_HUFF_TBLS], ac_key[NUM_HUFF_TBLS];
  bool dc_valid[NUM_HUFF_TBLS] = {}, ac_valid[NUM_HUFF_TBLS] = {};
  DcTable dc[NUM_HUFF_TBLS];
  AcTable ac[NUM_HUFF_TBLS];
};

TableCache& thread_tables() {
  thread_local TableCache cache;
  return cache;
}

bool same_table(const JHUFF_TBL& a, const JHUFF_TBL& b) {
  return std::memcmp(a.bits, b.bits, sizeof a.bits) == 0 &&
         std::memcmp(a.huffval, b.huffval, sizeof a.huffval) == 0;
}

Decoder* self(j_decompress_ptr cinfo) { return reinterpret_cast<Decoder*>(cinfo->entropy); }

void start_pass(j_decompress_ptr cinfo) {
  // Installed after the scan's pass started; a second scan is out of scope.
  ERREXIT(cinfo, JERR_NOT_COMPILED);
}

boolean decode_mcu(j_decompress_ptr cinfo, JBLOCKROW* MCU_data) {
  Decoder& d = *self(cinfo);
  const JDIMENSION column = d.column;
  d.column = column + 1 == cinfo->MCUs_per_row ? 0 : column + 1;
  if (d.pub.insufficient_data) return TRUE;  // libjpeg's: zeros after a warning
  // Blocks nobody reads: discarded rows, and columns outside the crop (the coefficient
  // controller transforms only iMCU columns first_iMCU_col..last_iMCU_col).
  const bool skip =
      MCU_data == nullptr || (d.interleaved && (column < cinfo->master->first_iMCU_col ||
                                                column > cinfo->master->last_iMCU_col));
  for (int b = 0; b < cinfo->blocks_in_MCU; ++b) {
    if (d.bits < 32) d.refill();
    const int ci = d.comp[b];
    const int diff = d.decode_dc(cinfo, *d.dc[b]);
    const int last = d.last_dc[ci];
    if ((last >= 0 && diff > INT_MAX - last) || (last < 0 && diff < INT_MIN - last)) {
      ERREXIT(cinfo, JERR_BAD_DCT_COEF);
    }
    d.last_dc[ci] = last + diff;
    if (skip || !d.ac_needed[b]) {
      if (!skip) MCU_data[b][0][0] = static_cast<JCOEF>(d.last_dc[ci]);
      d.decode_ac<false>(cinfo, *d.ac[b], nullptr);
    } else {
      JCOEF* block = MCU_data[b][0];
      block[0] = static_cast<JCOEF>(d.last_dc[ci]);
      d.decode_ac<true>(cinfo, *d.ac[b], block);
    }
  }
  // Data past a marker or the end used: the stream is shorter than the image.
  if (d.bits < d.pad && !d.pub.insufficient_data) {
    WARNMS(cinfo, JWRN_HIT_MARKER);
    d.pub.insufficient_data = TRUE;
  }
  // Where the data source stands (bytes in `buf` not yet consumed count as read).
  cinfo->src->bytes_in_buffer -= static_cast<std::size_t>(d.p - cinfo->src->next_input_byte);
  cinfo->src->next_input_byte = d.p;
  return TRUE;
}

}  // namespace huffman
}  // namespace

bool install_entropy_decoder(jpeg_decompress_struct* cinfo) {
  using namespace huffman;
  if (cinfo->progressive_mode || cinfo->arith_code || cinfo->data_precision != 8 ||
      cinfo->restart_interval != 0 || cinfo->comps_in_scan != cinfo->num_components ||
      cinfo->inputctl->has_multiple_scans || cinfo->input_iMCU_row != 0 ||
      cinfo->unread_marker != 0 || cinfo->Ss != 0 || cinfo->Se != DCTSIZE2 - 1 || cinfo->Ah != 0 ||
      cinfo->Al != 0 || cinfo->blocks_in_MCU > D_MAX_BLOCKS_IN_MCU || cinfo->MCUs_per_row == 0) {
    return false;
  }
  for (int b = 0; b < cinfo->blocks_in_MCU; ++b) {
    const jpeg_component_info* c = cinfo->cur_comp_info[cinfo->MCU_membership[b]];
    if (c->dc_tbl_no < 0 || c->dc_tbl_no >= NUM_HUFF_TBLS || c->ac_tbl_no < 0 ||
        c->ac_tbl_no >= NUM_HUFF_TBLS || cinfo->dc_huff_tbl_ptrs[c->dc_tbl_no] == nullptr ||
        cinfo->ac_huff_tbl_ptrs[c->ac_tbl_no] == nullptr) {
      return false;
    }
  }
  void* mem = (*cinfo->mem->alloc_small)(reinterpret_cast<j_common_ptr>(cinfo), JPOOL_IMAGE,
                                         sizeof(Decoder));
  auto* d = new (mem) Decoder;  // (no zeroing: every member is set here)
  d->pub.start_pass = start_pass;
  d->pub.decode_mcu = decode_mcu;
  d->pub.insufficient_data = FALSE;
  d->p = cinfo->src->next_input_byte;
  d->end = d->p + cinfo->src->bytes_in_buffer;
  d->buf = 0;
  d->bits = d->pad = 0;
  d->at_marker = false;
  std::fill(std::begin(d->last_dc), std::end(d->last_dc), 0);
  d->column = 0;
  d->interleaved = cinfo->comps_in_scan > 1;
  TableCache& cache = thread_tables();
  for (int b = 0; b < cinfo->blocks_in_MCU; ++b) {
    const int ci = cinfo->MCU_membership[b];
    const jpeg_component_info* c = cinfo->cur_comp_info[ci];
    const JHUFF_TBL& dc = *cinfo->dc_huff_tbl_ptrs[c->dc_tbl_no];
    const JHUFF_TBL& ac = *cinfo->ac_huff_tbl_ptrs[c->ac_tbl_no];
    if (!cache.dc_valid[c->dc_tbl_no] || !same_table(cache.dc_key[c->dc_tbl_no], dc)) {
      DcTable& t = cache.dc[c->dc_tbl_no];
      build(dc, false, kDcLook, t.t, t.look);
      cache.dc_key[c->dc_tbl_no] = dc;
      cache.dc_valid[c->dc_tbl_no] = true;
    }
    if (!cache.ac_valid[c->ac_tbl_no] || !same_table(cache.ac_key[c->ac_tbl_no], ac)) {
      AcTable& t = cache.ac[c->ac_tbl_no];
      build(ac, true, kAcLook, t.t, t.look);
      cache.ac_key[c->ac_tbl_no] = ac;
      cache.ac_valid[c->ac_tbl_no] = true;
    }
    d->dc[b] = &cache.dc[c->dc_tbl_no];
    d->ac[b] = &cache.ac[c->ac_tbl_no];
    d->comp[b] = ci;
    // As libjpeg: at 1/8 scale only the DC term is used.
    d->ac_needed[b] = c->DCT_scaled_size > 1;
  }
  cinfo->entropy = &d->pub;
  return true;
}

}  // namespace brigade::media::detail
