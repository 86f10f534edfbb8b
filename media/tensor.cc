#include "media/tensor.h"

#include <cstdlib>
#include <new>
#include <stdexcept>

namespace brigade::media {

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::boolean:
    case DType::uint8:
    case DType::int8:
      return 1;
    case DType::uint16:
    case DType::int16:
    case DType::float16:
      return 2;
    case DType::int32:
    case DType::float32:
      return 4;
    case DType::int64:
    case DType::float64:
      return 8;
  }
  return 1;
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::boolean:
      return "bool";
    case DType::uint8:
      return "uint8";
    case DType::int8:
      return "int8";
    case DType::uint16:
      return "uint16";
    case DType::int16:
      return "int16";
    case DType::int32:
      return "int32";
    case DType::int64:
      return "int64";
    case DType::float16:
      return "float16";
    case DType::float32:
      return "float32";
    case DType::float64:
      return "float64";
  }
  return "unknown";
}

std::shared_ptr<void> default_allocate(std::size_t nbytes) {
  // aligned_alloc needs a size that is a multiple of the alignment.
  std::size_t rounded = (nbytes + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
  void* p = std::aligned_alloc(kTensorAlignment, rounded == 0 ? kTensorAlignment : rounded);
  if (p == nullptr) throw std::bad_alloc();
  return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}

std::vector<std::int64_t> contiguous_strides(DType dtype, const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> strides(shape.size());
  std::int64_t step = static_cast<std::int64_t>(dtype_size(dtype));
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = step;
    step *= shape[i];
  }
  return strides;
}

Tensor::Tensor(DType dtype, std::vector<std::int64_t> shape, std::shared_ptr<void> owner,
               void* data, std::vector<std::int64_t> strides)
    : dtype_(dtype),
      shape_(std::move(shape)),
      strides_(std::move(strides)),
      data_(data),
      owner_(std::move(owner)) {
  for (auto d : shape_) {
    if (d < 0) throw std::invalid_argument("Tensor: negative dimension");
  }
  if (strides_.empty()) strides_ = contiguous_strides(dtype_, shape_);
  if (strides_.size() != shape_.size())
    throw std::invalid_argument("Tensor: strides/shape rank mismatch");
}

Tensor Tensor::empty(DType dtype, std::vector<std::int64_t> shape, const Allocator& allocator) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  std::size_t nbytes = static_cast<std::size_t>(n) * dtype_size(dtype);
  std::shared_ptr<void> owner = allocator ? allocator(nbytes) : default_allocate(nbytes);
  if (!owner && nbytes > 0) throw std::bad_alloc();
  void* data = owner.get();
  return Tensor(dtype, std::move(shape), std::move(owner), data);
}

std::int64_t Tensor::numel() const {
  std::int64_t n = 1;
  for (auto d : shape_) n *= d;
  return n;
}

bool Tensor::is_contiguous() const { return strides_ == contiguous_strides(dtype_, shape_); }

std::span<std::uint8_t> Tensor::bytes() const {
  if (!is_contiguous()) throw std::logic_error("Tensor::bytes: tensor is not contiguous");
  return {static_cast<std::uint8_t*>(data_), nbytes()};
}

Tensor Tensor::operator[](std::int64_t i) const {
  if (shape_.empty() || i < 0 || i >= shape_[0])
    throw std::out_of_range("Tensor: index out of range");
  std::vector<std::int64_t> shape(shape_.begin() + 1, shape_.end());
  std::vector<std::int64_t> strides(strides_.begin() + 1, strides_.end());
  return Tensor(dtype_, std::move(shape), owner_,
                static_cast<std::uint8_t*>(data_) + i * strides_[0], std::move(strides));
}

std::string_view layout_name(Layout layout) { return layout == Layout::nchw ? "nchw" : "nhwc"; }

}  // namespace brigade::media
