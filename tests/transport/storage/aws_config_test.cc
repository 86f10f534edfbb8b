// Credentials, region and endpoint found as the AWS tools find them, from a map standing
// for the environment and files in a temporary HOME.
#include "transport/storage/detail/aws_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

namespace brigade::transport::detail {
namespace {

class AwsConfigTest : public testing::Test {
 protected:
  void SetUp() override {
    home_ = std::filesystem::temp_directory_path() /
            ("brigade-aws-" + std::to_string(::getpid()) + "-" +
             testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(home_ / ".aws");
    env_["HOME"] = home_.string();
  }
  void TearDown() override { std::filesystem::remove_all(home_); }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(home_ / ".aws" / name) << text;
  }
  AwsConfig load() {
    return load_aws_config([this](std::string_view name) -> std::optional<std::string> {
      auto it = env_.find(std::string(name));
      return it == env_.end() ? std::nullopt : std::optional<std::string>(it->second);
    });
  }

  std::filesystem::path home_;
  std::map<std::string, std::string> env_;
};

TEST_F(AwsConfigTest, NothingConfiguredIsAnonymousInUsEast1) {
  AwsConfig config = load();
  EXPECT_FALSE(config.credentials);
  EXPECT_EQ(config.region, "us-east-1");
  EXPECT_EQ(config.endpoint, "");
}

TEST_F(AwsConfigTest, EnvironmentKeysWinOverTheProfile) {
  write("credentials",
        "[default]\naws_access_key_id = FILEKEY\naws_secret_access_key = filesecret\n");
  env_["AWS_ACCESS_KEY_ID"] = "ENVKEY";
  env_["AWS_SECRET_ACCESS_KEY"] = "envsecret";
  env_["AWS_SESSION_TOKEN"] = "envtoken";
  AwsConfig config = load();
  ASSERT_TRUE(config.credentials);
  EXPECT_EQ(config.credentials->access_key_id, "ENVKEY");
  EXPECT_EQ(config.credentials->secret_access_key, "envsecret");
  EXPECT_EQ(config.credentials->session_token, "envtoken");
}

TEST_F(AwsConfigTest, NamedProfileReadsCredentialsAndConfigFiles) {
  write("credentials",
        "[default]\naws_access_key_id = DEFAULTKEY\naws_secret_access_key = d\n"
        "[train]\naws_access_key_id = TRAINKEY\naws_secret_access_key = trainsecret\n"
        "aws_session_token = traintoken\n");
  write("config",
        "[default]\nregion = eu-west-1\n[profile train]\nregion = ap-south-1\n"
        "endpoint_url = http://127.0.0.1:9000\ns3 =\n  addressing_style = path\n");
  env_["AWS_PROFILE"] = "train";
  AwsConfig config = load();
  ASSERT_TRUE(config.credentials);
  EXPECT_EQ(config.credentials->access_key_id, "TRAINKEY");
  EXPECT_EQ(config.credentials->secret_access_key, "trainsecret");
  EXPECT_EQ(config.credentials->session_token, "traintoken");
  EXPECT_EQ(config.region, "ap-south-1");
  EXPECT_EQ(config.endpoint, "http://127.0.0.1:9000");
}

TEST_F(AwsConfigTest, VariablesWinForRegionAndEndpoint) {
  write("config", "[default]\nregion = eu-west-1\nendpoint_url = http://a:1\n");
  env_["AWS_REGION"] = "us-west-2";
  env_["AWS_ENDPOINT_URL"] = "http://b:2";
  AwsConfig config = load();
  EXPECT_EQ(config.region, "us-west-2");
  EXPECT_EQ(config.endpoint, "http://b:2");
  env_["AWS_ENDPOINT_URL_S3"] = "http://c:3";
  EXPECT_EQ(load().endpoint, "http://c:3");
}

// The certificates trusted for https (a private CA): AWS_CA_BUNDLE over the profile's.
TEST_F(AwsConfigTest, CaBundleFromTheVariableOverTheProfile) {
  EXPECT_EQ(load().ca_bundle, "");
  write("config", "[default]\nca_bundle = /etc/profile-ca.pem\n");
  EXPECT_EQ(load().ca_bundle, "/etc/profile-ca.pem");
  env_["AWS_CA_BUNDLE"] = "/etc/env-ca.pem";
  EXPECT_EQ(load().ca_bundle, "/etc/env-ca.pem");
}

TEST_F(AwsConfigTest, FilesNamedByVariables) {
  std::ofstream(home_ / "creds") << "[default]\naws_access_key_id = K\naws_secret_access_key = S\n";
  env_["AWS_SHARED_CREDENTIALS_FILE"] = (home_ / "creds").string();
  AwsConfig config = load();
  ASSERT_TRUE(config.credentials);
  EXPECT_EQ(config.credentials->access_key_id, "K");
}

TEST_F(AwsConfigTest, UnknownProfileIsNamedWithoutAnySecret) {
  write("credentials",
        "[default]\naws_access_key_id = K\naws_secret_access_key = topsecretvalue\n");
  env_["AWS_PROFILE"] = "nosuch";
  try {
    load();
    FAIL() << "no error";
  } catch (const StorageError& error) {
    EXPECT_EQ(error.code(), StorageErrc::bad_request);
    EXPECT_NE(std::string(error.what()).find("'nosuch'"), std::string::npos) << error.what();
    EXPECT_EQ(std::string(error.what()).find("topsecretvalue"), std::string::npos);
  }
}

TEST_F(AwsConfigTest, KeyIdWithoutSecretIsAnError) {
  env_["AWS_ACCESS_KEY_ID"] = "K";
  try {
    load();
    FAIL() << "no error";
  } catch (const StorageError& error) {
    EXPECT_EQ(error.code(), StorageErrc::bad_request);
    EXPECT_NE(std::string(error.what()).find("the environment"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace brigade::transport::detail
