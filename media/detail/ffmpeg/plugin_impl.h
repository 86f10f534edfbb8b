#pragma once
// Inside libbrigade_media_ffmpeg.so: the implementations behind detail/plugin.h's
// FfmpegPlugin (detail/ffmpeg/plugin.cc binds them), one per public function of video.h,
// audio.h, image.h and synthetic.h that needs FFmpeg. Same contracts as those.

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <system_error>

#include "media/detail/plugin.h"

namespace brigade::media::detail {
// The loading core's media_category(), which the plugin's own copy of errors.cc returns
// once set (errors.cc); set by brigade_media_ffmpeg_plugin.
extern std::atomic<const std::error_category*> host_media_category;
}  // namespace brigade::media::detail

namespace brigade::media::ffmpeg {

VideoInfo probe_video(const Source& source);
Tensor load_video(const Source& source, const VideoOptions& options, const Allocator& allocator);
AudioInfo probe_audio(const Source& source);
Tensor load_audio(const Source& source, const AudioOptions& options, const Allocator& allocator);

void decode_image(std::span<const std::uint8_t> bytes, const std::string& name,
                  const ImageOptions& options, const detail::ImageSink& sink);
ImageInfo probe_image(std::span<const std::uint8_t> bytes, const std::string& name);

Bytes encode_image(ImageCodec codec, std::span<const std::uint8_t> rgb, int width, int height);
Bytes make_video(const VideoSpec& spec, const std::string& container);
Bytes make_audio(const AudioSpec& spec);

std::unique_ptr<detail::PluginDemuxer> open_demuxer(const Source& source);
std::unique_ptr<detail::PluginReader> open_reader(const Source& source, ImageOptions options,
                                                  int threads);
void convert_frame(const detail::PluginFrame& frame, const ImageOptions& options,
                   const Tensor& out);

}  // namespace brigade::media::ffmpeg
