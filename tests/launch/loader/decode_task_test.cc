// The decode task's one codec (launch/loader/decode_task.h): every field of the spec crosses
// exactly; malformed bytes, unknown enumerants and out-of-range fields give a
// RemoteError saying why, never anything else (run under ASan/UBSan in CI).
#include "launch/loader/decode_task.h"

#include <capnp/message.h>
#include <gtest/gtest.h>

#include <random>

#include "launch/loader/decode_op.capnp.h"
#include "transport/remote/detail/wire.h"

namespace brigade::launch {
namespace {

using transport::RemoteError;

DecodeSpec unusual_spec() {
  return {.kind = MediaKind::image,
          .layout = Layout::nchw,
          .transform = {.kind = media::TransformKind::train,
                        .size = 192,
                        .resize = 288,
                        .scale_min = 0.25,
                        .scale_max = 0.9,
                        .ratio_min = 0.5,
                        .ratio_max = 2.0,
                        .flip_probability = 0.3,
                        .exif_orientation = true,
                        .roi_decode = false,
                        .interpolation = media::Interpolation::bicubic,
                        .seed = 3,
                        .epoch = 2},
          .clip_frames = 5,
          .clip_stride = 7};
}

std::vector<EncodedSample> samples(int n) {
  std::vector<EncodedSample> out;
  for (int i = 0; i < n; ++i)
    out.push_back({.id = std::uint64_t(i), .path = "/data/img-" + std::to_string(i)});
  return out;
}

std::string error_of(std::span<const char> bytes) {
  try {
    read_decode_task(bytes, 1024);
  } catch (const RemoteError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(DecodeTask, EveryFieldOfTheSpecCrossesExactly) {
  const DecodeSpec spec = unusual_spec();
  const auto bytes = write_decode_task(spec, samples(32));
  const DecodeTask back = read_decode_task(bytes, 1024);
  EXPECT_EQ(back.spec.kind, spec.kind);
  EXPECT_EQ(back.spec.layout, spec.layout);
  EXPECT_EQ(back.spec.clip_frames, 5);
  EXPECT_EQ(back.spec.clip_stride, 7);
  const auto& t = back.spec.transform;
  EXPECT_EQ(t.kind, media::TransformKind::train);
  EXPECT_EQ(t.size, 192);
  EXPECT_EQ(t.resize, 288);
  EXPECT_EQ(t.scale_min, 0.25);
  EXPECT_EQ(t.scale_max, 0.9);
  EXPECT_EQ(t.ratio_min, 0.5);
  EXPECT_EQ(t.ratio_max, 2.0);
  EXPECT_EQ(t.flip_probability, 0.3);
  EXPECT_TRUE(t.exif_orientation);
  EXPECT_FALSE(t.roi_decode);  // default true: a full decode must be asked for
  EXPECT_EQ(t.interpolation, media::Interpolation::bicubic);
  EXPECT_EQ(t.seed, 3u);
  EXPECT_EQ(t.epoch, 2u);
  ASSERT_EQ(back.samples.size(), 32u);
  EXPECT_EQ(back.samples[31].id, 31u);
  EXPECT_EQ(back.samples[31].path, "/data/img-31");
  // The defaults cross as themselves too (bilinear, a region decode, eval).
  const auto plain = read_decode_task(write_decode_task({}, samples(1)), 1).spec;
  EXPECT_EQ(plain.transform.interpolation, media::Interpolation::bilinear);
  EXPECT_TRUE(plain.transform.roi_decode);
  EXPECT_EQ(plain.transform.kind, media::TransformKind::eval);
  EXPECT_EQ(plain.transform.size, 224);
}

TEST(DecodeTask, AnInvalidSpecOrTooManySamplesIsARemoteErrorSayingWhy) {
  EXPECT_EQ(error_of(write_decode_task(unusual_spec(), samples(32))), "accepted");
  EXPECT_THROW(read_decode_task(write_decode_task({}, samples(32)), 31), RemoteError);
  DecodeSpec bad = unusual_spec();
  bad.transform.scale_min = 0.95;
  EXPECT_NE(error_of(write_decode_task(bad, samples(1))).find("scale"), std::string::npos);
  DecodeSpec clip{.kind = MediaKind::video};
  clip.transform.interpolation = media::Interpolation::bicubic;
  EXPECT_NE(error_of(write_decode_task(clip, samples(1))).find("bicubic"), std::string::npos);
  clip = {.kind = MediaKind::video, .clip_stride = 0};
  EXPECT_NE(error_of(write_decode_task(clip, samples(1))).find("clip_stride"), std::string::npos);
  clip = {.kind = MediaKind::video, .transform = {.kind = media::TransformKind::none}};
  EXPECT_NE(error_of(write_decode_task(clip, samples(1))).find("none"), std::string::npos);
}

TEST(DecodeTask, AnUnknownEnumerantIsRefusedByName) {
  // What a newer peer might send: an enumerant this build does not know.
  auto with = [](auto set) {
    capnp::MallocMessageBuilder message;
    auto task = message.initRoot<wire::DecodeTask>();
    auto spec = task.initSpec();
    spec.initTransform().setSize(224);
    spec.getTransform().setResize(256);
    spec.getTransform().setKind(wire::TransformKind::EVAL);
    spec.getTransform().setScaleMin(0.08);
    spec.getTransform().setScaleMax(1);
    spec.getTransform().setRatioMin(0.75);
    spec.getTransform().setRatioMax(1.25);
    set(spec);
    return transport::detail::to_bytes(message);
  };
  EXPECT_EQ(error_of(with([](auto) {})), "accepted");
  EXPECT_EQ(error_of(with([](auto s) { s.setKind(static_cast<wire::MediaKind>(2)); })),
            "a task of unknown kind (2)");
  EXPECT_EQ(error_of(with([](auto s) { s.setLayout(static_cast<wire::Layout>(9)); })),
            "a task of unknown layout (9)");
  EXPECT_EQ(
      error_of(with([](auto s) { s.getTransform().setKind(static_cast<wire::TransformKind>(3)); })),
      "a task of unknown transform (3)");
  EXPECT_EQ(error_of(with([](auto s) {
              s.getTransform().setInterpolation(static_cast<wire::Interpolation>(2));
            })),
            "a task of unknown interpolation (2)");
  EXPECT_NE(error_of(with([](auto s) { s.getTransform().setResize(1u << 31); })).find("resize"),
            std::string::npos);
}

TEST(DecodeTask, MutatedBytesGiveATaskOrARemoteError) {
  const auto valid = write_decode_task({}, samples(16));
  std::mt19937 random(6);
  int rejected = 0;
  for (int round = 0; round < 2000; ++round) {
    auto bytes = valid;
    if (round % 3 == 0) {
      bytes.resize(random() % bytes.size());
    } else {
      for (int i = 0, n = 1 + int(random() % 6); i < n; ++i)
        bytes[random() % bytes.size()] ^= char(1u << (random() % 8));
    }
    try {
      const auto task = read_decode_task(bytes, 1024);
      EXPECT_LE(task.samples.size(), 1024u);
    } catch (const RemoteError&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
  EXPECT_NE(error_of({}), "accepted");
}

}  // namespace
}  // namespace brigade::launch
