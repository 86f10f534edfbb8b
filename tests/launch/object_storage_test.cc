// End to end: the real `brigade` binary reading its samples from a real S3 server
// (s3rver, started by tests/transport/storage/s3_fixture.py on 127.0.0.1) through the
// fixture's fault-injecting, signature-checking proxy, compared with the same files read
// from local disk. Skipped when s3rver or boto3 is not installed (the fixture says which).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "media/synthetic.h"
#include "tests/transport/storage/s3_server.h"

namespace brigade::launch::object_storage_test {
namespace {

namespace fs = std::filesystem;

struct Result {
  int code = -1;
  std::string out;
  std::string err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// The data set, under root/up (uploaded to the bucket as is, keys relative to it):
//   loose/<class>/[sub/]img-NN.jpg   class folders, one with a subfolder
//   loose/train.jsonl                 a manifest of the loose files (relative paths)
class ObjectStorage : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new fs::path(fs::temp_directory_path() /
                         ("brigade-object-storage-" + std::to_string(::getpid())));
    const auto loose = *root_ / "up" / "loose";
    const std::vector<std::string> files{"ant/img-00.jpg", "ant/img-01.jpg",     "ant/sub/img-02.jpg",
                                         "bee/img-03.jpg", "bee/img-04.jpg",     "cow/img-05.jpg",
                                         "cow/img-06.jpg", "cow/sub/img-07.jpg", "cow/img-08.jpg"};
    std::string manifest;
    for (std::size_t i = 0; i < files.size(); ++i) {
      const auto bytes = media::make_image(media::ImageCodec::jpeg, 40 + 4 * static_cast<int>(i),
                                           32, static_cast<std::uint64_t>(i));
      fs::create_directories((loose / files[i]).parent_path());
      std::ofstream(loose / files[i], std::ios::binary)
          .write(reinterpret_cast<const char*>(bytes.data()),
                 static_cast<std::streamsize>(bytes.size()));
      manifest += "{\"path\": \"" + files[i] + "\", \"label\": " + std::to_string(i % 3) + "}\n";
    }
    write(loose / "train.jsonl", manifest);
    fs::create_directories(*root_ / "mirror");
    server_ = new test::S3Server(BRIGADE_S3_FIXTURE, *root_ / "mirror", *root_ / "up");
  }
  static void TearDownTestSuite() {
    delete server_;
    fs::remove_all(*root_);
    delete root_;
  }

  void SetUp() override {
    if (!server_->ready()) GTEST_SKIP() << server_->why_not();
    dir_ = *root_ / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::create_directories(dir_);
  }

  // `brigade run ARGS` with the fixture's endpoint (the proxy) and key in its environment.
  Result run(const std::string& args, const std::string& name = "run") {
    const auto out = dir_ / (name + ".out"), err = dir_ / (name + ".err");
    const std::string env = "env -u AWS_PROFILE -u AWS_SESSION_TOKEN -u AWS_ENDPOINT_URL_S3 "
                            "AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null "
                            "AWS_ENDPOINT_URL=" +
                            (*server_)["proxy"] + " AWS_ACCESS_KEY_ID=" + (*server_)["key_id"] +
                            " AWS_SECRET_ACCESS_KEY=" + (*server_)["secret"] + " ";
    const std::string cmd = env + "'" BRIGADE_BINARY "' run " + args +
                            " --no-progress --threads 2 --json > '" + out.string() + "' 2> '" +
                            err.string() + "'";
    const int status = std::system(cmd.c_str());
    Result r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }
  std::string digests(const std::string& name) const {
    return " --digests-out '" + (dir_ / name).string() + "'";
  }
  std::string bucket() const { return "s3://" + (*server_)["bucket"]; }
  static fs::path local() { return *root_ / "up"; }

