#include "python/tensor_export.h"

#include <memory>
#include <stdexcept>
#include <vector>

#include "python/detail/dlpack.h"

namespace brigade::python {
namespace {

namespace dl = detail;

// What a DLManagedTensor owns: the view that keeps the buffer alive, and the shape and
// strides its DLTensor points into.
struct Managed {
  dl::DLManagedTensor managed{};
  media::Tensor tensor;
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

}  // namespace

pybind11::capsule ExportedTensor::dlpack(const pybind11::object& stream) const {
  if (!stream.is_none())
    throw pybind11::value_error("__dlpack__: a host tensor takes no stream (stream=None)");
  auto m = std::make_unique<Managed>();
  m->tensor = tensor_;
  m->shape = tensor_.shape();
  const auto item = static_cast<std::int64_t>(media::dtype_size(tensor_.dtype()));
  for (auto s : tensor_.strides()) m->strides.push_back(s / item);
  auto& t = m->managed.dl_tensor;
  t.data = tensor_.data();
  t.device = {dl::kDLCPU, 0};
  t.ndim = static_cast<std::int32_t>(m->shape.size());
  t.dtype = dl_dtype(tensor_.dtype());
  t.shape = m->shape.data();
  t.strides = m->strides.data();
  t.byte_offset = 0;
  m->managed.manager_ctx = m.get();
  m->managed.deleter = delete_managed;
  auto* managed = &m->managed;
  PyObject* capsule = PyCapsule_New(managed, dl::kDltensorCapsule, delete_unconsumed);
  if (!capsule) throw pybind11::error_already_set();
  static_cast<void>(m.release());  // owned by the capsule now, then by its consumer
  return pybind11::reinterpret_steal<pybind11::capsule>(capsule);
}

std::tuple<int, int> ExportedTensor::dlpack_device() const { return {dl::kDLCPU, 0}; }

}  // namespace brigade::python
