#pragma once
// Demuxing from a Source: a file path, or memory through a custom AVIOContext.

#include <optional>
#include <string>

extern "C" {
#include <libavformat/avformat.h>
}

#include "media/detail/ffmpeg/memory_io.h"
#include "media/detail/ffmpeg/wrappers.h"
#include "media/source.h"

namespace brigade::media::detail {

// Routes FFmpeg's log to spdlog (once per process); FFmpeg's warnings become
// debug messages because every failure that matters is reported as MediaError.
void init_ffmpeg_logging();

// Owns an opened AVFormatContext (and, for memory input, its AVIOContext).
// Not thread-safe; a Source's bytes must outlive it.
class Input {
 public:
  // find_stream_info: run avformat_find_stream_info (needed for raw streams).
  Input(const Source& source, bool find_stream_info);
  ~Input();
  Input(const Input&) = delete;
  Input& operator=(const Input&) = delete;

  AVFormatContext* get() const { return fmt_.get(); }
  const std::string& name() const { return name_; }
  // The best stream of `type`; MediaError(unsupported) naming the input if none.
  int find_stream(AVMediaType type) const;
  // Reads packets (and decodes a few) until every stream's parameters are
  // known: avformat_find_stream_info. Once, before reading packets.
  void find_stream_info();
  // Whether the container's header alone describes its one video stream as
  // find_stream_info would (MP4/MOV with size, frame count and rate, read
  // from the moov atom): find_stream_info would only cost a decode.
  bool header_describes_video() const;

 private:
  std::string name_;
  std::optional<MemoryIO> memory_;  // for memory sources; outlives fmt_
  InputFormatContextPtr fmt_;
};

// Opens a decoder for stream `index` of `input`; threads = 1 turns codec
// threading off (0 = FFmpeg's automatic choice).
CodecContextPtr open_decoder(const Input& input, int index, int threads);
// Opens a decoder for a codec without a container (a whole image as one packet).
CodecContextPtr open_decoder(AVCodecID id, std::string_view name, int threads);

}  // namespace brigade::media::detail
