// synthetic.h's encoders on the core's side: JPEG here (synthetic_content.cc), the others
// in the FFmpeg plugin (detail/plugin.h), loaded by their first call.
#include "media/synthetic.h"

#include "media/detail/plugin.h"
#include "media/errors.h"

namespace brigade::media {
namespace {

const char* default_container(VideoCodec c) {
  switch (c) {
    case VideoCodec::h264:
    case VideoCodec::hevc:
    case VideoCodec::mpeg4:
      return "mp4";
    case VideoCodec::vp9:
    case VideoCodec::av1:
      return "webm";
    case VideoCodec::mjpeg:
      return "avi";
  }
  return "";
}

}  // namespace

Bytes make_image(ImageCodec codec, int width, int height, std::uint64_t seed, int quality) {
  const Bytes rgb = synthetic_rgb(width, height, seed);
  if (codec == ImageCodec::jpeg) return encode_jpeg(rgb, width, height, quality);
  return detail::ffmpeg_plugin("synthetic image").encode_image(codec, rgb, width, height);
}

Bytes make_video(const VideoSpec& spec) { return make_video(spec, default_container(spec.codec)); }

Bytes make_video(const VideoSpec& spec, const std::string& container) {
  return detail::ffmpeg_plugin("synthetic video").make_video(spec, container);
}

Bytes make_audio(const AudioSpec& spec) {
  return detail::ffmpeg_plugin("synthetic audio").make_audio(spec);
}

}  // namespace brigade::media
