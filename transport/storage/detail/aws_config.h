#pragma once
// Where the AWS tools find credentials, region and endpoint (object_store.h's file
// comment has the order), as a pure function of an environment lookup, so that tests
// give it a map and a temporary HOME instead of the process's environment.

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "transport/storage/object_store.h"

namespace brigade::transport::detail {

using EnvironmentLookup = std::function<std::optional<std::string>(std::string_view name)>;

struct AwsConfig {
  std::optional<Credentials> credentials;  // none: no keys anywhere (anonymous requests)
  std::string region = "us-east-1";
  std::string endpoint;   // empty: AWS itself
  std::string ca_bundle;  // AWS_CA_BUNDLE or the profile's ca_bundle; empty: the system's
};

/// Reads the variables, then AWS_PROFILE's sections of the shared credentials and config
/// files (HOME/.aws/… unless AWS_SHARED_CREDENTIALS_FILE/AWS_CONFIG_FILE say otherwise).
/// A missing file is no error; AWS_PROFILE naming a profile neither file has is, as is a
/// key id without a secret. Throws StorageError(bad_request), naming the profile or the
/// variable, never a value.
AwsConfig load_aws_config(const EnvironmentLookup& getenv);
/// The process's environment (std::getenv).
AwsConfig load_aws_config();

}  // namespace brigade::transport::detail
