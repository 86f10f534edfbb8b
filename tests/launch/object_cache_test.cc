// The shard cache under concurrent fetches (launch/loader/object_reads.h, SHARD CACHE),
// against the real S3 server of tests/transport/storage: a bound of one object makes
// every fetch evict the others, and a second "process" sharing the folder (a thread
// here, removing every copy as fast as it can, as another rank's eviction may) removes
// copies the moment they are renamed into place. Every copy handed out must still hold
// the object's bytes (CI once failed with "cannot open" on exactly that).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "launch/loader/object_reads.h"
#include "tests/launch/process.h"
#include "tests/transport/storage/s3_server.h"

namespace brigade::launch::object_cache_test {
namespace {

namespace fs = std::filesystem;

std::string object_bytes(int i) {
  std::string s(48 * 1024, '\0');
  for (std::size_t k = 0; k < s.size(); ++k) s[k] = static_cast<char>((k * 131 + 7 * i) % 251);
  return s;
}

std::string read_all(int fd, std::uint64_t size) {
  std::string s(size, '\0');
  std::size_t done = 0;
  while (done < s.size()) {
    const auto n = ::pread(fd, s.data() + done, s.size() - done, static_cast<off_t>(done));
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  s.resize(done);
  return s;
}

TEST(ObjectCache, CopiesEvictedByAnotherFetcherStillHoldTheirBytes) {
  const fs::path root =
      fs::temp_directory_path() / ("brigade-object-cache-" + std::to_string(::getpid()));
  fs::remove_all(root);
  constexpr int kObjects = 3;
  for (int i = 0; i < kObjects; ++i) {
    fs::create_directories(root / "up" / "cache");
    std::ofstream(root / "up" / "cache" / ("obj-" + std::to_string(i) + ".tar"), std::ios::binary)
        << object_bytes(i);
  }
  fs::create_directories(root / "mirror");
  test::S3Server server(BRIGADE_S3_FIXTURE, root / "mirror", root / "up");
  if (!server.ready()) GTEST_SKIP() << server.why_not();
  // This test's own process reads through the proxy with the fixture's key.
  ::setenv("AWS_ENDPOINT_URL", server["proxy"].c_str(), 1);
  ::setenv("AWS_ACCESS_KEY_ID", server["key_id"].c_str(), 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", server["secret"].c_str(), 1);
  ::setenv("AWS_CONFIG_FILE", "/dev/null", 1);
  ::setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null", 1);
  ::unsetenv("AWS_PROFILE");
  ::unsetenv("AWS_SESSION_TOKEN");
  configure_object_reads(
      {.cache_dir = (root / "cache-dir").string(), .cache_bytes = object_bytes(0).size()});

  constexpr int kThreads = 4, kRounds = 40;
  std::vector<std::string> errors(kThreads);
  std::atomic<bool> done{false};
  std::thread evictor([&] {
    while (!done.load()) {
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(root / "cache-dir", ec))
        if (e.path().filename().string()[0] != '.') fs::remove(e.path(), ec);
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds && errors[t].empty(); ++r) {
        const int i = (t + r) % kObjects;
        const auto url = "s3://" + server["bucket"] + "/cache/obj-" + std::to_string(i) + ".tar";
        try {
          const auto copy = copy_object(url);
          if (read_all(copy.fd.get(), copy.size) != object_bytes(i))
            errors[t] = url + ": the copy's bytes differ";
        } catch (const std::exception& e) {
          errors[t] = url + ": " + e.what();
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  done = true;
  evictor.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(errors[t], "") << "thread " << t;
  fs::remove_all(root);
}

}  // namespace
}  // namespace brigade::launch::object_cache_test
