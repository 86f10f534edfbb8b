#pragma once

// ExportedTensor: a batch tensor handed to Python through the DLPack protocol
// (`__dlpack__`, `__dlpack_device__`; see python/detail/dlpack.h), without a copy: a
// host tensor (media::Tensor, kDLCPU), or a batch a Loader with `device` copied to
// its device (transport::DeviceBatch: kDLCUDA on a GPU, kDLCPU on the CPU device).
//
// OWNERSHIP. The ExportedTensor holds a view of the memory (the pooled batch buffer,
// or the DeviceBatch). dlpack() makes a "dltensor" capsule whose DLManagedTensor holds
// another view; the consumer (torch.from_dlpack, numpy.from_dlpack) renames the
// capsule and calls the deleter when its array dies; a capsule nobody consumed
// deletes it when collected. The deleter touches no Python object, so a consumer may
// call it from any thread, with or without the GIL. When the last view is gone the
// buffer returns to its pool (launch/loader/detail/batch.h, transport/device/device_copy.h). Every
// view of a device batch also holds `held`, the token by which the Loader counts the
// device batches Python keeps (python/loader.h, DEVICE).
//
// STREAMS (device batches, DLPack's rules). On CUDA, `__dlpack__(stream)` orders the
// consumer's stream after the batch's copy, device-side (DeviceBatch::use_on: no host
// wait), and makes that stream the one the memory's reuse waits for: None or 1 is the
// legacy default stream, any other positive integer a cudaStream_t; -1 (the consumer
// synchronizes itself) waits on the host for the copy instead; 0 is refused (ambiguous,
// as DLPack says), and so is 2, the per-thread default stream, on every device (the
// reuse event would be recorded on the dropping thread's per-thread stream, not the
// consumer's: transport/device/device_copy.h, CONSUMER CONTRACT). On the CPU device
// the stream must be None, and the export waits on the host for the copy (the GIL
// released). Host tensors take None only.
//
// Every dtype of media::DType, with DLPack's strides in elements.

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "media/tensor.h"
#include "transport/device/device_copy.h"

namespace brigade::python {

class ExportedTensor {
 public:
  explicit ExportedTensor(media::Tensor tensor) : tensor_(std::move(tensor)) {}
  ExportedTensor(transport::DeviceBatch batch, std::shared_ptr<void> held)
      : batch_(std::move(batch)), held_(std::move(held)) {}

  /// A new "dltensor" capsule over the memory (see STREAMS for `stream`).
  pybind11::capsule dlpack(const pybind11::object& stream) const;
  /// (kDLCPU, 0) or (kDLCUDA, the GPU's index).
  std::tuple<int, int> dlpack_device() const;

  /// The address of the first element: the C++ buffer's (what the zero-copy test checks).
  std::uintptr_t data_ptr() const;
  /// The address of the start of the buffer the tensor belongs to (its owner).
  std::uintptr_t buffer_ptr() const;
  std::vector<std::int64_t> shape() const;
  media::DType dtype() const;
  /// Where the memory is: "cpu" (host memory, also the CPU device's) or "cuda:N".
  std::string device() const;

 private:
  bool on_device() const { return batch_.defined(); }
  media::Tensor tensor_;          // a host tensor, or
  transport::DeviceBatch batch_;  // a device batch (defined)
  std::shared_ptr<void> held_;    // with batch_: the Loader's count of held batches
};

}  // namespace brigade::python
