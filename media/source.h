#pragma once
// Where media bytes come from: a file path, or bytes already in memory.
//
// A memory Source does not own its bytes: they must stay valid and unchanged
// for the duration of every call that reads the Source (remote reads deliver a
// buffer; FFmpeg reads it through a custom AVIOContext, never a temporary file).
// The name of a memory Source appears in error messages ("s3://bucket/key",
// "sample 123"); a file Source is named by its path.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace brigade::media {

class Source {
 public:
  static Source file(std::string path) { return Source(std::move(path), {}, true); }
  static Source memory(std::span<const std::uint8_t> bytes, std::string name = "<memory>") {
    return Source(std::move(name), bytes, false);
  }
  static Source memory(const std::vector<std::uint8_t>& bytes, std::string name = "<memory>") {
    return memory(std::span<const std::uint8_t>(bytes), std::move(name));
  }

  bool is_file() const { return is_file_; }
  const std::string& name() const { return name_; }               // the path, for a file
  std::span<const std::uint8_t> bytes() const { return bytes_; }  // empty for a file

 private:
  Source(std::string name, std::span<const std::uint8_t> bytes, bool is_file)
      : name_(std::move(name)), bytes_(bytes), is_file_(is_file) {}
  std::string name_;
  std::span<const std::uint8_t> bytes_;
  bool is_file_;
};

// The largest file read_file() reads (4 GiB): a mistaken path to a disk image must
// not exhaust memory.
inline constexpr std::int64_t kMaxFileBytes = std::int64_t(1) << 32;

// Reads a whole regular file into memory. Throws MediaError: not_found; io (permission,
// I/O error, or not a regular file — a directory, FIFO, socket or device, said in the
// cause, rejected without reading or waiting for a FIFO's writer); unsupported (larger
// than kMaxFileBytes); unavailable (EAGAIN, EINTR, ETIMEDOUT: a retry may help).
std::vector<std::uint8_t> read_file(const std::string& path);

// Reads exactly `size` bytes of the regular file `path` from byte `offset` (pread: a
// member of a tar shard), at most kMaxFileBytes. Throws MediaError as read_file() does,
// and io when the file ends before offset + size (a shard truncated or rewritten since
// it was indexed), saying how many bytes were there.
std::vector<std::uint8_t> read_file_range(const std::string& path, std::uint64_t offset,
                                          std::uint64_t size);

}  // namespace brigade::media
