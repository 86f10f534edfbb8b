#pragma once
// Muxing into memory (for the synthetic media generator), through MemoryIO.

#include <cstdint>
#include <string>
#include <vector>

extern "C" {
#include <libavformat/avformat.h>
}

#include "media/detail/ffmpeg/memory_io.h"
#include "media/detail/ffmpeg/wrappers.h"

namespace brigade::media::detail {

class MemoryOutput {
 public:
  // `format`: a muxer name ("mp4", "webm", "wav", "ipod", "flac", "mp3", "ogg").
  MemoryOutput(const char* format, std::string name);
  ~MemoryOutput();
  MemoryOutput(const MemoryOutput&) = delete;
  MemoryOutput& operator=(const MemoryOutput&) = delete;

  AVFormatContext* get() const { return fmt_.get(); }
  // Adds a stream for `encoder` (set up, not yet opened: this sets
  // AV_CODEC_FLAG_GLOBAL_HEADER where the muxer needs it).
  void prepare_encoder(AVCodecContext* encoder) const;
  // Adds a stream whose parameters come from the opened `encoder`.
  AVStream* add_stream(const AVCodecContext* encoder);
  void write_header();
  // Sends `frame` (nullptr flushes) to `encoder` and muxes every packet it gives.
  void encode(AVCodecContext* encoder, AVStream* stream, const AVFrame* frame);
  // Writes the trailer and returns the file's bytes.
  std::vector<std::uint8_t> finish();

 private:
  std::string name_;
  MemoryIO memory_;  // outlives fmt_
  OutputFormatContextPtr fmt_;
  PacketPtr packet_;
};

}  // namespace brigade::media::detail
