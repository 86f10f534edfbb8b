#include "media/array.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>

#include "media/errors.h"

namespace brigade::media {
namespace {

[[noreturn]] void bad(const std::string& name, const std::string& why) {
  throw MediaError(ErrorCode::bad_data, name, why);
}
[[noreturn]] void unsupported(const std::string& name, const std::string& why) {
  throw MediaError(ErrorCode::unsupported, name, why);
}

std::uint64_t le(const std::uint8_t* p, int n) {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

struct NpyHeader {
  DType dtype = DType::uint8;
  bool swap = false;
  std::vector<std::int64_t> shape;
  std::size_t data_offset = 0;
  std::size_t nbytes = 0;
};

// The value after 'key': in the header dict (a Python literal).
std::string_view dict_value(std::string_view header, std::string_view key,
                            const std::string& name) {
  // Appended rather than "'" + std::string(key) + "'": GCC 12 at -O3 reports a
  // false -Wrestrict overlap in operator+(const char*, std::string&&) (GCC bug 105329).
  std::string quoted(1, '\'');
  quoted.append(key).push_back('\'');
  std::size_t at = header.find(quoted);
  if (at == std::string_view::npos) bad(name, "npy header has no " + quoted);
  at = header.find(':', at + quoted.size());
  if (at == std::string_view::npos) bad(name, "npy header is malformed");
  std::string_view rest = header.substr(at + 1);
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  return rest;
}

DType parse_descr(std::string_view v, bool& swap, const std::string& name) {
  if (v.empty() || (v.front() != '\'' && v.front() != '"')) {
    unsupported(name, "structured dtypes are not supported");
  }
  const char quote = v.front();
  const std::size_t end = v.find(quote, 1);
  if (end == std::string_view::npos || end < 3) bad(name, "npy header has a malformed descr");
  const std::string_view d = v.substr(1, end - 1);
  const char order = d[0], kind = d[1];
  const std::string_view size = d.substr(2);
  if (kind == 'O') unsupported(name, "object arrays are not supported");
  swap = order == '>' && size != "1";
  if (order != '<' && order != '>' && order != '|' && order != '=')
    bad(name, "bad byte order in descr");
  struct Known {
    char kind;
    std::string_view size;
    DType dtype;
  };
  static constexpr Known kKnown[] = {{'b', "1", DType::boolean}, {'u', "1", DType::uint8},
                                     {'i', "1", DType::int8},    {'u', "2", DType::uint16},
                                     {'i', "2", DType::int16},   {'i', "4", DType::int32},
                                     {'i', "8", DType::int64},   {'f', "2", DType::float16},
                                     {'f', "4", DType::float32}, {'f', "8", DType::float64}};
  for (const Known& k : kKnown) {
    if (k.kind == kind && k.size == size) return k.dtype;
  }
  std::string why("dtype '");
  why.append(d).append("' is not supported");
  unsupported(name, why);
}

std::vector<std::int64_t> parse_shape(std::string_view v, const std::string& name) {
  if (v.empty() || v.front() != '(') bad(name, "npy header has a malformed shape");
  const std::size_t end = v.find(')');
  if (end == std::string_view::npos) bad(name, "npy header has a malformed shape");
  std::vector<std::int64_t> shape;
  std::string_view body = v.substr(1, end - 1);
  while (!body.empty()) {
    while (!body.empty() && (body.front() == ' ' || body.front() == ',')) body.remove_prefix(1);
    if (body.empty()) break;
    std::int64_t n = 0;
    std::size_t i = 0;
    for (; i < body.size() && body[i] >= '0' && body[i] <= '9'; ++i) {
      if (n > (std::numeric_limits<std::int64_t>::max() - 9) / 10) bad(name, "npy shape overflows");
      n = n * 10 + (body[i] - '0');
    }
    if (i == 0) bad(name, "npy header has a malformed shape");
    shape.push_back(n);
    body.remove_prefix(i);
  }
  return shape;
}

NpyHeader parse_header(std::span<const std::uint8_t> b, const std::string& name) {
  if (b.size() < 10 || std::memcmp(b.data(), "\x93NUMPY", 6) != 0)
    bad(name, "not an npy file (bad magic)");
  const int major = b[6];
  std::size_t header_len = 0, header_start = 0;
  if (major == 1) {
    header_len = le(&b[8], 2);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (b.size() < 12) bad(name, "truncated npy header");
    header_len = le(&b[8], 4);
    header_start = 12;
  } else {
    unsupported(name, "npy format version " + std::to_string(major) + " is not supported");
  }
  if (header_len > b.size() - header_start) bad(name, "truncated npy header");
  const std::string_view header(reinterpret_cast<const char*>(b.data() + header_start), header_len);
  NpyHeader h;
  h.dtype = parse_descr(dict_value(header, "descr", name), h.swap, name);
  const std::string_view fortran = dict_value(header, "fortran_order", name);
  if (fortran.substr(0, 4) == "True") unsupported(name, "Fortran-order arrays are not supported");
  if (fortran.substr(0, 5) != "False") bad(name, "npy header has a malformed fortran_order");
  h.shape = parse_shape(dict_value(header, "shape", name), name);
  std::uint64_t count = 1;
  for (auto d : h.shape) {
    if (d != 0 && count > std::numeric_limits<std::uint64_t>::max() / 16 / std::uint64_t(d))
      bad(name, "npy shape overflows");
    count *= std::uint64_t(d);
  }
  h.data_offset = header_start + header_len;
  h.nbytes = count * dtype_size(h.dtype);
  if (h.nbytes > b.size() - h.data_offset) bad(name, "truncated npy data");
  return h;
}

void byteswap(std::uint8_t* p, std::size_t nbytes, std::size_t item) {
  for (std::size_t i = 0; i + item <= nbytes; i += item) std::reverse(p + i, p + i + item);
}

// A tensor over b[h.data_offset...]: aliasing `owner` when possible, else a copy.
Tensor make_tensor(std::span<const std::uint8_t> b, const NpyHeader& h, std::shared_ptr<void> owner,
                   const Allocator& allocator) {
  const std::uint8_t* src = b.data() + h.data_offset;
  const bool aligned = reinterpret_cast<std::uintptr_t>(src) % dtype_size(h.dtype) == 0;
  if (owner && aligned && !h.swap) {
    return Tensor(h.dtype, h.shape, std::move(owner), const_cast<std::uint8_t*>(src));
  }
  Tensor t = Tensor::empty(h.dtype, h.shape, allocator);
  if (h.nbytes > 0) std::memcpy(t.data(), src, h.nbytes);
  if (h.swap) byteswap(t.data_as<std::uint8_t>(), h.nbytes, dtype_size(h.dtype));
  return t;
}

struct ZipMember {
  std::string name;
  int method = 0;
  std::uint32_t crc = 0;
  std::uint64_t csize = 0, usize = 0, offset = 0;
  bool encrypted = false;
};

std::vector<ZipMember> read_central_directory(std::span<const std::uint8_t> b,
                                              const std::string& name) {
  if (b.size() < 22) bad(name, "not a zip archive (too short)");
  std::size_t eocd = std::string::npos;
  const std::size_t lowest = b.size() > 22 + 65535 ? b.size() - 22 - 65535 : 0;
  for (std::size_t i = b.size() - 22 + 1; i-- > lowest;) {
    if (le(&b[i], 4) == 0x06054b50) {
      eocd = i;
      break;
    }
  }
  if (eocd == std::string::npos) bad(name, "not a zip archive (no end of central directory)");
  std::uint64_t entries = le(&b[eocd + 10], 2), cd_size = le(&b[eocd + 12], 4),
                cd_offset = le(&b[eocd + 16], 4);
  if ((entries == 0xFFFF || cd_size == 0xFFFFFFFF || cd_offset == 0xFFFFFFFF) && eocd >= 20 &&
      le(&b[eocd - 20], 4) == 0x07064b50) {
    const std::uint64_t z = le(&b[eocd - 20 + 8], 8);
    if (z > b.size() - 56 || le(&b[z], 4) != 0x06064b50)
      bad(name, "corrupt zip64 end of central directory");
    entries = le(&b[z + 32], 8);
    cd_size = le(&b[z + 40], 8);
    cd_offset = le(&b[z + 48], 8);
  }
  if (cd_offset > b.size() || cd_size > b.size() - cd_offset)
    bad(name, "corrupt zip central directory");
  std::vector<ZipMember> members;
  std::size_t p = cd_offset;
  for (std::uint64_t e = 0; e < entries; ++e) {
    if (p + 46 > b.size() || le(&b[p], 4) != 0x02014b50)
      bad(name, "corrupt zip central directory entry");
    ZipMember m;
    m.encrypted = le(&b[p + 8], 2) & 1;
    m.method = int(le(&b[p + 10], 2));
    m.crc = std::uint32_t(le(&b[p + 16], 4));
    m.csize = le(&b[p + 20], 4);
    m.usize = le(&b[p + 24], 4);
    const std::size_t n = le(&b[p + 28], 2), x = le(&b[p + 30], 2), c = le(&b[p + 32], 2);
    m.offset = le(&b[p + 42], 4);
    if (p + 46 + n + x + c > b.size()) bad(name, "corrupt zip central directory entry");
    m.name.assign(reinterpret_cast<const char*>(&b[p + 46]), n);
    // ZIP64 extra field: the 64-bit values of the fields that are 0xFFFFFFFF, in order.
    for (std::size_t q = p + 46 + n; q + 4 <= p + 46 + n + x;) {
      const std::size_t id = le(&b[q], 2), len = le(&b[q + 2], 2);
      if (q + 4 + len > p + 46 + n + x) break;
      if (id == 1) {
        std::size_t r = q + 4;
        auto take = [&](std::uint64_t& field) {
          if (field == 0xFFFFFFFF && r + 8 <= q + 4 + len) {
            field = le(&b[r], 8);
            r += 8;
          }
        };
        take(m.usize);
        take(m.csize);
        take(m.offset);
      }
      q += 4 + len;
    }
    members.push_back(std::move(m));
    p += 46 + n + x + c;
  }
  return members;
}

std::vector<std::uint8_t> inflate_member(std::span<const std::uint8_t> data, std::uint64_t usize,
                                         const std::string& name) {
  // Deflate cannot expand more than ~1032:1: a larger claim is corrupt (and
  // must not make us allocate it).
  if (usize > std::uint64_t(data.size()) * 1032 + 1024) bad(name, "implausible uncompressed size");
  std::vector<std::uint8_t> out(usize);
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) throw std::bad_alloc();
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end{&z};
  z.next_in = const_cast<Bytef*>(data.data());
  z.avail_in =
      static_cast<uInt>(std::min<std::size_t>(data.size(), std::numeric_limits<uInt>::max()));
  z.next_out = out.data();
  z.avail_out =
      static_cast<uInt>(std::min<std::size_t>(out.size(), std::numeric_limits<uInt>::max()));
  const int ret = inflate(&z, Z_FINISH);
  if (ret != Z_STREAM_END || z.total_out != usize) {
    bad(name, std::string("inflate failed: ") + (z.msg                ? z.msg
                                                 : ret == Z_BUF_ERROR ? "truncated data"
                                                                      : "corrupt data"));
  }
  return out;
}

std::map<std::string, Tensor> parse_npz(std::span<const std::uint8_t> b,
                                        std::shared_ptr<void> owner, const std::string& name,
                                        const Allocator& allocator) {
  std::map<std::string, Tensor> out;
  for (const ZipMember& m : read_central_directory(b, name)) {
    const std::string member = name + ":" + m.name;
    if (m.encrypted) unsupported(member, "encrypted zip members are not supported");
    if (b.size() < 30 || m.offset > b.size() - 30 || le(&b[m.offset], 4) != 0x04034b50) {
      bad(member, "corrupt zip local header");
    }
    const std::size_t start = m.offset + 30 + le(&b[m.offset + 26], 2) + le(&b[m.offset + 28], 2);
    if (start > b.size() || m.csize > b.size() - start) bad(member, "truncated zip member");
    const std::span<const std::uint8_t> data = b.subspan(start, m.csize);
    std::string key = m.name;
    if (key.size() > 4 && key.ends_with(".npy")) key.resize(key.size() - 4);
    if (m.method == 0) {
      if (m.usize != m.csize) bad(member, "stored member sizes differ");
      if (crc32(0, data.data(), static_cast<uInt>(data.size())) != m.crc)
        bad(member, "CRC-32 mismatch");
      out[key] = make_tensor(data, parse_header(data, member), owner, allocator);
    } else if (m.method == 8) {
      auto inflated =
          std::make_shared<std::vector<std::uint8_t>>(inflate_member(data, m.usize, member));
      if (crc32(0, inflated->data(), static_cast<uInt>(inflated->size())) != m.crc)
        bad(member, "CRC-32 mismatch");
      const std::span<const std::uint8_t> ib(*inflated);
      out[key] = make_tensor(ib, parse_header(ib, member), inflated, allocator);
    } else {
      unsupported(member,
                  "zip compression method " + std::to_string(m.method) + " is not supported");
    }
  }
  return out;
}

}  // namespace

Tensor load_npy(std::span<const std::uint8_t> bytes, const std::string& name,
                const Allocator& allocator) {
  return make_tensor(bytes, parse_header(bytes, name), nullptr, allocator);
}

Tensor load_npy(std::shared_ptr<std::vector<std::uint8_t>> bytes, const std::string& name) {
  const std::span<const std::uint8_t> b(*bytes);
  return make_tensor(b, parse_header(b, name), std::move(bytes), {});
}

std::map<std::string, Tensor> load_npz(std::span<const std::uint8_t> bytes, const std::string& name,
                                       const Allocator& allocator) {
  return parse_npz(bytes, nullptr, name, allocator);
}

std::map<std::string, Tensor> load_npz(std::shared_ptr<std::vector<std::uint8_t>> bytes,
                                       const std::string& name) {
  const std::span<const std::uint8_t> b(*bytes);
  return parse_npz(b, std::move(bytes), name, {});
}

}  // namespace brigade::media
