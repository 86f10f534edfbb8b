// A test helper: a FUSE file system whose one file can be listed and opened but whose
// reads never return — what a hung network file system looks like to a reader.
//
//   hung_fs MOUNTPOINT MARKER   (foreground; mounts MOUNTPOINT/hung.jpg, 4096 bytes;
//                                creates the file MARKER when a read begins)
//
// Killing the helper aborts the blocked reads (the kernel answers them ENOTCONN); the
// caller then unmounts MOUNTPOINT (umount -l).
#define FUSE_USE_VERSION 31
#include <fcntl.h>
#include <fuse3/fuse.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace {

constexpr const char* kFile = "/hung.jpg";
const char* g_marker = nullptr;

int get_attributes(const char* path, struct stat* st, fuse_file_info*) {
  std::memset(st, 0, sizeof(*st));
  if (std::strcmp(path, "/") == 0) {
    st->st_mode = S_IFDIR | 0755;
    st->st_nlink = 2;
    return 0;
  }
  if (std::strcmp(path, kFile) != 0) return -ENOENT;
  st->st_mode = S_IFREG | 0444;
  st->st_nlink = 1;
  st->st_size = 4096;
  return 0;
}

int read_directory(const char* path, void* buffer, fuse_fill_dir_t fill, off_t, fuse_file_info*,
                   fuse_readdir_flags) {
  if (std::strcmp(path, "/") != 0) return -ENOENT;
  fill(buffer, ".", nullptr, 0, fuse_fill_dir_flags{});
  fill(buffer, "..", nullptr, 0, fuse_fill_dir_flags{});
  fill(buffer, kFile + 1, nullptr, 0, fuse_fill_dir_flags{});
  return 0;
}

int open_file(const char* path, fuse_file_info*) {
  return std::strcmp(path, kFile) == 0 ? 0 : -ENOENT;
}

int read_file(const char*, char*, size_t, off_t, fuse_file_info*) {
  const int fd = ::open(g_marker, O_CREAT | O_WRONLY, 0600);
  if (fd >= 0) ::close(fd);
  for (;;) pause();  // the server never answers
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  g_marker = argv[2];
  fuse_operations ops{};
  ops.getattr = get_attributes;
  ops.readdir = read_directory;
  ops.open = open_file;
  ops.read = read_file;
  char* args[] = {argv[0], const_cast<char*>("-f"), argv[1]};
  return fuse_main(3, args, &ops, nullptr);
}
