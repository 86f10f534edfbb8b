#pragma once
// brigade::Tensor: a typed, shaped view of memory plus the owner that frees it.
//
// Layout: `shape()` lists the extent of each dimension, `strides()` the distance
// in BYTES between consecutive elements of each dimension (as NumPy does). A
// tensor made by this library is always C-contiguous (row-major, last dimension
// fastest), with strides derived from its shape.
//
// Ownership: the tensor holds a std::shared_ptr<void> owner; the memory lives as
// long as any tensor (or view made by `slice`) holding that owner. The owner may
// be anything: heap memory from an Allocator, a pooled or pinned buffer, a mapped
// file. Copying a Tensor copies the view, never the data.
//
// Thread safety: a Tensor is a value; distinct Tensor objects may be used from
// different threads. Concurrent writes to the same data are the caller's business.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

namespace brigade::media {

// The supported element types, deliberately few. `boolean` is one byte (0 or 1).
enum class DType : std::uint8_t {
  boolean,
  uint8,
  int8,
  uint16,
  int16,
  int32,
  int64,
  float16,
  float32,
  float64,
};

std::size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);  // "uint8", "float32", ...

/// Memory layout of image batches: [..., H, W, C] (channels last) or [..., C, H, W]. The
/// one layout type of every seam: the decode spec, the job, the device's normalize.
enum class Layout : std::uint8_t { nhwc, nchw };
std::string_view layout_name(Layout layout);  // "nhwc" or "nchw"

// Returns memory for `nbytes` bytes (nbytes may be 0), aligned to at least
// kTensorAlignment bytes. The returned pointer's deleter frees it; get() is the
// data pointer. Must be callable from any thread the decode functions run on,
// and must throw (e.g. std::bad_alloc) rather than return null for nbytes > 0.
using Allocator = std::function<std::shared_ptr<void>(std::size_t nbytes)>;
inline constexpr std::size_t kTensorAlignment = 64;

// The default allocator: heap memory aligned to kTensorAlignment.
std::shared_ptr<void> default_allocate(std::size_t nbytes);

class Tensor {
 public:
  Tensor() = default;
  // Wraps existing memory. `strides` in bytes; empty means C-contiguous.
  Tensor(DType dtype, std::vector<std::int64_t> shape, std::shared_ptr<void> owner, void* data,
         std::vector<std::int64_t> strides = {});

  // A new C-contiguous tensor; memory from `allocator` (default_allocate if empty).
  // Contents are uninitialised.
  static Tensor empty(DType dtype, std::vector<std::int64_t> shape,
                      const Allocator& allocator = {});

  DType dtype() const { return dtype_; }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  const std::vector<std::int64_t>& strides() const { return strides_; }  // bytes
  std::size_t ndim() const { return shape_.size(); }
  std::int64_t dim(std::size_t i) const { return shape_.at(i); }
  std::int64_t numel() const;
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }
  bool is_contiguous() const;
  bool defined() const { return data_ != nullptr || numel() == 0; }

  void* data() const { return data_; }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }
  // The whole buffer as bytes; the tensor must be contiguous.
  std::span<std::uint8_t> bytes() const;
  const std::shared_ptr<void>& owner() const { return owner_; }

  // The i-th sub-tensor along dimension 0 (a view sharing the owner).
  Tensor operator[](std::int64_t i) const;

 private:
  DType dtype_ = DType::uint8;
  std::vector<std::int64_t> shape_;
  std::vector<std::int64_t> strides_;
  void* data_ = nullptr;
  std::shared_ptr<void> owner_;
};

// C-contiguous byte strides for `shape`.
std::vector<std::int64_t> contiguous_strides(DType dtype, const std::vector<std::int64_t>& shape);

}  // namespace brigade::media

namespace brigade {
using media::DType;
using media::Tensor;
}  // namespace brigade
