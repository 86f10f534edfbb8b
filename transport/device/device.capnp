# Messages of the device transport (transport/device/device_group.h).
#
# STABILITY. Both messages travel between processes of one job (the group id through
# the cluster's directory or a shared file, the batch header between GPUs); they are
# not stored. Fields may be added at the end with new ordinals; existing ordinals,
# types and enum values never change.

@0xbedae58962e0bc2a;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("brigade::transport::schema::device");

enum DeviceKind {
  cpu @0;
  cuda @1;
}

# What every rank needs to join a device group.
struct DeviceGroupId {
  magic @0 :UInt64;        # 0x4449474447495242 ("BRIGDGID" little-endian)
  kind @1 :DeviceKind;
  size @2 :UInt32;         # ranks in the group
  ncclVersion @3 :UInt32;  # ncclGetVersion() of the creator; 0 for CPU groups
  uniqueId @4 :Data;       # ncclUniqueId (128 bytes), or the CPU group's key
}

# The element types of media/tensor.h, in its order.
enum DType {
  boolean @0;
  uint8 @1;
  int8 @2;
  uint16 @3;
  int16 @4;
  int32 @5;
  int64 @6;
  float16 @7;
  float32 @8;
  float64 @9;
}

enum Layout {
  nhwc @0;
  nchw @1;
}

# Sent before each batch's payload. On the wire it fills a fixed 512-byte slot: the
# message's size in bytes (UInt64, little-endian), then the message (standard
# framing, unpacked), then zeros.
struct DeviceBatchHeader {
  dtype @0 :DType;
  layout @1 :Layout;
  shape @2 :List(Int64);  # C-contiguous
  nbytes @3 :UInt64;      # payload bytes = product of shape × dtype size
}
