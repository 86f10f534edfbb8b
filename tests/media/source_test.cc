#include "media/source.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace brigade::media {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (name + "." + std::to_string(::getpid())))
      .string();
}

// A sample's bytes stay in memory until its batch is decoded: a buffer grown past the
// file's size (it had twice the capacity) doubled what every sample in flight held.
TEST(Source, ReadFileHoldsExactlyTheFileSize) {
  const std::string path = temp_path("brigade_source_test.bin");
  std::vector<std::uint8_t> bytes(61'000);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(i * 7);
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  }
  const auto read = read_file(path);
  std::filesystem::remove(path);
  EXPECT_EQ(read, bytes);
  EXPECT_EQ(read.capacity(), bytes.size());
}

// A regular file whose size fstat does not know (0 here) is still read to its end.
TEST(Source, ReadFileReadsPastAZeroStatSize) {
  const auto status = read_file("/proc/self/status");
  const std::string text(status.begin(), status.end());
  EXPECT_NE(text.find("VmRSS"), std::string::npos);
}

TEST(Source, ReadFileOfAnEmptyFileIsEmpty) {
  const std::string path = temp_path("brigade_source_test_empty.bin");
  { std::ofstream out(path, std::ios::binary); }
  const auto read = read_file(path);
  std::filesystem::remove(path);
  EXPECT_TRUE(read.empty());
}

}  // namespace
}  // namespace brigade::media
