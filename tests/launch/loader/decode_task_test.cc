// The decode operation's one codec (launch/loader/decode_task.h): every field of the spec
// and of a result crosses exactly; malformed bytes, unknown enumerants and out-of-range
// fields give a RemoteError saying why, never anything else (run under ASan/UBSan in CI).
#include "launch/loader/decode_task.h"

#include <capnp/message.h>
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "launch/loader/decode_op.capnp.h"
#include "media/errors.h"
#include "tests/transport/wire/mutations.h"
#include "transport/device/device.h"
#include "transport/remote/remote.h"
#include "transport/wire/wire.h"

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
    return transport::wire::to_bytes(message);
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

// A result as a worker writes it: 3 images of 2 × 2 × 3 bytes (byte k of the data is k),
// then failed samples whose codes are of each category the wire names, of none, and of
// one it does not name.
const std::error_category& unknown_category() {
  static const struct : std::error_category {
    const char* name() const noexcept override { return "test.unknown"; }
    std::string message(int) const override { return "unknown"; }
  } category;
  return category;
}

std::vector<char> valid_result() {
  return write_decode_result([](const media::Allocator& allocator) {
    DecodedBatch batch{.ids = {10, 12, 13},
                       .data = media::Tensor::empty(media::DType::uint8, {3, 2, 2, 3}, allocator)};
    auto* bytes = static_cast<std::uint8_t*>(batch.data.data());
    for (std::size_t k = 0; k < batch.data.nbytes(); ++k) bytes[k] = static_cast<std::uint8_t>(k);
    const std::error_code codes[] = {
        media::make_error_code(media::ErrorCode::bad_data),
        transport::make_error_code(transport::RemoteErrc::lost_on_attempts),
        transport::make_error_code(transport::DeviceErrc::peer_lost),
        std::make_error_code(std::errc::timed_out),
        std::error_code(5, std::system_category()),
        {},
        std::error_code(3, unknown_category())};
    for (std::size_t i = 0; i < std::size(codes); ++i) {
      batch.failures.push_back(BatchFailure{{.id = 20 + i,
                                             .path = "/data/f-" + std::to_string(i),
                                             .code = codes[i],
                                             .cause = "cause " + std::to_string(i)},
                                            3 + i});
    }
    return batch;
  });
}

TEST(DecodeResult, EveryFieldAndEachCodeCrossesExactly) {
  const auto r = read_decode_result(valid_result());
  EXPECT_EQ(r.ids, (std::vector<std::uint64_t>{10, 12, 13}));
  EXPECT_EQ(r.shape, (std::vector<std::int64_t>{3, 2, 2, 3}));
  ASSERT_EQ(r.data.size(), 36u);
  for (std::size_t k = 0; k < r.data.size(); ++k) EXPECT_EQ(r.data[k], k);
  ASSERT_EQ(r.failures.size(), 7u);
  for (std::size_t i = 0; i < r.failures.size(); ++i) {
    EXPECT_EQ(r.failures[i].index, 3 + i);
    EXPECT_EQ(r.failures[i].id, 20 + i);
    EXPECT_EQ(r.failures[i].path, "/data/f-" + std::to_string(i));
    EXPECT_EQ(r.failures[i].cause, "cause " + std::to_string(i));
    EXPECT_TRUE(r.failures[i].stage.empty());
  }
  EXPECT_EQ(r.failures[0].code, media::ErrorCode::bad_data);
  EXPECT_EQ(r.failures[1].code, transport::RemoteErrc::lost_on_attempts);
  EXPECT_EQ(r.failures[2].code, transport::DeviceErrc::peer_lost);
  EXPECT_EQ(r.failures[3].code, std::make_error_code(std::errc::timed_out));
  EXPECT_EQ(r.failures[4].code, std::error_code(5, std::system_category()));
  EXPECT_FALSE(r.failures[5].code);
  EXPECT_FALSE(r.failures[6].code);  // a category the wire does not name: no code
  // A batch of no sample (the allocator asked for nothing) crosses too.
  const auto none = read_decode_result(write_decode_result([](const media::Allocator& a) {
    return DecodedBatch{.ids = {}, .data = media::Tensor::empty(media::DType::uint8, {0, 4}, a)};
  }));
  EXPECT_TRUE(none.ids.empty());
  EXPECT_EQ(none.shape, (std::vector<std::int64_t>{0, 4}));
  EXPECT_TRUE(none.data.empty());
}

TEST(DecodeResult, AnUnknownErrorCategoryIsRefusedByName) {
  capnp::MallocMessageBuilder message;
  auto result = message.initRoot<wire::DecodeResult>();
  result.initShape(2).set(1, 4);
  auto failure = result.initFailures(1)[0];
  failure.setCategory(static_cast<wire::ErrorCategory>(6));
  try {
    read_decode_result(transport::wire::to_bytes(message));
    ADD_FAILURE() << "accepted";
  } catch (const RemoteError& e) {
    EXPECT_STREQ(e.what(), "a result of unknown error category (6)");
  }
}

TEST(DecodeResult, MutatedBytesGiveAResultOrARemoteError) {
  const auto valid = valid_result();
  std::mt19937 random(8);
  int rejected = 0;
  for (int round = 0; round < 2000; ++round) {
    auto bytes = transport::test::mutated(valid, round, random);
    try {
      const auto r = read_decode_result(std::move(bytes));
      // What it returns is readable: every byte the data claims, every failure's text.
      unsigned sum = 0;
      for (auto byte : r.data) sum += byte;
      for (const auto& f : r.failures) sum += unsigned(f.path.size() + f.cause.size());
      (void)sum;
      EXPECT_LE(r.shape.size(), 8u);
    } catch (const RemoteError&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
  EXPECT_THROW(read_decode_result({}), RemoteError);
}

}  // namespace
}  // namespace brigade::launch
