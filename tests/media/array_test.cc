#include "media/array.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>
#include <random>

#include "media/errors.h"
#include "tests/media/npy_writer.h"

namespace brigade::media {
namespace {

using testing::Bytes;
using testing::make_npy;
using testing::make_zip;

TEST(Array, LoadsNpyOfEveryDtype) {
  const float f[6] = {1, 2, 3, 4, 5, 6};
  Tensor t = load_npy(make_npy("<f4", "(2, 3)", f, sizeof(f)));
  EXPECT_EQ(t.dtype(), DType::float32);
  EXPECT_EQ(t.shape(), (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(t.data_as<float>()[5], 6.0f);
  const std::int64_t i[2] = {-5, 1LL << 40};
  Tensor ti = load_npy(make_npy("<i8", "(2,)", i, sizeof(i), false, 2));
  EXPECT_EQ(ti.data_as<std::int64_t>()[1], 1LL << 40);
  const std::uint8_t b[3] = {1, 0, 1};
  EXPECT_EQ(load_npy(make_npy("|b1", "(3,)", b, 3)).dtype(), DType::boolean);
  EXPECT_EQ(load_npy(make_npy("|u1", "()", b, 1)).shape(), std::vector<std::int64_t>{});
  EXPECT_EQ(load_npy(make_npy("<u1", "(0, 4)", b, 0)).numel(), 0);
  for (const char* d : {"|i1", "<u2", "<i2", "<i4", "<f2", "<f8"}) {
    const std::uint8_t zeros[16] = {};
    EXPECT_NO_THROW(load_npy(make_npy(d, "(2,)", zeros, 2 * (d[2] - '0')))) << d;
  }
}

TEST(Array, SwapsBigEndianData) {
  const std::uint8_t be[4] = {0x00, 0x00, 0x01, 0x02};
  Tensor t = load_npy(make_npy(">i4", "(1,)", be, 4));
  EXPECT_EQ(t.data_as<std::int32_t>()[0], 0x0102);
}

TEST(Array, SharedBufferIsNotCopied) {
  const double d[4] = {1, 2, 3, 4};
  auto buf = std::make_shared<Bytes>(make_npy("<f8", "(4,)", d, sizeof(d)));
  Tensor t = load_npy(buf);
  EXPECT_GE(t.data_as<std::uint8_t>(), buf->data());
  EXPECT_LT(t.data_as<std::uint8_t>(), buf->data() + buf->size());
  const std::uint8_t* data = buf->data();
  buf.reset();  // the tensor keeps the buffer alive
  EXPECT_EQ((t.data_as<std::uint8_t>() - data) % 64, 0);
  EXPECT_EQ(t.data_as<double>()[3], 4.0);
}

TEST(Array, LoadsStoredAndDeflatedNpz) {
  std::vector<float> big(10000);
  std::mt19937 rng(1);
  for (auto& v : big) v = float(rng() % 100);
  const std::int16_t small[3] = {7, 8, 9};
  const std::vector<std::pair<std::string, Bytes>> files = {
      {"x.npy", make_npy("<f4", "(100, 100)", big.data(), big.size() * 4)},
      {"labels.npy", make_npy("<i2", "(3,)", small, sizeof(small))}};
  for (bool deflate : {false, true}) {
    auto members = load_npz(make_zip(files, deflate), "data.npz");
    ASSERT_EQ(members.size(), 2u);
    EXPECT_EQ(members.at("x").shape(), (std::vector<std::int64_t>{100, 100}));
    EXPECT_EQ(std::memcmp(members.at("x").data(), big.data(), big.size() * 4), 0);
    EXPECT_EQ(members.at("labels").data_as<std::int16_t>()[2], 9);
    auto shared = load_npz(std::make_shared<Bytes>(make_zip(files, deflate)), "data.npz");
    EXPECT_EQ(shared.at("labels").data_as<std::int16_t>()[0], 7);
  }
}

ErrorCode npy_error(const Bytes& b) {
  try {
    load_npy(b, "arr.npy");
  } catch (const MediaError& e) {
    EXPECT_NE(std::string(e.what()).find("arr.npy"), std::string::npos);
    return e.code();
  }
  ADD_FAILURE() << "no error";
  return ErrorCode::io;
}

TEST(Array, RejectsUnsupportedAndCorruptInput) {
  const float f[4] = {};
  EXPECT_EQ(npy_error(make_npy("<f4", "(2, 2)", f, sizeof(f), true)),
            ErrorCode::unsupported);  // Fortran
  EXPECT_EQ(npy_error(make_npy("|O", "(2,)", f, 16)), ErrorCode::unsupported);
  EXPECT_EQ(npy_error(make_npy("<c8", "(2,)", f, 16)), ErrorCode::unsupported);
  EXPECT_EQ(npy_error(make_npy("<f4", "(4, 4)", f, sizeof(f))), ErrorCode::bad_data);  // truncated
  EXPECT_EQ(npy_error(Bytes{}), ErrorCode::bad_data);
  EXPECT_EQ(npy_error(Bytes(100, 'x')), ErrorCode::bad_data);
  Bytes zip = make_zip({{"a.npy", make_npy("<f4", "(4,)", f, sizeof(f))}}, true);
  zip[60] ^= 0xFF;  // corrupt the compressed data
  try {
    load_npz(zip, "bad.npz");
    FAIL();
  } catch (const MediaError& e) {
    EXPECT_EQ(e.code(), ErrorCode::bad_data);
    EXPECT_NE(std::string(e.what()).find("bad.npz:a.npy"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace brigade::media
