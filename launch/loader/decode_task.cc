#include "launch/loader/decode_task.h"

#include <capnp/message.h>
#include <fmt/format.h>

#include <stdexcept>

#include "launch/loader/decode_op.capnp.h"
#include "transport/remote/detail/wire.h"

namespace brigade::launch {
namespace {

// Each capnp enum's enumerants are the C++ enum's, in order: a cast maps one to the other.
static_assert(int(wire::MediaKind::VIDEO) == int(MediaKind::video));
static_assert(int(wire::Layout::NCHW) == int(Layout::nchw));
static_assert(int(wire::TransformKind::NONE) == int(media::TransformKind::none) &&
              int(wire::TransformKind::EVAL) == int(media::TransformKind::eval) &&
              int(wire::TransformKind::TRAIN) == int(media::TransformKind::train));
static_assert(int(wire::Interpolation::BICUBIC) == int(media::Interpolation::bicubic));

using transport::RemoteError;

constexpr std::size_t kMaxPath = 4096;

template <class To, class From>
To to_wire(From value) {
  return static_cast<To>(static_cast<std::uint16_t>(value));
}

// A capnp enum read from a peer: an enumerant this build knows, else a RemoteError.
template <class To, class From>
To from_wire(From value, To last, const char* what) {
  const auto v = static_cast<std::uint16_t>(value);
  if (v > static_cast<std::uint16_t>(last))
    throw RemoteError(fmt::format("a task of unknown {} ({})", what, v));
  return static_cast<To>(v);
}

int count(std::uint32_t value, const char* what) {
  if (value > 65536) throw RemoteError(fmt::format("a task whose {} is past 65536", what));
  return static_cast<int>(value);
}

void write_transform(const media::TransformOptions& t, wire::Transform::Builder out) {
  out.setKind(to_wire<wire::TransformKind>(t.kind));
  out.setSize(static_cast<std::uint32_t>(t.size));
  out.setResize(static_cast<std::uint32_t>(t.resize));
  out.setScaleMin(t.scale_min);
  out.setScaleMax(t.scale_max);
  out.setRatioMin(t.ratio_min);
  out.setRatioMax(t.ratio_max);
  out.setFlipProbability(t.flip_probability);
  out.setExifOrientation(t.exif_orientation);
  out.setRoiDecode(t.roi_decode);
  out.setInterpolation(to_wire<wire::Interpolation>(t.interpolation));
  out.setSeed(t.seed);
  out.setEpoch(t.epoch);
}

media::TransformOptions read_transform(wire::Transform::Reader r) {
  return {.kind = from_wire(r.getKind(), media::TransformKind::train, "transform"),
          .size = count(r.getSize(), "size"),
          .resize = count(r.getResize(), "resize"),
          .scale_min = r.getScaleMin(),
          .scale_max = r.getScaleMax(),
          .ratio_min = r.getRatioMin(),
          .ratio_max = r.getRatioMax(),
          .flip_probability = r.getFlipProbability(),
          .exif_orientation = r.getExifOrientation(),
          .roi_decode = r.getRoiDecode(),
          .interpolation =
              from_wire(r.getInterpolation(), media::Interpolation::bicubic, "interpolation"),
          .seed = r.getSeed(),
          .epoch = r.getEpoch()};
}

DecodeSpec read_spec(wire::DecodeSpec::Reader r) {
  DecodeSpec spec{.kind = from_wire(r.getKind(), MediaKind::video, "kind"),
                  .layout = from_wire(r.getLayout(), Layout::nchw, "layout"),
                  .transform = read_transform(r.getTransform()),
                  .clip_frames = count(r.getClipFrames(), "clip frames"),
                  .clip_stride = count(r.getClipStride(), "clip stride")};
  try {
    validate(spec);
  } catch (const std::invalid_argument& e) {
    throw RemoteError(fmt::format("a task whose spec is invalid ({})", e.what()));
  }
  return spec;
}

}  // namespace

std::vector<char> write_decode_task(const DecodeSpec& spec,
                                    std::span<const EncodedSample> samples) {
  capnp::MallocMessageBuilder message;
  auto task = message.initRoot<wire::DecodeTask>();
  auto s = task.initSpec();
  s.setKind(to_wire<wire::MediaKind>(spec.kind));
  s.setLayout(to_wire<wire::Layout>(spec.layout));
  write_transform(spec.transform, s.initTransform());
  s.setClipFrames(static_cast<std::uint32_t>(spec.clip_frames));
  s.setClipStride(static_cast<std::uint32_t>(spec.clip_stride));
  auto list = task.initSamples(static_cast<unsigned>(samples.size()));
  for (unsigned i = 0; i < list.size(); ++i) {
    list[i].setId(samples[i].id);
    list[i].setPath(samples[i].path);
  }
  return transport::detail::to_bytes(message);
}

DecodeTask read_decode_task(std::span<const char> bytes, std::size_t max_samples) {
  transport::detail::WireReader reader(bytes);
  const auto r = reader.root<wire::DecodeTask>();
  return transport::detail::checked_read([&] {
    DecodeTask task{.spec = read_spec(r.getSpec()), .samples = {}};
    const auto samples = r.getSamples();
    if (samples.size() > max_samples) {
      throw RemoteError(
          fmt::format("a task of {} samples (at most {})", samples.size(), max_samples));
    }
    task.samples.reserve(samples.size());
    for (auto s : samples) {
      if (s.getPath().size() > kMaxPath) throw RemoteError("malformed message: path too long");
      task.samples.push_back({.id = s.getId(), .path = s.getPath()});
    }
    return task;
  });
}

}  // namespace brigade::launch
