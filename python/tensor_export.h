#pragma once

// ExportedTensor: a media::Tensor handed to Python through the DLPack protocol
// (`__dlpack__`, `__dlpack_device__`; see python/detail/dlpack.h), without a copy.
//
// OWNERSHIP. The ExportedTensor holds a view of the tensor (its owner: the pooled
// batch buffer). dlpack() makes a "dltensor" capsule whose DLManagedTensor holds
// another view; the consumer (torch.from_dlpack, numpy.from_dlpack) renames the
// capsule and calls the deleter when its array dies; a capsule nobody consumed
// deletes it when collected. The deleter touches no Python object, so a consumer may
// call it from any thread, with or without the GIL. When the last view is gone the
// buffer returns to the job's pool (launch/detail/batch.h).
//
// Host memory only (kDLCPU); every dtype of media::DType, with DLPack's strides in
// elements.

#include <pybind11/pybind11.h>

#include <cstdint>
#include <tuple>

#include "media/tensor.h"

namespace brigade::python {

class ExportedTensor {
 public:
  explicit ExportedTensor(media::Tensor tensor) : tensor_(std::move(tensor)) {}

  /// A new "dltensor" capsule over the tensor's memory. `stream` must be None (host
  /// memory needs no synchronization).
  pybind11::capsule dlpack(const pybind11::object& stream) const;
  /// (kDLCPU, 0).
  std::tuple<int, int> dlpack_device() const;

  /// The address of the first element: the C++ buffer's (what the zero-copy test checks).
  std::uintptr_t data_ptr() const { return reinterpret_cast<std::uintptr_t>(tensor_.data()); }
  /// The address of the start of the buffer the tensor belongs to (its owner).
  std::uintptr_t buffer_ptr() const {
    return reinterpret_cast<std::uintptr_t>(tensor_.owner().get());
  }
  const media::Tensor& tensor() const { return tensor_; }

 private:
  media::Tensor tensor_;
};

}  // namespace brigade::python
