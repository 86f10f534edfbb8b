#include "python/tensor_export.h"

#include <fmt/format.h>

#include <memory>
#include <stdexcept>
#include <vector>

#include "python/detail/dlpack.h"

namespace brigade::python {
namespace {

namespace dl = detail;
namespace py = pybind11;

// What a DLManagedTensor owns: the view that keeps the memory alive, and the shape and
// strides its DLTensor points into.
struct Managed {
  dl::DLManagedTensor managed{};
  media::Tensor tensor;
  transport::DeviceBatch batch;
  std::shared_ptr<void> held;
  std::vector<std::int64_t> shape, strides;
};

void delete_managed(dl::DLManagedTensor* self) {
  std::unique_ptr<Managed> owned(static_cast<Managed*>(self->manager_ctx));
}

// A capsule destructor: frees the tensor unless a consumer took it (and renamed it).
void delete_unconsumed(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, dl::kDltensorCapsule)) return;
  auto* managed =
      static_cast<dl::DLManagedTensor*>(PyCapsule_GetPointer(capsule, dl::kDltensorCapsule));
  if (managed && managed->deleter) managed->deleter(managed);
}

dl::DLDataType dl_dtype(media::DType dtype) {
  const auto bits = static_cast<std::uint8_t>(8 * media::dtype_size(dtype));
  switch (dtype) {
    case media::DType::boolean:
      return {dl::kDLBool, 8, 1};
    case media::DType::uint8:
    case media::DType::uint16:
      return {dl::kDLUInt, bits, 1};
    case media::DType::int8:
    case media::DType::int16:
    case media::DType::int32:
    case media::DType::int64:
      return {dl::kDLInt, bits, 1};
    case media::DType::float16:
    case media::DType::float32:
    case media::DType::float64:
      return {dl::kDLFloat, bits, 1};
  }
  throw std::logic_error("dl_dtype: unknown dtype");
}

bool on_cuda(const transport::DeviceBatch& b) {
  return b.device().kind == transport::DeviceKind::cuda;
}

// Makes the batch's memory ready for the consumer's `stream` (STREAMS).
void synchronize(const transport::DeviceBatch& batch, const py::object& stream) {
  if (!stream.is_none() && py::isinstance<py::int_>(stream) && stream.cast<std::int64_t>() == 2) {
    throw py::value_error(
        "__dlpack__: stream 2 (cudaStreamPerThread) is refused: the batch's memory is reused "
        "after the stream named here has run what was queued when the batch is dropped, and 2 "
        "then names the dropping thread's per-thread stream, not yours; pass your stream's "
        "handle (torch.cuda.current_stream().cuda_stream), 1 (the legacy default stream) or "
        "-1 (wait on the host)");
  }
  if (!on_cuda(batch)) {
    if (!stream.is_none())
      throw py::value_error("__dlpack__: a CPU-device batch takes no stream (stream=None)");
    py::gil_scoped_release release;
    batch.wait();
    return;
  }
  const std::int64_t s = stream.is_none() ? 1 : stream.cast<std::int64_t>();
  if (s == 0 || s < -1) {
    throw py::value_error(fmt::format(
        "__dlpack__: stream {} is not a CUDA stream (None or 1: the legacy default stream, "
        "-1: no ordering, else a cudaStream_t)",
        s));
  }
  if (s == -1) {
    py::gil_scoped_release release;
    batch.wait();
    return;
  }
  batch.use_on(s == 1 ? nullptr : reinterpret_cast<transport::ExternalStream>(s));
}

}  // namespace

py::capsule ExportedTensor::dlpack(const py::object& stream) const {
  auto m = std::make_unique<Managed>();
  auto& t = m->managed.dl_tensor;
  if (on_device()) {
    synchronize(batch_, stream);
    m->batch = batch_;
    m->held = held_;
    t.data = batch_.data();
    t.device = on_cuda(batch_) ? dl::DLDevice{dl::kDLCUDA, batch_.device().index}
                               : dl::DLDevice{dl::kDLCPU, 0};
    m->shape = batch_.shape();
    m->strides.assign(m->shape.size(), 1);  // C-contiguous, in elements
    for (std::size_t i = m->shape.size(); i-- > 1;) m->strides[i - 1] = m->strides[i] * m->shape[i];
  } else {
    if (!stream.is_none())
      throw py::value_error("__dlpack__: a host tensor takes no stream (stream=None)");
    m->tensor = tensor_;
    t.data = tensor_.data();
    t.device = {dl::kDLCPU, 0};
    m->shape = tensor_.shape();
    const auto item = static_cast<std::int64_t>(media::dtype_size(tensor_.dtype()));
    for (auto s : tensor_.strides()) m->strides.push_back(s / item);
  }
  t.ndim = static_cast<std::int32_t>(m->shape.size());
  t.dtype = dl_dtype(dtype());
  t.shape = m->shape.data();
  t.strides = m->strides.data();
  t.byte_offset = 0;
  m->managed.manager_ctx = m.get();
  m->managed.deleter = delete_managed;
  auto* managed = &m->managed;
  PyObject* capsule = PyCapsule_New(managed, dl::kDltensorCapsule, delete_unconsumed);
  if (!capsule) throw py::error_already_set();
  static_cast<void>(m.release());  // owned by the capsule now, then by its consumer
  return py::reinterpret_steal<py::capsule>(capsule);
}

std::tuple<int, int> ExportedTensor::dlpack_device() const {
  if (on_device() && on_cuda(batch_)) return {dl::kDLCUDA, batch_.device().index};
  return {dl::kDLCPU, 0};
}

std::uintptr_t ExportedTensor::data_ptr() const {
  return reinterpret_cast<std::uintptr_t>(on_device() ? batch_.data() : tensor_.data());
}

std::uintptr_t ExportedTensor::buffer_ptr() const {
  return reinterpret_cast<std::uintptr_t>(on_device() ? batch_.memory().get()
                                                      : tensor_.owner().get());
}

std::vector<std::int64_t> ExportedTensor::shape() const {
  return on_device() ? batch_.shape() : tensor_.shape();
}

media::DType ExportedTensor::dtype() const {
  return on_device() ? batch_.dtype() : tensor_.dtype();
}

std::string ExportedTensor::device() const {
  return on_device() && on_cuda(batch_) ? transport::to_string(batch_.device()) : "cpu";
}

}  // namespace brigade::python
