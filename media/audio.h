#pragma once
// Audio decoding into contiguous interleaved samples.
//
// Codecs: WAV/PCM, FLAC, MP3, AAC, Opus, Vorbis, ... (whatever FFmpeg decodes).
// Output: shape [samples, channels], interleaved, float32 in [-1, 1] (f32) or
// int16 (s16). Resampling and channel mixing are FFmpeg's aresample (swr).
// `start` and `duration` are exact to the sample: the decoder seeks to just
// before `start` and the output is trimmed by timestamp.
//
// Errors: MediaError; a `duration` that runs past the end of the stream, or a
// `start` past it, is invalid_argument (never a silently shorter result).
// Thread safety: may be called concurrently.

#include <string>

#include "media/source.h"
#include "media/tensor.h"

namespace brigade::media {

enum class SampleFormat { f32, s16 };

struct AudioOptions {
  int sample_rate = 0;  // 0: the source's rate
  int channels = 0;     // 0: the source's channel count
  SampleFormat format = SampleFormat::f32;
  double start = 0;      // seconds from the stream's start
  double duration = -1;  // seconds; < 0: to the end
  // An FFmpeg audio filter description (e.g. "volume=0.5,highpass=f=200")
  // applied before resampling to the output rate, channels and format.
  std::string filter_desc;
};

struct AudioInfo {
  int sample_rate = 0;
  int channels = 0;
  double duration = 0;  // seconds; 0 if unknown
  std::string codec;
};

AudioInfo probe_audio(const Source& source);

Tensor load_audio(const Source& source, const AudioOptions& options = {},
                  const Allocator& allocator = {});

}  // namespace brigade::media
