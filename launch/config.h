#pragma once

// The settings of `brigade run`: one key table shared by the TOML config file and the
// command-line flags, so both accept the same keys, check them the same way and name
// them the same way in errors.
//
//   RunConfig config;
//   if (!file.empty()) apply_toml_file(config, file);            // `brigade run CONFIG.toml`
//   for (auto& [flag, value] : given_flags) apply_flag(config, flag, value);  // flags win
//   resolve(config, getenv);                                      // env defaults, checks
//
// KEYS (TOML key = flag without "--", with '-' as '_'; tables group them):
//   data, list, kind, batch_size, epochs, seed, shuffle, order, threads,
//   [stages.read] concurrency (--read-concurrency), [stages.decode] concurrency
//   (--decode-concurrency), rank, world_size, max_failures, ids_out,
//   stop_after_batches, json, progress (--no-progress), layout, checkpoint_dir,
//   resume_from, device, normalize, normalize_dtype. Relative paths in a TOML file
//   resolve against the file's folder.
//
// ERRORS. Every problem is a ConfigError whose what() names where (the file and line,
// the flag, or the environment variable), the key, and what was expected:
//   "run.toml:4: unknown key 'stages.decode.concurency'"
//   "run.toml:2: batch_size: expected a positive integer, got -3"
//   "--kind: expected one of image, video, got 'audio'"
// `brigade run` exits with status 2 on a ConfigError.
//
// THREADING. Plain functions over values; no shared state.

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "actors/options.h"

namespace brigade::launch {

enum class MediaKind { image, video };
enum class Layout { nhwc, nchw };

/// The largest batch_size accepted. A batch's memory is allocated for the samples it
/// really holds (never more than exist), so a large value on a small dataset works;
/// this bound rejects values that are certainly a mistake.
inline constexpr int kMaxBatchSize = 1 << 20;
/// The largest thread count or stage concurrency accepted (threads, read and decode
/// concurrency): every io worker is a thread of its own.
inline constexpr int kMaxConcurrency = 1024;

/// A usage or configuration error (exit status 2). what() is the full message.
class ConfigError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// Everything `brigade run` is told. Unset optionals take the documented defaults in
/// resolve(); after resolve() every optional is set.
struct RunConfig {
  std::string data{};  // folder searched recursively; empty (and no list): the demo
  std::string list{};  // file of paths, one per non-blank line
  MediaKind kind = MediaKind::image;
  std::optional<int> batch_size{};  // default 32 (image) or 8 (video)
  std::uint64_t epochs = 1;         // total epochs of the job (a resume continues toward it)
  std::uint64_t seed = 0;
  bool shuffle = true;
  actors::Order order = actors::Order::input;
  std::optional<int> threads{};               // default: number of cores
  int read_concurrency = 8;                   // io threads reading files
  std::optional<int> decode_concurrency{};    // default: threads
  std::optional<std::uint32_t> rank{};        // default: RANK, SLURM_PROCID, else 0
  std::optional<std::uint32_t> world_size{};  // default: WORLD_SIZE, SLURM_NTASKS, else 1
  std::string max_failures = "unlimited";     // "N" or "N%", as given
  actors::FailureBudget failure_budget{};     // parsed from max_failures
  std::string ids_out{};
  std::int64_t stop_after_batches = -1;  // < 0: run to the end
  bool json = false;
  bool progress = true;  // a progress bar when stderr is a terminal
  Layout layout = Layout::nhwc;
  std::string checkpoint_dir{};
  std::string resume_from{};
  int keep_checkpoints = 2;  // complete checkpoint sets kept in checkpoint_dir (0: all)
  // What every rank of one launch shares and no other launch does (the launcher's job
  // id): it tells this run's checkpoint files from an earlier launch's. Default from
  // TORCHELASTIC_RUN_ID, else SLURM_JOB_ID.SLURM_STEP_ID, else empty.
  std::string launch_id{};
  // Batches to a device (transport/device_copy.h): "" keeps them in host memory; "cpu"
  // (the CPU device: the whole device path, host memory standing in) or "cuda:N".
  // "cuda" on a build without CUDA is a ConfigError ("this build has no CUDA").
  std::string device{};
  std::string normalize = "none";           // "imagenet": uint8 → float on the device
  std::string normalize_dtype = "float32";  // or "float16"
  // Where rank and world size came from ("--rank", "RANK", ...), for error messages.
  std::string rank_origin = "default";
  std::string world_size_origin = "default";
};

/// Applies the keys of a TOML document; `name` (the file) prefixes errors and its
/// folder anchors relative paths. Throws ConfigError on a syntax error, an unknown
/// key or a bad value.
void apply_toml(RunConfig& config, std::string_view text, const std::string& name);
/// Reads `path` and applies it as above; an unreadable file is a ConfigError.
void apply_toml_file(RunConfig& config, const std::string& path);

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

/// Fills defaults (cores, rank and world size from the environment: RANK/WORLD_SIZE,
/// else SLURM_PROCID/SLURM_NTASKS), then checks the whole: rank < world size, data and
/// list not both given, and so on. `getenv` is injectable for tests.
using Getenv = std::function<const char*(const char*)>;
void resolve(RunConfig& config, const Getenv& getenv);

/// "N" or "N%" (or "unlimited") as a failure budget; ConfigError naming `where`.
actors::FailureBudget parse_failure_budget(std::string_view text, std::string_view where);

std::string_view to_string(MediaKind kind);
std::string_view to_string(Layout layout);

}  // namespace brigade::launch
