#pragma once

// The job description's vocabulary: one key table that turns settings into a RunConfig
// (job_config.h), shared by `brigade run` (a TOML file and flags: launch/config.h) and the
// Python Loader (a TOML file and keyword arguments, serialized as one more TOML
// document), so that both accept the same keys, check them the same way and name them the
// same way in errors.
//
//   RunConfig config;
//   if (!file.empty()) apply_toml_file(config, file);   // a TOML file
//   apply_setting(config, "batch_size", "64", "--batch-size");  // one key as text (a flag)
//   resolve(config, getenv);                             // env defaults, checks
//
// KEYS (TOML key = flag without "--", with '-' as '_'; tables group them):
//   data, list, kind, batch_size, epochs, seed, shuffle, tail, drop_last, order, threads,
//   [stages.read] concurrency (--read-concurrency), [stages.decode] concurrency
//   (--decode-concurrency), rank, world_size, max_failures, ids_out,
//   stop_after_batches, json, progress (--no-progress), layout, checkpoint_dir,
//   keep_checkpoints, launch_id, resume_from, device, pinned_direct_mib, normalize,
//   normalize_dtype, normalize_mean, normalize_std, transform, size, resize, scale, ratio,
//   flip_probability, exif_orientation, roi_decode, interpolation, clip_stride,
//   [remote] workers, directory, on_no_workers, token_file, tls_cert, tls_key, tls_ca,
//   task_timeout, max_attempts, inflight (--remote-inflight), [[sources]] (SOURCES),
//   epoch_samples. Relative paths in a TOML
//   file resolve against the file's folder. [remote] workers is an array of "HOST:PORT"
//   strings or one comma-separated string; --workers takes the comma-separated form.
//   The keys that only shape `brigade run`'s output (ids_out, digests_out,
//   stop_after_batches, json, progress) are in the table too, checked like any other,
//   so that one file serves the command line and the Python Loader; the job does not
//   hold them (RunConfig has no field for them): their values go to the front end's
//   FrontEndSetting (launch/config.h RunOutput; the Python Loader lists them as ignored).
//
// SOURCES. Several datasets mixed by weight: an array of tables, one per source,
//   [[sources]]                      # sources[0]
//   name = "photos"                  # default "source<i>"; unique
//   data = "photos/"                 # or list, manifest, shards (one of them), with
//   labels = "folder"                #   the keys of that kind: manifest_format,
//   weight = 3                       #   path_column, label_column, classes, labels,
//   [[sources]]                      #   image_key, video_key, label_key
//   shards = ["web-{0000..0015}.tar"]
//   weight = 1                       # finite, > 0 (default 1)
// (a Python Loader's sources=[{"data": ..., "weight": 3}, ...] is the same array). The
// job's data, list, manifest and shards must then be absent; everything else (kind,
// meta, batch_size, shuffle_window, …) is the job's. epoch_samples sets the draws per
// epoch (default: the sum of the sources' sizes). A later document's sources (keywords
// after a file) replace the earlier ones as a whole. Errors name the table by index and
// the key: "run.toml:9: sources[1]: unknown key 'wieght' (a source takes name, weight,
// data, …)", "run.toml:7: sources[0].weight: expected a finite number > 0, got -1",
// "sources[1]: no data: give data, list, manifest or shards", "sources and data: …".
//
// LAUNCH ENVIRONMENT. resolve() reads what launchers already set; Brigade ships none.
//   torchrun: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT.
//   Slurm:    SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NTASKS_PER_NODE (else this
//             node's entry of SLURM_TASKS_PER_NODE, "2(x3),1", picked by SLURM_NODEID;
//             unset when it cannot be told), and the launch node: SLURM_LAUNCH_NODE_IPADDR,
//             else the first host of SLURM_JOB_NODELIST.
// Precedence, field by field:
//   1. flags, then the TOML file (rank, world_size): a given value is never replaced;
//   2. torchrun, when RANK or WORLD_SIZE is set: only its variables are read for rank,
//      world size and local rank/size (under srun, SLURM_PROCID counts torchrun
//      launchers, not trainers). A half it lacks while Slurm's half is set is an error
//      naming both ("RANK=1 (torchrun) without WORLD_SIZE; SLURM_NTASKS=4 is Slurm's: set
//      WORLD_SIZE or --world-size"), not a silent mix;
//   3. Slurm, when SLURM_PROCID or SLURM_NTASKS is set;
//   4. defaults: rank 0, world size 1, local rank and size unset.
// MASTER_ADDR, when set, is the master address under any launcher (sbatch scripts
// commonly export it); otherwise under Slurm it is the launch node. The port is
// MASTER_PORT, else kDefaultMasterPort. Checks name both origins: rank < world size,
// local rank < local world size; a non-numeric variable is an error naming it.
//
// REMOTE DECODE (remote(): workers or a directory given). The directory of remote
// workers listens at MASTER_PORT + kDirectoryPortOffset on the master, next to
// torchrun's store at MASTER_PORT; `directory = "auto"` resolves to that address, and
// rank 0 hosts the directory (hosts_directory()). A remote run needs a job token: the
// content of token_file (trailing whitespace stripped; the file must not be readable by
// group or others, as ssh demands of keys), else BRIGADE_TOKEN. The token is never a
// flag: argv is visible to every user through ps. TLS takes tls_cert, tls_key and tls_ca
// together or none. Without remote() these keys are accepted and unused. The job reads
// its token here (not in launch/) because a Python Loader with remote workers needs it
// as much as `brigade run` does.
//
// ERRORS. Every problem is a ConfigError whose what() names where (the file and line,
// the flag, or the environment variable), the key, and what was expected:
//   "run.toml:4: unknown key 'stages.decode.concurency'"
//   "run.toml:2: batch_size: expected a positive integer, got -3"
//   "--kind: expected one of image, video, got 'audio'"
//
// THREADING. Plain functions over values; no shared state. resolve() reads the token and
// TLS files of a remote run.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "actors/options.h"
#include "launch/loader/job_config.h"

