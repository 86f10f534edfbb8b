#pragma once
// Files as the rooms persist them (transport/checkpoint, transport/device's group id
// file) and read secrets (launch/'s token file): a file descriptor owned by RAII, and
// the one atomic publish — write a temporary file beside the target, fsync it, rename
// it into place, fsync the directory — so that a reader sees the old file or the whole
// new one, also after a power loss. A base room of its own (brigade_files: the standard
// library and POSIX only), which any room may use.
//
// ERRORS. FileError (a std::system_error with errno's code) names the path and what
// failed ("cannot fsync the directory"); callers convert it once, at their boundary,
// into their own error.

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <system_error>

namespace brigade::transport {

class FileError : public std::system_error {
 public:
  FileError(std::filesystem::path path, std::string operation, int error);
  const std::filesystem::path& path() const noexcept { return path_; }
  const std::string& operation() const noexcept { return operation_; }  // "cannot create"

 private:
  std::filesystem::path path_;
  std::string operation_;
};

/// An open file descriptor (or -1), closed on destruction.
class FileDescriptor {
 public:
  FileDescriptor() = default;
  explicit FileDescriptor(int fd) noexcept : fd_(fd) {}
  /// open(2); get() < 0 (errno set) when it fails.
  FileDescriptor(const std::filesystem::path& path, int flags, unsigned mode = 0);
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(other.release()) {}
  FileDescriptor& operator=(FileDescriptor&& other) noexcept;
  ~FileDescriptor();
  int get() const noexcept { return fd_; }
  int release() noexcept;
  /// close(2), reporting its error (a deferred write error of NFS, say) as FileError.
  void close(const std::filesystem::path& path);

 private:
  int fd_ = -1;
};

struct PublishOptions {
  unsigned mode = 0644;  // of the new file
  bool sync = true;      // fsync the file and the directory (off: tests writing many)
};

/// Writes `bytes` to `target` atomically (see above) through a temporary file named
/// ".<name>.tmp-<pid>" in the same folder, removed when anything fails; creates the
/// folder if needed. Throws FileError.
void publish_file(const std::filesystem::path& target, std::span<const std::byte> bytes,
                  const PublishOptions& options = {});

}  // namespace brigade::transport
