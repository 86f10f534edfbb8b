#pragma once

// What a job is told (launch/loader/job.h): the typed description of one rank's job.
// `brigade run` fills it from TOML and flags (launch/config.h, its key table, which
// documents every field's key, default and check), the Python Loader from keyword
// arguments (through the same key table). Plain values; ConfigError is the job's error
// for a description it cannot run (it names the key).

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "actors/options.h"
#include "actors/sampler.h"
#include "media/tensor.h"
#include "transport/remote/endpoint.h"

namespace brigade::launch {

enum class MediaKind { image, video };
using media::Layout;  // media/tensor.h: the one layout type

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
  /// `key`: the TOML key the error is about ("batch_size", "stages.decode.concurrency",
  /// "rank" for a launch variable's count), or empty where none is (an unknown flag, a
  /// TOML syntax error, a config file that cannot be read).
  explicit ConfigError(const std::string& message, std::string key = {})
      : std::invalid_argument(message), key_(std::move(key)) {}
  const std::string& key() const noexcept { return key_; }

 private:
  std::string key_;
};

/// Everything `brigade run` is told. Unset optionals take the documented defaults in
/// resolve(); after resolve() every optional is set, except local_rank and
/// local_world_size when the launch environment does not give them.
struct RunConfig {
  std::string data{};  // folder searched recursively; empty (and no list): the demo
  std::string list{};  // file of paths, one per non-blank line
  MediaKind kind = MediaKind::image;
  std::optional<int> batch_size{};  // default 32 (image) or 8 (video)
  std::uint64_t epochs = 1;         // total epochs of the job (a resume continues toward it)
  // How the ranks' shares of an epoch are evened (actors/sampler.h, THE EPOCH SEQUENCE):
  // pad (default; DistributedSampler's drop_last=False), drop_last (its drop_last=True)
  // or none (every sample exactly once, shares differ by one: evaluation).
  actors::TailPolicy tail = actors::TailPolicy::pad;
  bool drop_last = false;  // drop each rank's last partial batch (DataLoader's drop_last)
  std::uint64_t seed = 0;
  bool shuffle = true;
  actors::Order order = actors::Order::input;
  std::optional<int> threads{};               // default: number of cores
  int read_concurrency = 8;                   // io threads reading files
  std::optional<int> decode_concurrency{};    // default: threads
  std::optional<std::uint32_t> rank{};        // default: RANK, SLURM_PROCID, else 0
  std::optional<std::uint32_t> world_size{};  // default: WORLD_SIZE, SLURM_NTASKS, else 1
  // Resolved from the launch environment only (no keys); unset when it does not say.
  std::optional<std::uint32_t> local_rank{}, local_world_size{};
  // The launch environment found: "torchrun", "slurm" or "none". Its variables fill in
  // what flags and the file did not give.
  std::string launcher = "none";
  std::string master_addr{};  // MASTER_ADDR, else (Slurm) the launch node; else empty
  int master_port = 0;        // MASTER_PORT, else kDefaultMasterPort with an address; else 0
  std::string max_failures = "unlimited";  // "N" or "N%", as given
  actors::FailureBudget failure_budget{};  // parsed from max_failures
  std::string ids_out{};
  // One line per delivered batch: "<epoch> <fnv1a64 of the bytes, hex> <id> <id> …".
  std::string digests_out{};
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
  // Batches to a device (transport/device/device_copy.h): "" keeps them in host memory; "cpu"
  // (the CPU device: the whole device path, host memory standing in) or "cuda:N".
  // "cuda" on a build without CUDA is a ConfigError ("this build has no CUDA").
  std::string device{};
  // "imagenet": uint8 → float, (x / 255 - mean) / std, on the device with one, else on
  // the CPU in the decode stage (float32, channels per `layout`).
  std::string normalize = "none";
  std::string normalize_dtype = "float32";                      // or "float16" (device only)
  std::array<float, 3> normalize_mean{0.485f, 0.456f, 0.406f};  // ImageNet's by default
  std::array<float, 3> normalize_std{0.229f, 0.224f, 0.225f};
  // The image transform (media/transform.h): "eval" (resize the shorter side to `resize`,
  // center crop size x size), "train" (RandomResizedCrop(size, scale, ratio) + flip with
  // flip_probability, drawn from seed, epoch and sample id) or "none" (decode only; every
  // image must be size x size). Clips (kind video) take eval (8 evenly spaced frames,
  // center crop) or train (8 frames at clip_stride from a random first frame, one random
  // crop and flip for the clip: launch/loader/decode.h); resolve() refuses none.
  std::string transform = "eval";
  int size = 224;                          // output height = width (images and clip frames)
  std::optional<int> resize{};             // eval's shorter side; default size * 256 / 224
  std::array<double, 2> scale{0.08, 1.0};  // train: area fraction range
  std::array<double, 2> ratio{3.0 / 4.0, 4.0 / 3.0};  // train: aspect ratio range
  double flip_probability = 0.5;                      // train
  bool exif_orientation = false;  // JPEG: turn images upright first (off: as PIL loaders)
  bool roi_decode = true;         // JPEG: region-of-interest decode (media/transform.h)
  int clip_stride = 4;            // clips, train: frames between a clip's selected frames
  // Remote decode workers (REMOTE DECODE above).
  // --workers HOST:PORT,HOST:PORT ; [remote] workers = ["h:p", ...] (an array of strings,
  // or one comma-separated string)
  std::vector<transport::Endpoint> workers{};
  // --directory HOST:PORT|auto ; [remote] directory. "auto": from the launch environment
  // (LAUNCH ENVIRONMENT above). Resolved to "HOST:PORT" by resolve().
  std::string directory{};
  std::string on_no_workers = "local";  // --on-no-workers local|fail ; [remote] on_no_workers
  // --token-file FILE ; [remote] token_file (relative to the TOML's folder like other paths)
  std::string token_file{};
  // NOT a key: resolve() fills it from token_file, else the BRIGADE_TOKEN environment
  // variable. Never from argv (ps shows argv).
  std::string token{};
  // --tls-cert/--tls-key/--tls-ca FILE ; [remote] tls_cert ...; all three or none
  // (ConfigError naming the missing one); files must be readable
  std::string tls_cert{}, tls_key{}, tls_ca{};
  // --task-timeout SECONDS ; [remote] task_timeout: positive number (integer or decimal),
  // at most 3600
  double task_timeout = 30;
  int max_attempts = 2;  // --max-attempts N ; [remote] max_attempts: 1..100
  // --remote-inflight N ; [remote] inflight: batches in flight to workers at once (0:
  // default chosen by the job), at most kMaxConcurrency
  int remote_inflight = 0;
  bool remote() const { return !workers.empty() || !directory.empty(); }
  // Where rank and world size came from ("--rank", "RANK", ...), for error messages.
  std::string rank_origin = "default";
  std::string world_size_origin = "default";
  // Whether epochs and progress were given ("default" if not): the Python Loader runs
  // without an epoch limit unless one is given, and warns about `brigade run`'s keys.
  std::string epochs_origin = "default";
  std::string progress_origin = "default";
};

/// Whether this rank hosts the directory of remote workers: a resolved remote config
/// with a directory, on rank 0.
bool hosts_directory(const RunConfig& config);

std::string_view to_string(MediaKind kind);

}  // namespace brigade::launch
