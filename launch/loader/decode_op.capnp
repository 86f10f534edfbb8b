@0xb618de320224cc73;

# The built-in decode operations (launch/loader/remote_ops.h): their task — the decode
# spec (launch/loader/decode.h DecodeSpec) and the batch's samples — and their result —
# the decoded batch and its failed samples. The loader's own schema: the remote layer
# carries these bytes without reading them. Stable within one version of the operations
# (kDecodeImages, kDecodeClips); peers of another build are refused in the hello.
# launch/loader/decode_task.h is the one codec (the trainer's write and read, the
# worker's read and write).

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("brigade::launch::wire");

enum MediaKind {
  image @0;
  video @1;
}

enum Layout {
  nhwc @0;
  nchw @1;
}

enum TransformKind {   # media/transform.h
  none @0;
  eval @1;
  train @2;
}

enum Interpolation {   # media/transform.h: torchvision's InterpolationMode
  bilinear @0;
  bicubic @1;
}

# media::TransformOptions.
struct Transform {
  kind @0 :TransformKind;
  size @1 :UInt32;            # output height = width
  resize @2 :UInt32;          # eval: the shorter side before the crop
  scaleMin @3 :Float64;       # train: area fraction range
  scaleMax @4 :Float64;
  ratioMin @5 :Float64;       # train: aspect ratio range
  ratioMax @6 :Float64;
  flipProbability @7 :Float64;
  exifOrientation @8 :Bool;
  roiDecode @9 :Bool;
  interpolation @10 :Interpolation;
  seed @11 :UInt64;
  epoch @12 :UInt64;
}

struct DecodeSpec {
  kind @0 :MediaKind;
  layout @1 :Layout;
  transform @2 :Transform;
  clipFrames @3 :UInt32;
  clipStride @4 :UInt32;
}

struct TaskSample {
  id @0 :UInt64;
  path @1 :Text;
  offset @2 :UInt64;                      # a byte range of `path` (a tar shard's member)
  size @3 :UInt64 = 0xffffffffffffffff;   # launch/loader/dataset.h kWholeFile: the whole file
}

struct DecodeTask {
  spec @0 :DecodeSpec;
  samples @1 :List(TaskSample);
}

# The std::error_category of a failed sample's code (launch/loader/decode.h
# restore_error_code): the categories this build knows; a code of any other crosses as
# none (no code).
enum ErrorCategory {
  none @0;
  media @1;       # media::media_category()
  remote @2;      # transport::remote_category()
  device @3;      # transport::device_category()
  generic @4;     # std::generic_category()
  system @5;      # std::system_category()
}

# A failed sample: the engine's record (actors::SampleFailure) as the worker made it;
# the trainer's engine sets its stage and positions.
struct SampleFailure {
  index @0 :UInt32;            # in the task's samples
  id @1 :UInt64;
  path @2 :Text;               # the file the worker read
  category @3 :ErrorCategory;  # the code: its category and value
  code @4 :Int32;
  cause @5 :Text;              # for humans, without the sample's name
}

struct DecodeResult {
  ids @0 :List(UInt64);        # ids[i] is the sample in data's row i
  shape @1 :List(Int64);       # [ids.size(), ...sample shape]
  data @2 :Data;               # uint8, C order
  failures @3 :List(SampleFailure);
}
