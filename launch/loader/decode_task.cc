#include "launch/loader/decode_task.h"

#include <capnp/message.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <utility>

#include "launch/loader/decode_op.capnp.h"
#include "media/errors.h"
#include "transport/device/device.h"
#include "transport/remote/remote.h"
#include "transport/wire/wire.h"

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
using Reader = transport::wire::Reader<RemoteError>;

constexpr std::size_t kMaxText = 4096;  // paths, causes

template <class F>
auto checked_read(F&& fn) -> decltype(fn()) {
  return transport::wire::checked_read<RemoteError>(std::forward<F>(fn));
}

std::string text(capnp::Text::Reader t, const char* what) {
  if (t.size() > kMaxText) throw RemoteError(fmt::format("malformed message: {} too long", what));
  return t;
}

// The categories wire::ErrorCategory names, in its order (none: no code).
const std::array<const std::error_category*, 6>& categories() {
  static const std::array<const std::error_category*, 6> known{nullptr,
                                                               &media::media_category(),
                                                               &transport::remote_category(),
                                                               &transport::device_category(),
                                                               &std::generic_category(),
                                                               &std::system_category()};
  return known;
}
static_assert(int(wire::ErrorCategory::SYSTEM) == 5, "categories(): one per enumerant");

template <class To, class From>
To to_wire(From value) {
  return static_cast<To>(static_cast<std::uint16_t>(value));
}

// A capnp enum read from a peer: an enumerant this build knows, else a RemoteError
// ("<unknown> (<value>)").
template <class To, class From>
To from_wire(From value, To last, const char* unknown) {
  const auto v = static_cast<std::uint16_t>(value);
  if (v > static_cast<std::uint16_t>(last)) throw RemoteError(fmt::format("{} ({})", unknown, v));
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
  return {
      .kind = from_wire(r.getKind(), media::TransformKind::train, "a task of unknown transform"),
      .size = count(r.getSize(), "size"),
      .resize = count(r.getResize(), "resize"),
      .scale_min = r.getScaleMin(),
      .scale_max = r.getScaleMax(),
      .ratio_min = r.getRatioMin(),
      .ratio_max = r.getRatioMax(),
      .flip_probability = r.getFlipProbability(),
      .exif_orientation = r.getExifOrientation(),
      .roi_decode = r.getRoiDecode(),
      .interpolation = from_wire(r.getInterpolation(), media::Interpolation::bicubic,
                                 "a task of unknown interpolation"),
      .seed = r.getSeed(),
      .epoch = r.getEpoch()};
}

DecodeSpec read_spec(wire::DecodeSpec::Reader r) {
  DecodeSpec spec{.kind = from_wire(r.getKind(), MediaKind::video, "a task of unknown kind"),
                  .layout = from_wire(r.getLayout(), Layout::nchw, "a task of unknown layout"),
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
    list[i].setOffset(samples[i].offset);
    list[i].setSize(samples[i].size);
  }
  return transport::wire::to_bytes(message);
}

DecodeTask read_decode_task(std::span<const char> bytes, std::size_t max_samples) {
  Reader reader(bytes);
  const auto r = reader.root<wire::DecodeTask>();
  return checked_read([&] {
    DecodeTask task{.spec = read_spec(r.getSpec()), .samples = {}};
    const auto samples = r.getSamples();
    if (samples.size() > max_samples) {
      throw RemoteError(
          fmt::format("a task of {} samples (at most {})", samples.size(), max_samples));
    }
    task.samples.reserve(samples.size());
    for (auto s : samples) {
      if (s.getSize() != kWholeFile && s.getOffset() > kWholeFile - 1 - s.getSize())
        throw RemoteError("a task whose sample's byte range overflows");
      task.samples.push_back({.id = s.getId(),
                              .path = text(s.getPath(), "path"),
                              .offset = s.getOffset(),
                              .size = s.getSize()});
    }
    return task;
  });
}

std::vector<char> write_decode_result(
    const std::function<DecodedBatch(const media::Allocator&)>& decode) {
  capnp::MallocMessageBuilder message;
  auto orphan = capnp::Orphan<capnp::Data>();
  const media::Allocator allocator = [&](std::size_t n) -> std::shared_ptr<void> {
    orphan = message.getOrphanage().newOrphan<capnp::Data>(static_cast<unsigned>(n));
    return std::shared_ptr<void>(orphan.get().begin(), [](void*) {});
  };
  const auto batch = decode(allocator);
  auto result = message.initRoot<wire::DecodeResult>();
  auto ids = result.initIds(static_cast<unsigned>(batch.ids.size()));
  for (unsigned i = 0; i < ids.size(); ++i) ids.set(i, batch.ids[i]);
  const auto& shape = batch.data.shape();
  auto out_shape = result.initShape(static_cast<unsigned>(shape.size()));
  for (unsigned i = 0; i < shape.size(); ++i) out_shape.set(i, shape[i]);
  if (orphan != nullptr) {
    orphan.truncate(static_cast<unsigned>(batch.data.nbytes()));
    result.adoptData(kj::mv(orphan));
  }
  auto failures = result.initFailures(static_cast<unsigned>(batch.failures.size()));
  for (unsigned i = 0; i < failures.size(); ++i) {
    const auto& f = batch.failures[i];
    failures[i].setIndex(static_cast<std::uint32_t>(f.index));
    failures[i].setId(f.id.value_or(0));
    failures[i].setPath(f.path);
    const auto& known = categories();
    const auto at = std::find(known.begin() + 1, known.end(), &f.code.category());
    if (f.code && at != known.end()) {
      failures[i].setCategory(static_cast<wire::ErrorCategory>(at - known.begin()));
      failures[i].setCode(f.code.value());
    }
    failures[i].setCause(f.cause);
  }
  return transport::wire::to_bytes(message);
}

DecodeResult read_decode_result(transport::SharedBytes bytes) {
  struct Kept {
    explicit Kept(transport::SharedBytes b) : bytes(std::move(b)), reader(bytes.span()) {}
    transport::SharedBytes bytes;
    Reader reader;  // of `bytes` (or of its aligned copy)
  };
  auto kept = std::make_shared<Kept>(std::move(bytes));
  const auto r = kept->reader.root<wire::DecodeResult>();
  auto result = checked_read([&] {
    DecodeResult out;
    const auto ids = r.getIds();
    out.ids.reserve(ids.size());
    for (auto id : ids) out.ids.push_back(id);
    const auto shape = r.getShape();
    if (shape.size() > 8) throw RemoteError("malformed message: a shape of too many dimensions");
    for (auto d : shape) out.shape.push_back(d);
    const auto data = r.getData();
    out.data = {data.begin(), data.size()};
    const auto failures = r.getFailures();
    if (failures.size() > ids.size() + (std::size_t{1} << 20))
      throw RemoteError("malformed message: too many failures");
    for (auto f : failures) {
      const auto* category = categories()[static_cast<std::size_t>(from_wire(
          f.getCategory(), wire::ErrorCategory::SYSTEM, "a result of unknown error category"))];
      out.failures.push_back(BatchFailure{
          {.id = f.getId(),
           .path = text(f.getPath(), "path"),
           .code = category ? std::error_code(f.getCode(), *category) : std::error_code{},
           .cause = text(f.getCause(), "cause")},
          f.getIndex()});
    }
    return out;
  });
  result.keep = std::move(kept);
  return result;
}

}  // namespace brigade::launch
