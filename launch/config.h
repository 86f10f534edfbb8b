#pragma once

// The command line of `brigade run`: its flags are the job description's keys
// (launch/loader/job_settings.h, the key table shared with the TOML file and the Python
// Loader), spelled as flags, so both accept the same keys, check them the same way and
// name them the same way in errors.
//
//   RunCommand config;
//   if (!file.empty()) apply_toml_file(config, file);            // `brigade run CONFIG.toml`
//   for (auto& [flag, value] : given_flags) apply_flag(config, flag, value);  // flags win
//   resolve(config, getenv);                                      // env defaults, checks
//
// A RunCommand is the job's description (RunConfig, for the Job) and what only the
// command line reads (RunOutput: its output files and reports), filled from the same
// keys: the key table hands the command line's keys to RunOutput (job_settings.h KEYS).
//
// ERRORS. A bad flag is a ConfigError naming it: "--kind: expected one of image, video,
// got 'audio'"; `brigade run` exits with status 2 on a ConfigError.
//
// THREADING. Plain functions over values; no shared state.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "launch/loader/job_config.h"
#include "launch/loader/job_settings.h"

namespace brigade::launch {

/// What only `brigade run` reads (keys ids_out, digests_out, stop_after_batches, json,
/// progress, stats_interval, stats_out, metrics_port, metrics_address, stats,
/// stats_consecutive, hang_after, pause_after_batches): not the job's
/// description.
struct RunOutput {
  std::string ids_out{};  // delivered sample ids, one per line, in delivery order
  // One line per delivered batch: "<epoch> <fnv1a64 of the bytes, hex> <id> <id> …".
  std::string digests_out{};
  std::int64_t stop_after_batches = -1;  // < 0: run to the end
  bool json = false;                     // a JSON summary as the last line on stdout
  bool progress = true;                  // a progress bar when stderr is a terminal
  // Statistics (launch/stats_output.h): one report per interval.
  double stats_interval = 10;  // seconds, ≥ 0.2
  std::string stats_out{};     // JSON lines, one object per interval
  int metrics_port = 0;        // Prometheus endpoint; 0: none
  std::string metrics_address = "127.0.0.1";
  // HOST:PORT of rank 0's statistics collector (launch/run_statistics.h), or "auto":
  // MASTER_ADDR at MASTER_PORT + kStatsPortOffset. Empty: a rank reports to nobody.
  std::string stats{};
  int stats_consecutive = 2;  // intervals in a row before a straggler is named
  // Seconds without a request for a batch (the pipeline full) before rank 0's analyzer
  // reports a rank as not consuming (cluster_stats.h NOT CONSUMING).
  double hang_after = 60;
  // ≥ 0: after this many batches the consumer stops asking for batches until the
  // process is interrupted (a hung training step, for checking the report above).
  std::int64_t pause_after_batches = -1;
};

/// `stats = "auto"` listens at MASTER_PORT + kStatsPortOffset (the workers' directory is
/// at + 1, launch/loader/job_settings.h kDirectoryPortOffset).
inline constexpr int kStatsPortOffset = 2;

/// `brigade run`'s settings: the job's description and the command line's own. Passed
/// as a RunConfig (resolve(), Job), it is the job's description alone.
struct RunCommand : RunConfig, RunOutput {};

/// RunOutput's keys, for the key table (job_settings.h FrontEndSetting).
FrontEndSetting output_keys(RunOutput& output);

/// apply_toml and apply_toml_file of job_settings.h, the command line's keys included.
void apply_toml(RunCommand& config, std::string_view text, const std::string& name);
void apply_toml_file(RunCommand& config, const std::string& path);

/// Applies one flag given on the command line: `flag` is its name with dashes
/// ("--batch-size", "--no-shuffle"), `value` its text ("" for switches).
/// Throws ConfigError naming the flag for an unknown flag or a bad value.
void apply_flag(RunCommand& config, std::string_view flag, std::string_view value);

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
