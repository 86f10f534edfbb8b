#include "launch/profile.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "launch/config.h"
#include "launch/loader/demo_dataset.h"
#include "launch/loader/sources.h"
#include "tests/launch/process.h"

namespace brigade::launch::profile_test {  // its own: the tests of one target share a unity batch
namespace {

namespace fs = std::filesystem;

class Profile : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("brigade-profile-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    write_synthetic_images(root_ / "data", {.count = 20, .width = 96, .height = 72, .seed = 3});
    // One corrupt file among them: the read succeeds, the decode fails it.
    std::ofstream(root_ / "data" / "img-99999.jpg") << "not a JPEG";
  }
  void TearDown() override { fs::remove_all(root_); }

  RunCommand config() const {
    RunCommand c;
    apply_flag(c, "--data", (root_ / "data").string());
    apply_flag(c, "--batch-size", "4");
    apply_flag(c, "--size", "32");
    apply_flag(c, "--threads", "2");
    resolve(c, [](const char*) -> const char* { return nullptr; });
    return c;
  }

  fs::path root_;
};

TEST_F(Profile, MeasuresEachStageAtEachConcurrencyAndRecommendsOneOfThem) {
  const auto c = config();
  const auto report = profile_job(c, open_dataset(c), {.samples = 0, .concurrency = {2, 1, 2}});
  EXPECT_EQ(report.samples, 21u);  // the whole (small) dataset
  ASSERT_EQ(report.stages.size(), 2u);
  EXPECT_EQ(report.stages[0].name, "read");
  EXPECT_EQ(report.stages[1].name, "decode");
  for (const auto& s : report.stages) {
    ASSERT_EQ(s.runs.size(), 2u) << s.name;  // sorted, duplicates dropped
    EXPECT_EQ(s.runs[0].concurrency, 1);
    EXPECT_EQ(s.runs[1].concurrency, 2);
    for (const auto& r : s.runs) {
      EXPECT_GT(r.samples_per_s, 0) << s.name;
      EXPECT_GT(r.cpu_ms_per_sample, 0) << s.name;
    }
    // The smallest concurrency within kProfileEnough of the best rate.
    const double best = std::max(s.runs[0].samples_per_s, s.runs[1].samples_per_s);
    EXPECT_EQ(s.recommended, s.runs[0].samples_per_s >= kProfileEnough * best ? 1 : 2);
  }
  EXPECT_EQ(report.stages[0].runs[0].failed, 0u);  // reading the corrupt file works
  EXPECT_EQ(report.stages[1].runs[0].failed, 1u);  // decoding it does not, once per pass
  EXPECT_EQ(report.stages[1].runs[1].failed, 1u);

  // The TOML lines are keys of the job's table, giving the recommendations back.
  RunCommand pasted;
  apply_toml(pasted, report.toml, "profile");
  EXPECT_EQ(pasted.read_concurrency, report.stages[0].recommended);
  EXPECT_EQ(pasted.decode_concurrency, report.stages[1].recommended);
}

TEST_F(Profile, BoundsTheSampleAndRefusesRemoteJobsAndBadConcurrency) {
  auto c = config();
  const auto dataset = open_dataset(c);
  EXPECT_EQ(profile_job(c, dataset, {.samples = 5, .concurrency = {1}}).samples, 5u);
  EXPECT_THROW(profile_job(c, dataset, {.samples = 0, .concurrency = {0}}), ConfigError);
  c.workers = {transport::Endpoint{"127.0.0.1", 1}};
  EXPECT_THROW(profile_job(c, dataset, {.samples = 0, .concurrency = {1}}), ConfigError);
}

// A shard's member is read as its byte range, not as the whole shard. Each shard starts
// with a corrupt member: read right, it fails alone (once per shard and pass); read as
// the whole shard, every sample of the shard decodes the same bytes (all fail or none).
TEST_F(Profile, ReadsEachShardMemberAsItsByteRange) {
  const auto data = root_ / "data", shards = root_ / "shards";
  fs::create_directories(shards);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(data))
    if (e.path().filename() != "img-99999.jpg") names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  ASSERT_EQ(names.size(), 20u);
  for (std::size_t s = 0; s < 2; ++s) {
    const std::string bad = "a-corrupt" + std::to_string(s) + ".jpg";
    std::ofstream(data / bad) << "not a JPEG either";
    std::string cmd = "tar --format=gnu -cf '" +
                      (shards / ("train-" + std::to_string(s) + ".tar")).string() + "' -C '" +
                      data.string() + "' '" + bad + "'";
    for (std::size_t i = s * 10; i < s * 10 + 10; ++i) cmd += " '" + names[i] + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  RunCommand c;
  apply_flag(c, "--shards", (shards / "train-{0..1}.tar").string());
  apply_flag(c, "--batch-size", "4");
  apply_flag(c, "--size", "32");
  apply_flag(c, "--threads", "2");
  resolve(c, [](const char*) -> const char* { return nullptr; });
  const auto report = profile_job(c, open_dataset(c), {.samples = 0, .concurrency = {1}});
  EXPECT_EQ(report.samples, 22u);
  ASSERT_EQ(report.stages.size(), 2u);
  EXPECT_EQ(report.stages[0].runs.at(0).failed, 0u);
  EXPECT_EQ(report.stages[1].runs.at(0).failed, 2u);  // the corrupt members, nothing else
}

TEST_F(Profile, TheCommandPrintsJsonWithTheTomlToPaste) {
  const auto out = root_ / "out.json", err = root_ / "err.txt";
  test::Subprocess p({BRIGADE_BINARY, "profile", "--data", (root_ / "data").string(),
                      "--batch-size", "4", "--size", "32", "--concurrency", "1,2", "--json"},
                     {}, out, err);
  ASSERT_EQ(p.wait_for(std::chrono::minutes(5)), 0) << test::read_text(err);
  const auto j = nlohmann::json::parse(test::read_text(out));
  ASSERT_EQ(j["profile"]["stages"].size(), 2u);
  EXPECT_EQ(j["profile"]["stages"][1]["runs"].size(), 2u);
  EXPECT_NE(j["profile"]["toml"].get<std::string>().find("[stages.decode]"), std::string::npos);

  test::Subprocess bad(
      {BRIGADE_BINARY, "profile", "--data", (root_ / "data").string(), "--concurrency", "1,x"}, {},
      out, err);
  EXPECT_EQ(bad.wait_for(std::chrono::minutes(1)), 2);
  EXPECT_NE(test::read_text(err).find("--concurrency"), std::string::npos);
}

}  // namespace
}  // namespace brigade::launch::profile_test