  static inline fs::path* root_ = nullptr;
  static inline test::S3Server* server_ = nullptr;
  fs::path dir_;
};

TEST_F(ObjectStorage, ClassFoldersUnderAPrefixMatchTheLocalFolder) {
  const std::string common = " --labels folder --batch-size 2 --seed 7";
  const auto remote = run("--data " + bucket() + "/loose/" + common + digests("remote"), "remote");
  ASSERT_EQ(remote.code, 0) << remote.err;
  const auto disk = run("--data '" + (local() / "loose").string() + "'" + common + digests("disk"),
                        "disk");
  ASSERT_EQ(disk.code, 0) << disk.err;
  EXPECT_EQ(slurp(dir_ / "remote"), slurp(dir_ / "disk"));
  EXPECT_NE(slurp(dir_ / "remote").find("labels"), std::string::npos);
  const auto json = nlohmann::json::parse(remote.out);
  EXPECT_EQ(json["failed"], 0);
  EXPECT_EQ(json["samples"], 9);
  EXPECT_EQ(json["classes"], (nlohmann::json{{"ant", 3}, {"bee", 2}, {"cow", 4}}));
  // One listing, one GET per sample, through the one host (the proxy).
  EXPECT_EQ(json["object_storage"]["requests"], 10);
  EXPECT_EQ(json["object_storage"]["hosts"][(*server_)["proxy"]]["requests"], 10);
  // The secret is nowhere in what the run printed.
  EXPECT_EQ(remote.err.find("secret_access_key"), std::string::npos);
}

TEST_F(ObjectStorage, ARemoteManifestResolvesItsRelativePathsAgainstItsUrl) {
  const std::string common = " --batch-size 3 --no-shuffle";
  const auto remote =
      run("--manifest " + bucket() + "/loose/train.jsonl" + common + digests("remote"), "remote");
  ASSERT_EQ(remote.code, 0) << remote.err;
  const auto disk = run("--manifest '" + (local() / "loose" / "train.jsonl").string() + "'" +
                            common + digests("disk"),
                        "disk");
  ASSERT_EQ(disk.code, 0) << disk.err;
  EXPECT_EQ(slurp(dir_ / "remote"), slurp(dir_ / "disk"));
  EXPECT_EQ(nlohmann::json::parse(remote.out)["failed"], 0);
}

TEST_F(ObjectStorage, AMissingObjectFailsItsSampleNamedWithItsUrlAndTheServersCode) {
  const auto list = dir_ / "list.txt";
  const std::string missing = bucket() + "/loose/ant/no-such.jpg";
  write(list, bucket() + "/loose/ant/img-00.jpg\n" + missing + "\n" + bucket() +
                  "/loose/bee/img-03.jpg\n");
  const auto r = run("--list '" + list.string() + "' --no-shuffle --max-failures 1");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["failed"], 1);
  EXPECT_EQ(json["samples"], 2);
  EXPECT_NE(r.err.find(missing), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("NoSuchKey"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("404"), std::string::npos) << r.err;
  EXPECT_EQ(json["object_storage"]["hosts"][(*server_)["proxy"]]["failures"], 1);
}

TEST_F(ObjectStorage, ABurstOf503IsRetriedAndNoSampleFails) {
  server_->arm("fail 5");
  const auto r = run("--data " + bucket() +
                     "/loose/ --no-shuffle --read-concurrency 2 --read-retries 10" +
                     digests("remote"));
  ASSERT_EQ(r.code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["failed"], 0);
  EXPECT_EQ(json["samples"], 9);
  EXPECT_EQ(json["object_storage"]["retries"], 5);
  EXPECT_EQ(json["object_storage"]["requests"], 10 + 5);
  const auto disk =
      run("--data '" + (local() / "loose").string() + "' --no-shuffle" + digests("disk"), "disk");
  ASSERT_EQ(disk.code, 0) << disk.err;
  EXPECT_EQ(slurp(dir_ / "remote"), slurp(dir_ / "disk"));
}

}  // namespace
}  // namespace brigade::launch::object_storage_test
