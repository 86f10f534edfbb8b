#pragma once
// Bytes in memory behind a seekable custom AVIOContext, for demuxing a
// Source::memory and muxing the synthetic generator's files (MP4 writes its
// moov atom after the samples, so the writer seeks back).

#include <cstdint>
#include <span>
#include <vector>

#include "media/detail/ffmpeg/wrappers.h"

namespace brigade::media::detail {

// Not copyable or movable: the AVIOContext points at this object. Give the
// context to one AVFormatContext (as its pb, with AVFMT_FLAG_CUSTOM_IO) and
// free that format context before this object. Not thread-safe.
class MemoryIO {
 public:
  // Reads `bytes`, which are not copied and must outlive this object.
  explicit MemoryIO(std::span<const std::uint8_t> bytes);
  // Writes into a buffer that grows as needed (a seek past the end and a
  // write there leave zeros in the gap).
  MemoryIO();
  MemoryIO(const MemoryIO&) = delete;
  MemoryIO& operator=(const MemoryIO&) = delete;

  AVIOContext* get() const { return io_.get(); }
  // Writer: flushes the context and hands over the bytes written.
  std::vector<std::uint8_t> take();

 private:
  static int read(void* opaque, std::uint8_t* buf, int size);
  static int write(void* opaque, std::uint8_t* buf, int size);
  static std::int64_t seek(void* opaque, std::int64_t offset, int whence);
  std::int64_t size() const;

  std::span<const std::uint8_t> in_;
  std::vector<std::uint8_t> out_;
  std::int64_t pos_ = 0;
  bool writing_;
  IOContextPtr io_;
};

}  // namespace brigade::media::detail
