#include "media/source.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "media/errors.h"

namespace brigade::media {
namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

[[noreturn]] void throw_errno(int err, const std::string& path, const char* doing) {
  ErrorCode code = err == ENOENT || err == ENOTDIR                     ? ErrorCode::not_found
                   : err == EAGAIN || err == EINTR || err == ETIMEDOUT ? ErrorCode::unavailable
                                                                       : ErrorCode::io;
  throw MediaError(code, path, std::string(doing) + ": " + std::strerror(err));
}

}  // namespace

std::vector<std::uint8_t> read_file(const std::string& path) {
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (!f) throw_errno(errno, path, "cannot open");
  std::vector<std::uint8_t> out;
  if (std::fseek(f.get(), 0, SEEK_END) == 0) {
    long size = std::ftell(f.get());
    if (size > 0) out.reserve(static_cast<std::size_t>(size));
    std::rewind(f.get());
  }
  std::uint8_t buf[65536];
  while (true) {
    std::size_t n = std::fread(buf, 1, sizeof(buf), f.get());
    out.insert(out.end(), buf, buf + n);
    if (n < sizeof(buf)) {
      if (std::ferror(f.get())) throw_errno(errno, path, "cannot read");
      break;
    }
  }
  return out;
}

}  // namespace brigade::media
