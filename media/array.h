#pragma once
// NumPy .npy and .npz loading.
//
// Supported: format versions 1.0, 2.0 and 3.0; C-order arrays of the dtypes of
// tensor.h (bool, u1, i1, u2, i2, i4, i8, f2, f4, f8), little- or big-endian
// (big-endian data is byte-swapped into a copy). Rejected with a clear error:
// Fortran order, object arrays, structured dtypes, strings, complex and the
// unsigned 32/64-bit types (unsupported). .npz members may be stored or
// deflated (zlib); ZIP64 archives are read. CRC-32 is verified.
//
// Copies: load_npy over a shared buffer returns a tensor that points into that
// buffer (its owner keeps the buffer alive) when the data is suitably aligned;
// a stored .npz member likewise; a deflated member is inflated once into its
// own buffer. The span overloads copy the array data once.
//
// Errors: MediaError naming the input (and the member, for .npz): bad_data for
// truncated or corrupt input, unsupported for the formats above.
// Thread safety: all functions may be called concurrently.

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "media/tensor.h"

namespace brigade::media {

// The span overloads copy into memory from `allocator` (default: aligned heap).
Tensor load_npy(std::span<const std::uint8_t> bytes, const std::string& name = "<npy>",
                const Allocator& allocator = {});
Tensor load_npy(std::shared_ptr<std::vector<std::uint8_t>> bytes,
                const std::string& name = "<npy>");

// Members by name, without the ".npy" suffix ("arr_0", "x", ...).
std::map<std::string, Tensor> load_npz(std::span<const std::uint8_t> bytes,
                                       const std::string& name = "<npz>",
                                       const Allocator& allocator = {});
std::map<std::string, Tensor> load_npz(std::shared_ptr<std::vector<std::uint8_t>> bytes,
                                       const std::string& name = "<npz>");

}  // namespace brigade::media
