#include "transport/files/files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace brigade::transport {
namespace {
namespace fs = std::filesystem;

class Files : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("brigade-files-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  static std::vector<std::byte> bytes(const std::string& text) {
    std::vector<std::byte> out;
    for (char c : text) out.push_back(static_cast<std::byte>(c));
    return out;
  }
  static std::string read(const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    return out;
  }
  fs::path dir_;
};

TEST_F(Files, PublishCreatesTheFolderAndReplacesTheFileWhole) {
  const auto target = dir_ / "sub" / "state.bin";
  publish_file(target, bytes("first version"));
  EXPECT_EQ(read(target), "first version");
  publish_file(target, bytes("second"), {.mode = 0600});
  EXPECT_EQ(read(target), "second");
  struct stat st {};
  ASSERT_EQ(::stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(std::vector<std::string>{"state.bin"}, [&] {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_ / "sub")) out.push_back(e.path().filename());
    return out;
  }());  // no temporary file left
}

TEST_F(Files, AFailedPublishNamesThePathAndWhatFailed) {
  publish_file(dir_ / "plain", bytes("a file, not a folder"));
  const auto target = dir_ / "plain" / "sub" / "state.bin";
  try {
    publish_file(target, bytes("new"));
    ADD_FAILURE() << "published below a regular file";
  } catch (const FileError& e) {
    EXPECT_EQ(e.operation(), "cannot create the directory");
    EXPECT_EQ(e.code(), std::errc::not_a_directory) << e.code().message();
    EXPECT_NE(std::string(e.what()).find((dir_ / "plain").string()), std::string::npos) << e.what();
  }
  EXPECT_EQ(read(dir_ / "plain"), "a file, not a folder");
}

TEST_F(Files, ATargetThatIsAFolderFailsAtTheRenameAndLeavesNoTemporary) {
  const auto target = dir_ / "taken";
  fs::create_directories(target / "inside");
  try {
    publish_file(target, bytes("data"));
    ADD_FAILURE() << "replaced a non-empty folder";
  } catch (const FileError& e) {
    EXPECT_EQ(e.operation(), "cannot rename the temporary file into place");
    EXPECT_EQ(e.path(), target);
  }
  EXPECT_EQ(names(), std::vector<std::string>{"taken"});
}

TEST_F(Files, FileDescriptorClosesAndReportsOpenFailures) {
  FileDescriptor missing(dir_ / "none", 0);
  EXPECT_LT(missing.get(), 0);
  publish_file(dir_ / "f", bytes("x"), {.sync = false});
  FileDescriptor fd(dir_ / "f", 0);
  ASSERT_GE(fd.get(), 0);
  FileDescriptor moved = std::move(fd);
  EXPECT_EQ(fd.get(), -1);
  EXPECT_GE(moved.get(), 0);
  moved.close(dir_ / "f");
  EXPECT_EQ(moved.get(), -1);
}

}  // namespace
}  // namespace brigade::transport
