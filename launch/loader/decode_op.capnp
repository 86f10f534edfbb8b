@0xb618de320224cc73;

# The built-in decode operations' task (launch/remote_ops.h): the decode spec
# (launch/decode.h DecodeSpec) and the batch's samples. The loader's own schema: the
# remote layer carries these bytes without reading them. Stable within one version of
# the operations (kDecodeImages, kDecodeClips); peers of another build are refused in
# the hello. launch/loader/decode_task.h is the one codec.

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
}

struct DecodeTask {
  spec @0 :DecodeSpec;
  samples @1 :List(TaskSample);
}
