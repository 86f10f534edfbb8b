#include "media/audio.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "media/errors.h"
#include "media/synthetic.h"

namespace brigade::media {
namespace {

AudioSpec spec(AudioCodec codec, int rate, int channels, double seconds) {
  return {.codec = codec, .sample_rate = rate, .channels = channels, .seconds = seconds, .seed = 3};
}

std::int16_t to_s16(float v) {
  return std::int16_t(std::lround(std::clamp(v, -1.0f, 1.0f) * 32767));
}

TEST(Audio, WavDecodesExactly) {
  const Bytes wav = make_audio(spec(AudioCodec::wav, 16000, 2, 0.5));
  const std::vector<float> pcm = synthetic_audio(16000, 2, 8000, 3);
  AudioOptions o;
  o.format = SampleFormat::s16;
  Tensor s16 = load_audio(Source::memory(wav), o);
  ASSERT_EQ(s16.shape(), (std::vector<std::int64_t>{8000, 2}));
  ASSERT_EQ(s16.dtype(), DType::int16);
  for (std::size_t i = 0; i < pcm.size(); ++i)
    ASSERT_EQ(s16.data_as<std::int16_t>()[i], to_s16(pcm[i])) << i;
  Tensor f32 = load_audio(Source::memory(wav));
  ASSERT_EQ(f32.dtype(), DType::float32);
  for (std::size_t i = 0; i < pcm.size(); ++i) ASSERT_NEAR(f32.data_as<float>()[i], pcm[i], 1e-4);
  AudioInfo info = probe_audio(Source::memory(wav));
  EXPECT_EQ(info.sample_rate, 16000);
  EXPECT_EQ(info.channels, 2);
  EXPECT_NEAR(info.duration, 0.5, 1e-3);
}

TEST(Audio, StartAndDurationAreSampleExact) {
  const Bytes wav = make_audio(spec(AudioCodec::wav, 16000, 1, 1.0));
  Tensor full = load_audio(Source::memory(wav));
  AudioOptions o;
  o.start = 0.25;
  o.duration = 0.5;
  Tensor part = load_audio(Source::memory(wav), o);
  ASSERT_EQ(part.shape(), (std::vector<std::int64_t>{8000, 1}));
  for (int i = 0; i < 8000; ++i)
    ASSERT_EQ(part.data_as<float>()[i], full.data_as<float>()[4000 + i]) << i;
}

TEST(Audio, ResamplesAndMixesChannels) {
  const Bytes wav = make_audio(spec(AudioCodec::wav, 16000, 2, 0.5));
  AudioOptions o;
  o.sample_rate = 8000;
  o.channels = 1;
  Tensor t = load_audio(Source::memory(wav), o);
  ASSERT_EQ(t.dim(1), 1);
  EXPECT_NEAR(double(t.dim(0)), 4000, 2);
}

TEST(Audio, CompressedCodecsDecode) {
  for (AudioCodec codec : {AudioCodec::flac, AudioCodec::aac, AudioCodec::mp3, AudioCodec::opus}) {
    const int rate = codec == AudioCodec::opus ? 48000 : 16000;
    const Bytes bytes = make_audio(spec(codec, rate, 1, 0.5));
    Tensor t = load_audio(Source::memory(bytes));
    ASSERT_EQ(t.dim(1), 1) << int(codec);
    // Encoders may pad the end by up to a frame or two.
    EXPECT_NEAR(double(t.dim(0)), 0.5 * rate, 0.1 * rate) << int(codec);
    AudioOptions o;
    o.duration = 0.25;
    EXPECT_EQ(load_audio(Source::memory(bytes), o).dim(0), rate / 4) << int(codec);
  }
  const Bytes flac = make_audio(spec(AudioCodec::flac, 16000, 1, 0.5));
  const Bytes wav = make_audio(spec(AudioCodec::wav, 16000, 1, 0.5));
  Tensor a = load_audio(Source::memory(flac)), b = load_audio(Source::memory(wav));
  ASSERT_EQ(a.shape(), b.shape());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.nbytes()), 0);  // lossless
}

TEST(Audio, AppliesFilterDescription) {
  const Bytes wav = make_audio(spec(AudioCodec::wav, 16000, 1, 0.25));
  Tensor plain = load_audio(Source::memory(wav));
  AudioOptions o;
  o.filter_desc = "volume=0.5";
  Tensor half = load_audio(Source::memory(wav), o);
  ASSERT_EQ(plain.shape(), half.shape());
  for (int i = 0; i < 100; ++i)
    EXPECT_NEAR(half.data_as<float>()[i], 0.5f * plain.data_as<float>()[i], 1e-4);
}

ErrorCode audio_error(const Bytes& bytes, const AudioOptions& o = {}) {
  try {
    load_audio(Source::memory(bytes, "bad-audio"), o);
  } catch (const MediaError& e) {
    EXPECT_NE(std::string(e.what()).find("bad-audio"), std::string::npos);
    return e.code();
  }
  ADD_FAILURE() << "no error";
  return ErrorCode::io;
}

TEST(Audio, BadInputsGiveTypedErrors) {
  const Bytes wav = make_audio(spec(AudioCodec::wav, 16000, 1, 0.5));
  AudioOptions too_long;
  too_long.duration = 2.0;
  EXPECT_EQ(audio_error(wav, too_long), ErrorCode::invalid_argument);
  AudioOptions past_end;
  past_end.start = 3.0;
  EXPECT_EQ(audio_error(wav, past_end), ErrorCode::invalid_argument);
  const Bytes video = make_video({.codec = VideoCodec::mpeg4,
                                  .width = 32,
                                  .height = 32,
                                  .frames = 2,
                                  .fps = 10,
                                  .gop = 2,
                                  .b_frames = 0,
                                  .seed = 0});
  EXPECT_EQ(audio_error(video), ErrorCode::unsupported);
  EXPECT_EQ(audio_error(Bytes{}), ErrorCode::bad_data);
  AudioOptions bad_filter;
  bad_filter.filter_desc = "nosuchfilter";
  EXPECT_EQ(audio_error(wav, bad_filter), ErrorCode::invalid_argument);
}

}  // namespace
}  // namespace brigade::media
