// A test helper: a FUSE file system whose file hung.jpg can be listed and opened but
// whose reads never return — what a hung network file system looks like to a reader —
// and, optionally, a file flaky.jpg whose first reads fail with EAGAIN (a network file
// system that timed out) before it serves a real file's bytes.
//
//   hung_fs MOUNTPOINT MARKER [SOURCE FAILURES]
//     (foreground; mounts MOUNTPOINT/hung.jpg, 4096 bytes, and creates the file MARKER
//      when a read of it begins; with SOURCE, also MOUNTPOINT/flaky.jpg: SOURCE's bytes,
//      its first FAILURES reads answered EAGAIN, each creating MARKER.flaky-N)
//
// Killing the helper aborts the blocked reads (the kernel answers them ENOTCONN); the
// caller then unmounts MOUNTPOINT (umount -l).
#define FUSE_USE_VERSION 31
#include <fcntl.h>
#include <fuse3/fuse.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

constexpr const char* kFile = "/hung.jpg";
constexpr const char* kFlaky = "/flaky.jpg";
const char* g_marker = nullptr;
bool g_has_flaky = false;
std::vector<char> g_flaky;            // flaky.jpg's bytes
std::atomic<int> g_failures_left{0};  // reads of flaky.jpg still to fail
std::atomic<int> g_failed{0};

int get_attributes(const char* path, struct stat* st, fuse_file_info*) {
  std::memset(st, 0, sizeof(*st));
  if (std::strcmp(path, "/") == 0) {
    st->st_mode = S_IFDIR | 0755;
    st->st_nlink = 2;
    return 0;
  }
  const bool flaky = g_has_flaky && std::strcmp(path, kFlaky) == 0;
  if (std::strcmp(path, kFile) != 0 && !flaky) return -ENOENT;
  st->st_mode = S_IFREG | 0444;
  st->st_nlink = 1;
  st->st_size = flaky ? static_cast<off_t>(g_flaky.size()) : 4096;
  return 0;
}

int read_directory(const char* path, void* buffer, fuse_fill_dir_t fill, off_t, fuse_file_info*,
                   fuse_readdir_flags) {
  if (std::strcmp(path, "/") != 0) return -ENOENT;
  fill(buffer, ".", nullptr, 0, fuse_fill_dir_flags{});
  fill(buffer, "..", nullptr, 0, fuse_fill_dir_flags{});
  fill(buffer, kFile + 1, nullptr, 0, fuse_fill_dir_flags{});
  if (g_has_flaky) fill(buffer, kFlaky + 1, nullptr, 0, fuse_fill_dir_flags{});
  return 0;
}

int open_file(const char* path, fuse_file_info* info) {
  if (g_has_flaky && std::strcmp(path, kFlaky) == 0) {
    info->direct_io = 1;  // every read reaches us (a cached page would hide the failures)
    return 0;
  }
  return std::strcmp(path, kFile) == 0 ? 0 : -ENOENT;
}

// flaky.jpg: the first reads fail with EAGAIN, then SOURCE's bytes.
int read_flaky(char* out, size_t size, off_t offset) {
  if (g_failures_left.fetch_sub(1) > 0) {
    const auto marker = std::string(g_marker) + ".flaky-" + std::to_string(++g_failed);
    const int fd = ::open(marker.c_str(), O_CREAT | O_WRONLY, 0600);
    if (fd >= 0) ::close(fd);
    return -EAGAIN;
  }
  if (offset >= static_cast<off_t>(g_flaky.size())) return 0;
  const auto n = std::min(size, g_flaky.size() - static_cast<size_t>(offset));
  std::memcpy(out, g_flaky.data() + offset, n);
  return static_cast<int>(n);
}

int read_file(const char* path, char* out, size_t size, off_t offset, fuse_file_info*) {
  if (g_has_flaky && std::strcmp(path, kFlaky) == 0) return read_flaky(out, size, offset);
  const int fd = ::open(g_marker, O_CREAT | O_WRONLY, 0600);
  if (fd >= 0) ::close(fd);
  for (;;) pause();  // the server never answers
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && argc != 5) return 2;
  g_marker = argv[2];
  if (argc == 5) {
    std::ifstream source(argv[3], std::ios::binary);
    if (!source) return 2;
    g_flaky.assign(std::istreambuf_iterator<char>(source), std::istreambuf_iterator<char>());
    g_failures_left = std::atoi(argv[4]);
    g_has_flaky = true;
  }
  fuse_operations ops{};
  ops.getattr = get_attributes;
  ops.readdir = read_directory;
  ops.open = open_file;
  ops.read = read_file;
  char* args[] = {argv[0], const_cast<char*>("-f"), argv[1]};
  return fuse_main(3, args, &ops, nullptr);
}
