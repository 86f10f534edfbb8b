// audio.h on the core's side: every call goes to the FFmpeg plugin (detail/plugin.h).
#include "media/audio.h"

#include "media/detail/plugin.h"

namespace brigade::media {

AudioInfo probe_audio(const Source& source) {
  return detail::ffmpeg_plugin(source.name()).probe_audio(source);
}

Tensor load_audio(const Source& source, const AudioOptions& options, const Allocator& allocator) {
  return detail::ffmpeg_plugin(source.name()).load_audio(source, options, allocator);
}

}  // namespace brigade::media
