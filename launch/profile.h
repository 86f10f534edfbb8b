#pragma once

// `brigade profile` (SPDL's profile_pipeline, for one node): runs the job's local stages
// one at a time, each alone in an engine pipeline at concurrency 1, 2, 4, … on a bounded
// sample of the data, and recommends each stage's concurrency.
//
// WHAT IS MEASURED. "read": the job's read stage (io executor, one sample per task) over
// `samples` samples, after a first pass that brings them into the page cache (the rate
// of a warm cache; a cold read depends on the storage, not on Brigade). "decode": the
// job's decode stage (the job's transform, one batch of batch_size samples per task, as
// in `brigade run`) over the same samples held in memory, with as many scheduler threads
// as the concurrency tried. A run goes over the samples as many times as makes it last
// about half a second (judged from one pass), so the pipeline's start does not weigh.
// Each run reports samples/s and CPU ms per sample (the
// process's CPU over the run: the engine's own overhead included). Failed samples count
// as processed and are reported.
//
// RECOMMENDATION. A stage's recommended concurrency is the smallest one whose rate is at
// least kProfileEnough (95%) of the best rate measured: more buys nothing on this node.
// The TOML lines to paste set [stages.read] and [stages.decode] concurrency (and
// `threads` when the decode's exceeds the job's threads).
//
// THREADING. One call at a time per process (it measures the process's CPU).

#include <cstdint>
#include <string>
#include <vector>

#include "launch/loader/dataset.h"
#include "launch/loader/job_config.h"

namespace brigade::launch {

inline constexpr double kProfileEnough = 0.95;

struct ProfileOptions {
  std::size_t samples = 0;       // 0: batch_size × 8 × the largest concurrency, ≤ 4,096
  std::vector<int> concurrency;  // empty: 1, 2, 4, … up to the cores (at least 1, 2)
};

struct ProfileRun {
  int concurrency = 0;
  double samples_per_s = 0;
  double cpu_ms_per_sample = 0;
  std::uint64_t failed = 0;
};

struct StageProfile {
  std::string name;  // read, decode
  std::vector<ProfileRun> runs{};
  int recommended = 0;
};

struct ProfileReport {
  std::size_t samples = 0;  // distinct samples profiled (each run passes over them)
  std::vector<StageProfile> stages{};
  std::string toml{};  // the lines to paste into the job's TOML
};

/// Profiles `config`'s (resolved) local stages over the first samples of `dataset`.
/// Throws ConfigError for a remote config (profile the workers' nodes with their own
/// data) or bad options.
ProfileReport profile_job(const RunConfig& config, const Dataset& dataset,
                          const ProfileOptions& options);

/// The report as a human table (one line per stage and concurrency) and the TOML lines.
std::string format_profile(const ProfileReport& report);
/// The report as one JSON object.
std::string profile_json(const ProfileReport& report);

}  // namespace brigade::launch
