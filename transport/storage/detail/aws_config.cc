#include "transport/storage/detail/aws_config.h"

#include <cstdlib>
#include <fstream>
#include <map>

namespace brigade::transport::detail {
namespace {

using Section = std::map<std::string, std::string>;

std::string trim(std::string_view text) {
  auto begin = text.find_first_not_of(" \t\r");
  if (begin == std::string_view::npos) return {};
  auto end = text.find_last_not_of(" \t\r");
  return std::string(text.substr(begin, end - begin + 1));
}

// One section of an INI file ("[name]"), or nullopt when the file or section is absent.
// Nested keys (an `s3 =` block's indented lines) are skipped.
std::optional<Section> read_section(const std::string& path, const std::string& name) {
  std::ifstream file(path);
  if (!file) return std::nullopt;
  std::optional<Section> found;
  bool inside = false;
  for (std::string line; std::getline(file, line);) {
    std::string text = trim(line);
    if (text.empty() || text[0] == '#' || text[0] == ';') continue;
    if (text.front() == '[' && text.back() == ']') {
      inside = trim(text.substr(1, text.size() - 2)) == name;
      if (inside && !found) found.emplace();
      continue;
    }
    auto equals = text.find('=');
    if (!inside || equals == std::string::npos || line[0] == ' ' || line[0] == '\t') continue;
    (*found)[trim(text.substr(0, equals))] = trim(text.substr(equals + 1));
  }
  return found;
}

std::string get(const Section& section, const std::string& key) {
  auto it = section.find(key);
  return it == section.end() ? std::string() : it->second;
}

[[noreturn]] void config_error(const std::string& what) {
  throw StorageError(StorageErrc::bad_request, {}, what);
}

std::optional<Credentials> credentials_of(std::string id, std::string secret, std::string token,
                                          const std::string& where) {
  if (id.empty() && secret.empty()) return std::nullopt;
  if (id.empty() || secret.empty()) {
    config_error(where + " sets only one of the access key id and the secret access key");
  }
  return Credentials{std::move(id), std::move(secret), std::move(token)};
}

}  // namespace

AwsConfig load_aws_config(const EnvironmentLookup& getenv) {
  auto env = [&](std::string_view name) { return getenv(name).value_or(std::string()); };
  AwsConfig config;
  std::string home = env("HOME");
  std::string profile = env("AWS_PROFILE");
  bool named = !profile.empty();
  if (!named) profile = "default";
  std::string credentials_file = env("AWS_SHARED_CREDENTIALS_FILE");
  if (credentials_file.empty() && !home.empty()) credentials_file = home + "/.aws/credentials";
  std::string config_file = env("AWS_CONFIG_FILE");
  if (config_file.empty() && !home.empty()) config_file = home + "/.aws/config";

  auto from_credentials = read_section(credentials_file, profile);
  auto from_config =
      read_section(config_file, profile == "default" ? profile : "profile " + profile);
  if (named && !from_credentials && !from_config) {
    config_error("AWS_PROFILE names profile '" + profile + "', which neither " + credentials_file +
                 " nor " + config_file + " has");
  }
  Section files;  // the credentials file wins over the config file
  if (from_config) files = *from_config;
  if (from_credentials) {
    for (auto& [key, value] : *from_credentials) files[key] = value;
  }

  config.credentials = credentials_of(env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY"),
                                      env("AWS_SESSION_TOKEN"), "the environment");
  if (!config.credentials) {
    config.credentials =
        credentials_of(get(files, "aws_access_key_id"), get(files, "aws_secret_access_key"),
                       get(files, "aws_session_token"), "profile '" + profile + "'");
  }
  for (const std::string& value :
       {env("AWS_REGION"), env("AWS_DEFAULT_REGION"), get(files, "region")}) {
    if (!value.empty()) {
      config.region = value;
      break;
    }
  }
  for (const std::string& value :
       {env("AWS_ENDPOINT_URL_S3"), env("AWS_ENDPOINT_URL"), get(files, "endpoint_url")}) {
    if (!value.empty()) {
      config.endpoint = value;
      break;
    }
  }
  config.ca_bundle = env("AWS_CA_BUNDLE");
  if (config.ca_bundle.empty()) config.ca_bundle = get(files, "ca_bundle");
  return config;
}

AwsConfig load_aws_config() {
  return load_aws_config([](std::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string(name).c_str());
    return value ? std::optional<std::string>(value) : std::nullopt;
  });
}

}  // namespace brigade::transport::detail
