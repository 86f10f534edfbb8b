// The entry point of libbrigade_media_ffmpeg.so: its FfmpegPlugin (detail/plugin.h). The
// plugin is built with hidden visibility; this function is its one exported symbol.
#include "media/detail/ffmpeg/plugin_impl.h"

namespace brigade::media::ffmpeg {
namespace {

class Plugin final : public detail::FfmpegPlugin {
 public:
  void decode_image(std::span<const std::uint8_t> bytes, const std::string& name,
                    const ImageOptions& options, const detail::ImageSink& sink) const override {
    ffmpeg::decode_image(bytes, name, options, sink);
  }
  ImageInfo probe_image(std::span<const std::uint8_t> bytes,
                        const std::string& name) const override {
    return ffmpeg::probe_image(bytes, name);
  }
  VideoInfo probe_video(const Source& source) const override { return ffmpeg::probe_video(source); }
  Tensor load_video(const Source& source, const VideoOptions& options,
                    const Allocator& allocator) const override {
    return ffmpeg::load_video(source, options, allocator);
  }
  AudioInfo probe_audio(const Source& source) const override { return ffmpeg::probe_audio(source); }
  Tensor load_audio(const Source& source, const AudioOptions& options,
                    const Allocator& allocator) const override {
    return ffmpeg::load_audio(source, options, allocator);
  }
  Bytes encode_image(ImageCodec codec, std::span<const std::uint8_t> rgb, int width,
                     int height) const override {
    return ffmpeg::encode_image(codec, rgb, width, height);
  }
  Bytes make_video(const VideoSpec& spec, const std::string& container) const override {
    return ffmpeg::make_video(spec, container);
  }
  Bytes make_audio(const AudioSpec& spec) const override { return ffmpeg::make_audio(spec); }
  std::unique_ptr<detail::PluginDemuxer> open_demuxer(const Source& source) const override {
    return ffmpeg::open_demuxer(source);
  }
  std::unique_ptr<detail::PluginReader> open_reader(const Source& source, ImageOptions options,
                                                    int threads) const override {
    return ffmpeg::open_reader(source, std::move(options), threads);
  }
  void convert_frame(const detail::PluginFrame& frame, const ImageOptions& options,
                     const Tensor& out) const override {
    ffmpeg::convert_frame(frame, options, out);
  }
};

}  // namespace
}  // namespace brigade::media::ffmpeg

extern "C" __attribute__((visibility("default"))) const brigade::media::detail::FfmpegPlugin*
brigade_media_ffmpeg_plugin(int abi, const std::error_category* host_category) {
  if (abi != brigade::media::detail::kPluginAbi || host_category == nullptr) return nullptr;
  brigade::media::detail::host_media_category.store(host_category);
  static const brigade::media::ffmpeg::Plugin plugin;
  return &plugin;
}