namespace brigade::launch {

/// torchrun's default MASTER_PORT, used with a Slurm launch node when MASTER_PORT is unset.
inline constexpr int kDefaultMasterPort = 29500;
/// The directory of remote workers listens at MASTER_PORT + kDirectoryPortOffset (next to
/// torchrun's TCPStore at MASTER_PORT): what `directory = "auto"` resolves to.
inline constexpr int kDirectoryPortOffset = 1;

/// A checked value of a front end's key (SettingKey::job false): a count, a switch, or
/// text (a path: relative paths of a TOML file already resolved against its folder).
using SettingValue = std::variant<std::int64_t, bool, std::string>;
/// Receives each front end's key given, with its value; none: they are checked and
/// dropped.
using FrontEndSetting = std::function<void(std::string_view key, const SettingValue& value)>;

/// Applies the keys of a TOML document; `name` (the file) prefixes errors and its
/// folder anchors relative paths. Throws ConfigError on a syntax error, an unknown
/// key or a bad value.
void apply_toml(RunConfig& config, std::string_view text, const std::string& name,
                const FrontEndSetting& front_end = {});
/// Reads `path` and applies it as above; an unreadable file is a ConfigError.
void apply_toml_file(RunConfig& config, const std::string& path,
                     const FrontEndSetting& front_end = {});

/// One key of the table, as a command line or a help text shows it.
struct SettingKey {
  std::string_view key;   // dotted TOML key ("stages.decode.concurrency")
  std::string_view flag;  // its flag ("--decode-concurrency"; switches: the "on" form)
  std::string_view help;
  bool takes_value = true;  // false: a switch (true or false)
  bool negatable = false;   // also "--no-<name>"
  std::string metavar{};    // for help: "N", "DIR", "image|video", …
  bool job = true;          // false: a front end's key (KEYS), not the job's
};
/// Every key of the table, in the table's order.
std::vector<SettingKey> setting_keys();

/// Applies one key given as text (a flag's value): numbers are parsed by the key's
/// type, text that is no number stays text so that the error shows it; a switch is set
/// to !negated and ignores `text`. `where` prefixes errors ("--batch-size"), as a file
/// and line do for TOML. Throws ConfigError naming `where` and the key.
void apply_setting(RunConfig& config, std::string_view key, std::string_view text,
                   std::string_view where, bool negated = false,
                   const FrontEndSetting& front_end = {});

/// Fills defaults (cores; rank, world size, local rank and size and the master address
/// from the launch environment as LAUNCH ENVIRONMENT says; "auto" directory; the token),
/// then checks the whole: rank < world size, data and list not both given, a remote run's
/// token and TLS files, and so on. `getenv` is injectable for tests; an empty variable
/// counts as unset. Reads token_file and the TLS files (only when remote()).
using Getenv = std::function<const char*(const char*)>;
void resolve(RunConfig& config, const Getenv& getenv);

/// The job token as resolve() reads it for a remote run (also for `brigade worker`):
/// `token_file`'s content (mode 600 or stricter, trailing whitespace stripped), else
/// BRIGADE_TOKEN. Throws ConfigError naming the file or the missing token.
std::string read_job_token(const std::string& token_file, const Getenv& getenv);

/// The first host of a Slurm host list (SLURM_JOB_NODELIST): "node[001-004,007],gpu12"
/// gives "node001", "a,b" gives "a", "n[1-2]-ib" gives "n1-ib" (every bracket takes its
/// first number, zero padding kept). The whole list is checked: an empty host, an
/// unclosed or empty bracket, or anything but numbers and ranges inside one is a
/// ConfigError.
std::string first_slurm_host(std::string_view nodelist);

/// "N" or "N%" (or "unlimited") as a failure budget; ConfigError naming `where`.
actors::FailureBudget parse_failure_budget(std::string_view text, std::string_view where);

}  // namespace brigade::launch
