#pragma once

// The command line of `brigade run`: its flags are the job description's keys
// (launch/loader/job_settings.h, the key table shared with the TOML file and the Python
// Loader), spelled as flags, so both accept the same keys, check them the same way and
// name them the same way in errors.
//
//   RunConfig config;
//   if (!file.empty()) apply_toml_file(config, file);            // `brigade run CONFIG.toml`
//   for (auto& [flag, value] : given_flags) apply_flag(config, flag, value);  // flags win
//   resolve(config, getenv);                                      // env defaults, checks
//
// ERRORS. A bad flag is a ConfigError naming it: "--kind: expected one of image, video,
// got 'audio'"; `brigade run` exits with status 2 on a ConfigError.
//
// THREADING. Plain functions over values; no shared state.

#include <string>
#include <string_view>
#include <vector>

#include "launch/loader/job_config.h"
#include "launch/loader/job_settings.h"

namespace brigade::launch {

/// Applies one flag given on the command line: `flag` is its name with dashes
/// ("--batch-size", "--no-shuffle"), `value` its text ("" for switches).
/// Throws ConfigError naming the flag for an unknown flag or a bad value.
void apply_flag(RunConfig& config, std::string_view flag, std::string_view value);

/// The value-taking flags and the switches that apply_flag() accepts, with help text.
struct FlagInfo {
  std::string_view flag;
  std::string_view help;
  bool takes_value = true;
  bool negatable = false;  // also "--no-<name>"
  std::string metavar{};   // for help: "N", "DIR", "image|video", …
};
std::vector<FlagInfo> run_flags();

}  // namespace brigade::launch
