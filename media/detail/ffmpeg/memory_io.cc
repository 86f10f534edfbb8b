#include "media/detail/ffmpeg/memory_io.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>

extern "C" {
#include <libavformat/avio.h>
#include <libavutil/error.h>
#include <libavutil/mem.h>
}

namespace brigade::media::detail {
namespace {

constexpr int kIOBufferSize = 65536;

IOContextPtr make_context(bool writable, void* opaque, int (*read)(void*, std::uint8_t*, int),
                          int (*write)(void*, std::uint8_t*, int),
                          std::int64_t (*seek)(void*, std::int64_t, int)) {
  auto* buffer = static_cast<std::uint8_t*>(av_malloc(kIOBufferSize));
  if (buffer == nullptr) throw std::bad_alloc();
  IOContextPtr io(
      avio_alloc_context(buffer, kIOBufferSize, writable ? 1 : 0, opaque, read, write, seek));
  if (!io) {
    av_free(buffer);
    throw std::bad_alloc();
  }
  return io;
}

}  // namespace

MemoryIO::MemoryIO(std::span<const std::uint8_t> bytes)
    : in_(bytes), writing_(false), io_(make_context(false, this, read, nullptr, seek)) {}

MemoryIO::MemoryIO() : writing_(true), io_(make_context(true, this, nullptr, write, seek)) {}

std::vector<std::uint8_t> MemoryIO::take() {
  avio_flush(io_.get());
  return std::move(out_);
}

std::int64_t MemoryIO::size() const {
  return static_cast<std::int64_t>(writing_ ? out_.size() : in_.size());
}

int MemoryIO::read(void* opaque, std::uint8_t* buf, int size) {
  auto* m = static_cast<MemoryIO*>(opaque);
  const std::int64_t left = m->size() - m->pos_;
  if (left <= 0) return AVERROR_EOF;
  const int n = static_cast<int>(std::min<std::int64_t>(left, size));
  std::memcpy(buf, m->in_.data() + m->pos_, static_cast<std::size_t>(n));
  m->pos_ += n;
  return n;
}

int MemoryIO::write(void* opaque, std::uint8_t* buf, int size) {
  auto* m = static_cast<MemoryIO*>(opaque);
  const auto end = static_cast<std::size_t>(m->pos_) + static_cast<std::size_t>(size);
  if (m->out_.size() < end) m->out_.resize(end);
  std::memcpy(m->out_.data() + m->pos_, buf, static_cast<std::size_t>(size));
  m->pos_ += size;
  return size;
}

std::int64_t MemoryIO::seek(void* opaque, std::int64_t offset, int whence) {
  auto* m = static_cast<MemoryIO*>(opaque);
  const std::int64_t size = m->size();
  switch (whence & ~AVSEEK_FORCE) {
    case AVSEEK_SIZE:
      return size;
    case SEEK_SET:
      break;
    case SEEK_CUR:
      offset += m->pos_;
      break;
    case SEEK_END:
      offset += size;
      break;
    default:
      return AVERROR(EINVAL);
  }
  // A reader stays within its bytes; a writer may leave a gap to fill later.
  if (offset < 0 || (!m->writing_ && offset > size)) return AVERROR(EINVAL);
  m->pos_ = offset;
  return offset;
}

}  // namespace brigade::media::detail
