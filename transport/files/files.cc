#include "transport/files/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace brigade::transport {
namespace fs = std::filesystem;

FileError::FileError(fs::path path, std::string operation, int error)
    : std::system_error(error, std::generic_category(), path.string() + ": " + operation),
      path_(std::move(path)),
      operation_(std::move(operation)) {}

FileDescriptor::FileDescriptor(const fs::path& path, int flags, unsigned mode)
    : fd_(::open(path.c_str(), flags, static_cast<mode_t>(mode))) {}

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

FileDescriptor::~FileDescriptor() {
  if (fd_ >= 0) ::close(fd_);
}

int FileDescriptor::release() noexcept { return std::exchange(fd_, -1); }

void FileDescriptor::close(const fs::path& path) {
  if (::close(release()) != 0) throw FileError(path, "cannot close", errno);
}

namespace {

// The temporary file, removed on destruction unless it was renamed into place.
struct Temporary {
  fs::path path;
  ~Temporary() {
    if (!path.empty()) ::unlink(path.c_str());
  }
};

void write_all(const FileDescriptor& fd, const fs::path& path, std::span<const std::byte> bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw FileError(path, "cannot write", errno);
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

void publish_file(const fs::path& target, std::span<const std::byte> bytes,
                  const PublishOptions& options) {
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw FileError(dir, "cannot create the directory", ec.value());
  const fs::path temp_path =
      dir / ("." + target.filename().string() + ".tmp-" + std::to_string(::getpid()));
  FileDescriptor fd(temp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, options.mode);
  if (fd.get() < 0) throw FileError(temp_path, "cannot create", errno);
  Temporary temp{temp_path};
  write_all(fd, temp_path, bytes);
  if (options.sync && ::fsync(fd.get()) != 0) throw FileError(temp_path, "cannot fsync", errno);
  fd.close(temp_path);
  if (::rename(temp_path.c_str(), target.c_str()) != 0)
    throw FileError(target, "cannot rename the temporary file into place", errno);
  temp.path.clear();
  if (!options.sync) return;
  FileDescriptor dir_fd(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd.get() < 0 || ::fsync(dir_fd.get()) != 0)
    throw FileError(dir, "cannot fsync the directory", errno);
}

}  // namespace brigade::transport
