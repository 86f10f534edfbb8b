#pragma once
// Device-side normalize: uint8 images → float32 or float16, per-channel mean and
// standard deviation, optionally moving channels in front of rows (NHWC → NCHW). It runs
// on the device's queue right after the copy, so the link carries uint8 (4× fewer bytes
// than float32). The options, the job, its ARITHMETIC and SHAPES are media/normalize.h's
// (the one CPU reference, which the CPU device runs); the CUDA kernel keeps that
// arithmetic bit for bit (detail/cuda/normalize_kernel.h).

#include "media/normalize.h"
#include "transport/device/device.h"

namespace brigade::transport {

using media::float_to_half;
using media::half_to_float;
using media::kMaxNormalizeChannels;
using media::make_normalize_job;
using media::normalize_reference;
using media::normalized_bytes;
using media::normalized_shape;
using media::NormalizeJob;
using media::NormalizeOptions;

}  // namespace brigade::transport
