#pragma once
// Synthetic media for tests, benchmarks and the demo dataset: realistic content
// (textured, noisy, moving), encoded with the real encoders, deterministic from
// a seed (same seed and parameters, same bytes, on the same library versions).
//
// Images: smooth gradients, shapes, oriented stripes, multi-scale value noise
// and per-pixel sensor noise. JPEGs are encoded like a camera or ImageNet's
// would be: libjpeg-turbo, quality 90, 4:2:0, baseline Huffman (about 100 KB
// for 500x375). PNG, WebP and BMP use FFmpeg's encoders.
// Video: the same texture panning across the frame plus a moving box, encoded
// single-threaded with FFmpeg's libx264 / mpeg4 / libx265 / libvpx-vp9 /
// libaom-av1 / mjpeg.
// Audio: chirps, tones and noise, encoded with FFmpeg's pcm/aac/flac/mp3/opus.
//
// Thread safety: all functions may be called concurrently.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace brigade::media {

using Bytes = std::vector<std::uint8_t>;

// The raw RGB24 content (H x W x 3, row-major) that the image encoders compress.
Bytes synthetic_rgb(int width, int height, std::uint64_t seed);

enum class ImageCodec { jpeg, png, webp, bmp };

// JPEG: `quality` (1-100) and 4:2:0 subsampling; ignored for the lossless codecs.
Bytes make_image(ImageCodec codec, int width, int height, std::uint64_t seed, int quality = 90);
// Encodes caller-provided RGB24 pixels (H x W x 3) as a baseline 4:2:0 JPEG.
Bytes encode_jpeg(std::span<const std::uint8_t> rgb, int width, int height, int quality = 90);

enum class VideoCodec { h264, hevc, mpeg4, vp9, av1, mjpeg };

// How h264 is encoded (other codecs ignore it).
enum class VideoProfile {
  // Fast test clips: libx264 veryfast, CRF 23, keyframes every `gop` frames,
  // `b_frames` B-frames in a fixed pattern, no lookahead, no scene cuts.
  fast,
  // Like users' videos: libx264 at its own defaults (preset medium, CRF 23,
  // keyint 250, min-keyint 25, scene cuts, 3 adaptive B-frames with B-pyramid
  // "normal" (middle B-frames are references), 3 reference frames, weighted
  // prediction, CABAC). `gop` and `b_frames` are ignored.
  x264_default,
};

struct VideoSpec {
  VideoCodec codec = VideoCodec::h264;
  int width = 320;
  int height = 240;
  int frames = 48;
  int fps = 24;
  int gop = 24;      // keyframe interval
  int b_frames = 2;  // ignored by codecs without B-frames
  std::uint64_t seed = 0;
  VideoProfile profile = VideoProfile::fast;
};
// An MP4 (h264, hevc, mpeg4), WebM (vp9, av1) or AVI (mjpeg: full-range
// yuvj420p, as cameras write it) file's bytes. Frame i has pts i / fps
// seconds, starting at 0.
Bytes make_video(const VideoSpec& spec);
// The same in another container: an FFmpeg muxer name ("matroska", "avi",
// "h264" for a raw Annex B stream without an index or frame count, ...).
Bytes make_video(const VideoSpec& spec, const std::string& container);

enum class AudioCodec { wav, aac, flac, mp3, opus };

struct AudioSpec {
  AudioCodec codec = AudioCodec::wav;
  int sample_rate = 16000;
  int channels = 1;
  double seconds = 1.0;
  std::uint64_t seed = 0;
};
// WAV (s16le), AAC in M4A, FLAC, MP3 or Opus in Ogg.
Bytes make_audio(const AudioSpec& spec);
// The raw signal make_audio encodes: interleaved float samples in [-1, 1].
std::vector<float> synthetic_audio(int sample_rate, int channels, std::int64_t samples,
                                   std::uint64_t seed);

// Writes bytes to a file (through a temporary file and a rename).
void write_file(const std::string& path, std::span<const std::uint8_t> bytes);

}  // namespace brigade::media
