#pragma once
// The FFmpeg half of media: a shared library of its own, libbrigade_media_ffmpeg.so,
// loaded with dlopen the first time a call needs it (a video, audio, a non-JPEG image,
// load_image, the synthetic encoders other than JPEG). JPEG through libjpeg
// (transform.h: `brigade run`'s image path), is_jpeg, npy/npz and the tensor code stay in
// libbrigade_media and never load it, so a JPEG-only job does not map FFmpeg's ~150
// dependent libraries (about 30 MB of resident relocated library pages).
//
// Where it is looked for, in order (the first that loads wins):
//   1. $BRIGADE_MEDIA_PLUGIN, a file path; when set, nothing else is tried;
//   2. next to the object that holds this code (the executable, or the Python module):
//      DIR/libbrigade_media_ffmpeg.so, then DIR/../<libdir>/ (an installed bin/);
//   3. the bare name through the dynamic loader: the caller's RUNPATH (programs and the
//      Python module in the build tree get the plugin's build folder; an installed
//      package's consumers get its lib folder from BrigadeConfig.cmake / brigade.pc),
//      LD_LIBRARY_PATH, the system's library folders.
// A plugin that does not answer to this build's kPluginAbi is skipped like a missing one.
// Loading happens once per process: its outcome (the plugin, or the error naming every
// path tried and why each failed) is kept, and the plugin is never unloaded (tensors it
// made may still hold its deleters).
//
// Thread safety: ffmpeg_plugin() may be called concurrently; the plugin's functions are
// as thread-safe as the public functions they implement (video.h, audio.h, image.h).
// The interface is process-local and unstable: only a plugin built from the same tree
// may implement it. No FFmpeg type appears here.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "media/audio.h"
#include "media/image.h"
#include "media/synthetic.h"
#include "media/video.h"

namespace brigade::media::detail {

// Bumped whenever FfmpegPlugin or the types it passes change.
inline constexpr int kPluginAbi = 2;
inline constexpr const char* kPluginFile = "libbrigade_media_ffmpeg.so";
inline constexpr const char* kPluginEnv = "BRIGADE_MEDIA_PLUGIN";
inline constexpr const char* kPluginEntry = "brigade_media_ffmpeg_plugin";

// The streaming objects of video.h (Packet, Frame, ... hold one each). Single-threaded.
class PluginPacket {
 public:
  virtual ~PluginPacket() = default;
  virtual double time() const = 0;
  virtual bool keyframe() const = 0;
  virtual int size() const = 0;
};

class PluginFrame {
 public:
  virtual ~PluginFrame() = default;
  virtual int width() const = 0;
  virtual int height() const = 0;
  virtual double time() const = 0;
};

class PluginDecoder {
 public:
  virtual ~PluginDecoder() = default;
  virtual void send(const PluginPacket* packet) = 0;  // nullptr: no more packets
  virtual void reset() = 0;
  virtual std::unique_ptr<PluginFrame> receive() = 0;  // nullptr: needs more, or done
};

class PluginDemuxer {
 public:
  virtual ~PluginDemuxer() = default;
  virtual VideoInfo info() const = 0;
  virtual std::unique_ptr<PluginPacket> next() = 0;  // nullptr at the end
  virtual void seek(double seconds) = 0;
  // A decoder of this demuxer's stream; the demuxer must outlive it.
  virtual std::unique_ptr<PluginDecoder> decoder(int threads) const = 0;
};

class PluginReader {
 public:
  virtual ~PluginReader() = default;
  virtual std::optional<Tensor> next_chunk(int chunk_frames, const Allocator& allocator) = 0;
};

// Given the decoded image's shape, where to write it (load_image's tensor, or the
// caller's memory after checking the shape).
using ImageSink = std::function<std::uint8_t*(const std::vector<std::int64_t>& shape)>;

// What the plugin implements: the public functions of the same names, after the core's
// own checks. Errors are MediaError, as the public functions document.
class FfmpegPlugin {
 public:
  virtual ~FfmpegPlugin() = default;
  // `bytes` is the whole encoded image named `name` (never empty).
  virtual void decode_image(std::span<const std::uint8_t> bytes, const std::string& name,
                            const ImageOptions& options, const ImageSink& sink) const = 0;
  virtual ImageInfo probe_image(std::span<const std::uint8_t> bytes,
                                const std::string& name) const = 0;
  virtual VideoInfo probe_video(const Source& source) const = 0;
  virtual Tensor load_video(const Source& source, const VideoOptions& options,
                            const Allocator& allocator) const = 0;
  virtual AudioInfo probe_audio(const Source& source) const = 0;
  virtual Tensor load_audio(const Source& source, const AudioOptions& options,
                            const Allocator& allocator) const = 0;
  // PNG, WebP or BMP of `rgb` (H x W x 3); JPEG is the core's.
  virtual Bytes encode_image(ImageCodec codec, std::span<const std::uint8_t> rgb, int width,
                             int height) const = 0;
  virtual Bytes make_video(const VideoSpec& spec, const std::string& container) const = 0;
  virtual Bytes make_audio(const AudioSpec& spec) const = 0;
  virtual std::unique_ptr<PluginDemuxer> open_demuxer(const Source& source) const = 0;
  virtual std::unique_ptr<PluginReader> open_reader(const Source& source, ImageOptions options,
                                                    int threads) const = 0;
  // Writes `frame` converted by `options` (no filter) into `out`, a contiguous uint8
  // tensor of its output shape (else invalid_argument).
  virtual void convert_frame(const PluginFrame& frame, const ImageOptions& options,
                             const Tensor& out) const = 0;
};

// The plugin, loaded on the first call. Throws MediaError(unsupported) for `input` (the
// sample that needed it) when it cannot be loaded, naming each path tried and its cause.
const FfmpegPlugin& ffmpeg_plugin(const std::string& input);

// Whether this process has loaded the plugin (for tests and diagnostics).
bool ffmpeg_plugin_loaded() noexcept;

}  // namespace brigade::media::detail

// The plugin's one exported symbol: its FfmpegPlugin when `abi` is its kPluginAbi, else
// nullptr. `host_category` is the caller's media_category(): the plugin's MediaErrors
// carry it, so their error codes compare equal to the core's.
extern "C" const brigade::media::detail::FfmpegPlugin* brigade_media_ffmpeg_plugin(
    int abi, const std::error_category* host_category);
