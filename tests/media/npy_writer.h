#pragma once
// Writers of .npy and .npz bytes for the tests (NumPy's layout: header padded
// to 64 bytes; ZIP64 extra fields in local headers, as np.savez writes them).

#include <zlib.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace brigade::media::testing {

using Bytes = std::vector<std::uint8_t>;

// Writes an .npy file the way NumPy does (header padded to 64 bytes).
inline Bytes make_npy(const std::string& descr, const std::string& shape, const void* data,
                      std::size_t n, bool fortran = false, int version = 1) {
  std::string header = "{'descr': '" + descr +
                       "', 'fortran_order': " + (fortran ? "True" : "False") +
                       ", 'shape': " + shape + ", }";
  const std::size_t prefix = version == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  Bytes out = {0x93, 'N', 'U', 'M', 'P', 'Y', std::uint8_t(version), 0};
  const std::size_t len = header.size();
  for (std::size_t i = 0; i < prefix - 8; ++i) out.push_back(std::uint8_t(len >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  const auto* p = static_cast<const std::uint8_t*>(data);
  out.insert(out.end(), p, p + n);
  return out;
}

inline void put(Bytes& b, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b.push_back(std::uint8_t(v >> (8 * i)));
}

// A zip archive like np.savez(_compressed) writes: ZIP64 extra in local headers.
inline Bytes make_zip(const std::vector<std::pair<std::string, Bytes>>& files, bool compress) {
  Bytes out, cd;
  for (const auto& [name, data] : files) {
    Bytes body = data;
    if (compress) {
      z_stream z{};
      deflateInit2(&z, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
      body.resize(deflateBound(&z, data.size()));
      z.next_in = const_cast<Bytef*>(data.data());
      z.avail_in = uInt(data.size());
      z.next_out = body.data();
      z.avail_out = uInt(body.size());
      ::deflate(&z, Z_FINISH);
      body.resize(z.total_out);
      deflateEnd(&z);
    }
    const std::uint32_t crc = std::uint32_t(crc32(0, data.data(), uInt(data.size())));
    const std::uint64_t offset = out.size();
    put(out, 0x04034b50, 4);
    put(out, 45, 2);
    put(out, 0, 2);
    put(out, compress ? 8 : 0, 2);
    put(out, 0, 4);
    put(out, crc, 4);
    put(out, 0xFFFFFFFF, 4);
    put(out, 0xFFFFFFFF, 4);
    put(out, name.size(), 2);
    put(out, 20, 2);
    out.insert(out.end(), name.begin(), name.end());
    put(out, 1, 2);
    put(out, 16, 2);
    put(out, data.size(), 8);
    put(out, body.size(), 8);
    out.insert(out.end(), body.begin(), body.end());
    put(cd, 0x02014b50, 4);
    put(cd, 45, 2);
    put(cd, 45, 2);
    put(cd, 0, 2);
    put(cd, compress ? 8 : 0, 2);
    put(cd, 0, 4);
    put(cd, crc, 4);
    put(cd, body.size(), 4);
    put(cd, data.size(), 4);
    put(cd, name.size(), 2);
    put(cd, 0, 2);
    put(cd, 0, 2);
    put(cd, 0, 2);
    put(cd, 0, 2);
    put(cd, 0, 4);
    put(cd, offset, 4);
    cd.insert(cd.end(), name.begin(), name.end());
  }
  const std::uint64_t cd_offset = out.size();
  out.insert(out.end(), cd.begin(), cd.end());
  put(out, 0x06054b50, 4);
  put(out, 0, 4);
  put(out, files.size(), 2);
  put(out, files.size(), 2);
  put(out, cd.size(), 4);
  put(out, cd_offset, 4);
  put(out, 0, 2);
  return out;
}

}  // namespace brigade::media::testing
