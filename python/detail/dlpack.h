#pragma once

// The DLPack C ABI (https://github.com/dmlc/dlpack, include/dlpack/dlpack.h), version
// 0.8 (DLPACK_VERSION 80, ABI 1): the "dltensor" capsule that `__dlpack__` returns and
// torch.from_dlpack / numpy.from_dlpack consume. Debian 12 ships no dlpack header, so
// the structs are declared here, field for field and in the same order as upstream;
// they are a stable ABI (unchanged since 0.6 for everything used here). Only what the
// exporter needs is declared: no versioned (DLManagedTensorVersioned, DLPack 1.0)
// variant, which consumers of Debian's torch 1.13 and numpy 1.24 do not understand.

#include <cstdint>

namespace brigade::python::detail {

enum DLDeviceType : std::int32_t { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3 };

struct DLDevice {
  DLDeviceType device_type;
  std::int32_t device_id;
};

enum DLDataTypeCode : std::uint8_t { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBool = 6 };

struct DLDataType {
  std::uint8_t code;  // a DLDataTypeCode
  std::uint8_t bits;
  std::uint16_t lanes;
};

struct DLTensor {
  void* data;
  DLDevice device;
  std::int32_t ndim;
  DLDataType dtype;
  std::int64_t* shape;
  std::int64_t* strides;  // in elements (not bytes); null: C-contiguous
  std::uint64_t byte_offset;
};

struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

/// The capsule names of the protocol: a fresh export, and one a consumer has taken.
inline constexpr const char* kDltensorCapsule = "dltensor";
inline constexpr const char* kUsedDltensorCapsule = "used_dltensor";

}  // namespace brigade::python::detail
