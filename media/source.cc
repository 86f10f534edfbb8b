#include "media/source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "media/errors.h"

namespace brigade::media {
namespace {

struct Fd {
  explicit Fd(int d) : fd(d) {}
  Fd(Fd&& o) noexcept : fd(std::exchange(o.fd, -1)) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  int fd = -1;
};

[[noreturn]] void throw_errno(int err, const std::string& path, const char* doing) {
  ErrorCode code = err == ENOENT || err == ENOTDIR                     ? ErrorCode::not_found
                   : err == EAGAIN || err == EINTR || err == ETIMEDOUT ? ErrorCode::unavailable
                                                                       : ErrorCode::io;
  throw MediaError(code, path, std::string(doing) + ": " + std::strerror(err));
}

const char* file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISCHR(mode)) return "a character device";
  return "not a regular file";
}

// Opens `path` for reading if it is a regular file; `st` is its status.
Fd open_regular(const std::string& path, struct stat& st) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; the type is checked on the
  // descriptor itself (no window between a stat and the open).
  Fd f{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  if (f.fd < 0) throw_errno(errno, path, "cannot open");
  if (::fstat(f.fd, &st) != 0) throw_errno(errno, path, "cannot stat");
  if (!S_ISREG(st.st_mode)) {
    throw MediaError(ErrorCode::io, path,
                     std::string("not a regular file: ") + file_type_name(st.st_mode));
  }
  return f;
}

}  // namespace

std::vector<std::uint8_t> read_file(const std::string& path) {
  struct stat st {};
  Fd f = open_regular(path, st);
  if (st.st_size > kMaxFileBytes) {
    throw MediaError(ErrorCode::unsupported, path,
                     "file of " + std::to_string(st.st_size) + " bytes is larger than the limit (" +
                         std::to_string(kMaxFileBytes) + ")");
  }
  const int flags = ::fcntl(f.fd, F_GETFL);
  if (flags >= 0) ::fcntl(f.fd, F_SETFL, flags & ~O_NONBLOCK);
  std::vector<std::uint8_t> out(static_cast<std::size_t>(st.st_size));
  std::size_t filled = 0;
  for (;;) {
    if (filled == out.size()) {
      // All fstat promised is read: look for more in a small buffer of our own, so that
      // the usual file (no more bytes) keeps a buffer of exactly its size. (Growing
      // `out` here had every sample's bytes held at twice their size, plus a copy,
      // until its batch was decoded: a fifth of `brigade run`'s peak memory.)
      std::uint8_t probe[4096];
      const ssize_t n = ::read(f.fd, probe, sizeof(probe));
      if (n < 0) {
        if (errno == EINTR) continue;
        throw_errno(errno, path, "cannot read");
      }
      if (n == 0) break;
      // The file grew since fstat (or st_size was 0 for a special file system): read on.
      if (out.size() >= static_cast<std::size_t>(kMaxFileBytes)) {
        throw MediaError(ErrorCode::unsupported, path, "file grew beyond the size limit");
      }
      out.resize(std::max<std::size_t>(out.size() * 2, 65536));
      std::memcpy(out.data() + filled, probe, static_cast<std::size_t>(n));
      filled += static_cast<std::size_t>(n);
      continue;
    }
    const ssize_t n = ::read(f.fd, out.data() + filled, out.size() - filled);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(errno, path, "cannot read");
    }
    if (n == 0) break;
    filled += static_cast<std::size_t>(n);
  }
  out.resize(filled);
  return out;
}

std::vector<std::uint8_t> read_file_range(const std::string& path, std::uint64_t offset,
                                          std::uint64_t size) {
  if (size > static_cast<std::uint64_t>(kMaxFileBytes)) {
    throw MediaError(ErrorCode::unsupported, path,
                     "member of " + std::to_string(size) + " bytes is larger than the limit (" +
                         std::to_string(kMaxFileBytes) + ")");
  }
  struct stat st {};
  Fd f = open_regular(path, st);
  std::vector<std::uint8_t> out(static_cast<std::size_t>(size));
  std::size_t filled = 0;
  while (filled < out.size()) {
    const ssize_t n = ::pread(f.fd, out.data() + filled, out.size() - filled,
                              static_cast<off_t>(offset + filled));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(errno, path, "cannot read");
    }
    if (n == 0) {
      throw MediaError(ErrorCode::io, path,
                       "file ends within bytes " + std::to_string(offset) + "-" +
                           std::to_string(offset + size) + " (" + std::to_string(filled) + " of " +
                           std::to_string(size) +
                           " read): truncated or changed since it was indexed");
    }
    filled += static_cast<std::size_t>(n);
  }
  return out;
}

}  // namespace brigade::media
