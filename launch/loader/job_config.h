#pragma once

// What a job is told (launch/loader/job.h): the typed description of one rank's job.
// `brigade run` fills it from TOML and flags, the Python Loader from TOML and keyword
// arguments, both through the job's key table (launch/loader/job_settings.h, which
// documents every field's key, default and check). Plain values; ConfigError is the job's error
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
#include "media/transform.h"
#include "transport/remote/endpoint.h"

namespace brigade::launch {

enum class MediaKind { image, video };
using media::Layout;  // media/tensor.h: the one layout type
/// normalize: none, or ImageNet's (x / 255 - mean) / std (RunConfig::normalize).
enum class Normalize { none, imagenet };
/// on_no_workers: with no live remote worker, decode here or wait and fail.
enum class OnNoWorkers { local, fail };
/// decode (with remote workers): every batch on the workers (remote), or this rank
/// decodes at its own pace and the workers take what it cannot keep up with (hybrid;
/// launch/loader/job.h HYBRID).
enum class DecodeMode { remote, hybrid };
/// labels: none, or folder (the data folder's subfolders are the classes, ImageFolder's
/// listing: launch/loader/sources.h list_class_folders).
enum class Labels { none, folder };

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

/// Where one listing of samples comes from: the job's data keys, or one [[sources]]
/// table's (the same keys, the same meanings; kListingKeys in job_settings.cc names
/// them). One of data, list, manifest or shards (none: the demo set), with the keys of
/// that kind.
struct DataListing {
  std::string data{};  // folder searched recursively; empty (and no list): the demo
  std::string list{};  // file of paths, one per non-blank line
  // Where the samples' labels come from: none (an unlabelled dataset) or folder (with
  // `data`: the class folders, in ImageFolder's order; see launch/loader/sources.h).
  Labels labels = Labels::none;
  // -- Manifests (launch/loader/manifest.h): a table of samples instead of data/list --
  std::string manifest{};         // CSV, TSV or JSON Lines file
  std::string manifest_format{};  // "" (by extension), csv, tsv or jsonl
  std::string path_column = "path";
  std::string label_column{};  // "": "label" when the manifest has one
  std::string classes{};       // file of class names, one per line (label = line index)
  // ---- WebDataset tar shards (launch/loader/shards.h)
  // shards = ["train-{000000..000127}.tar", ...] ; --shards SPEC: files and brace ranges
  // (expanded by open_dataset); relative to the TOML's folder like other paths.
  std::vector<std::string> shards{};
  std::string image_key = "jpg;jpeg;png;webp;ppm;pgm;pbm;pnm";  // media member extensions
  std::string video_key = "mp4";
  std::string label_key{};  // a .json field; "": the .cls member, if any
};

/// One source of a mix: a config's [[sources]] table (a Python Loader's sources=[{...}]).
/// Its samples come from its own listing; `kind`, `meta` and everything else are the
/// job's. Checked when parsed (launch/loader/job_settings.h SOURCES).
struct SourceConfig {
  std::string name{};  // default "source<i>"; unique
  double weight = 1;   // finite, > 0: the share of the epoch's draws (relative)
  DataListing listing{};
};

/// The job's description: what a Job is told, from `brigade run` or the Python Loader
/// (what only `brigade run` reads, its output files and reports, is launch/config.h's
/// RunOutput). Unset optionals take the documented defaults in resolve(); after
/// resolve() every optional is set, except local_rank and local_world_size when the
/// launch environment does not give them.
/// The job's own listing is its DataListing base (with [[sources]], left empty: each
/// source has its own).
struct RunConfig : DataListing {
  MediaKind kind = MediaKind::image;
  // Metadata columns kept per sample (Dataset::meta) and delivered in JobBatch::meta.
  std::vector<std::string> meta{};
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
  std::optional<int> threads{};            // default: number of cores
  int read_concurrency = 8;                // io threads reading files
  int read_retries = 4;                    // object storage: transient failures retried per request
  std::uint64_t read_timeout_ms = 60'000;  // object storage: one request's whole time
  std::string object_cache_dir{};          // object storage: the shard cache ("": none)
  std::uint64_t object_cache_bytes = 0;    // its bound (0: none)
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
  // max_failures: "N" or "N%" (a rate: the job makes it a count, see job.h FAILURES).
  actors::FailureBudget failure_budget{};
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
  // --pinned-direct-mib MIB ; pinned_direct_mib: with a device, the most page-locked
  // memory decode may write batches into directly (DEVICE in job.h); above it, pageable
  // decode output staged through 3 pinned buffers. 0 always stages; at most 2^20.
  int pinned_direct_mib = 1024;
  // imagenet: uint8 → float, (x / 255 - mean) / std, on the device with one, else on
  // the CPU in the decode stage (float32, channels per `layout`).
  Normalize normalize = Normalize::none;
  media::DType normalize_dtype = media::DType::float32;         // or float16 (device only)
  std::array<float, 3> normalize_mean{0.485f, 0.456f, 0.406f};  // ImageNet's by default
  std::array<float, 3> normalize_std{0.229f, 0.224f, 0.225f};
  // The image transform and its parameters (media/transform.h; keys transform, size,
  // resize, scale, ratio, flip_probability, exif_orientation, roi_decode, interpolation):
  // eval (resize the shorter side to `resize`, center crop size x size), train
  // (RandomResizedCrop(size, scale, ratio) + flip with flip_probability, drawn from seed,
  // epoch and sample id) or none (decode only; every image must be size x size). Clips
  // (kind video) take eval (8 evenly spaced frames, center crop) or train (8 frames at
  // clip_stride from a random first frame, one random crop and flip for the clip) and
  // bilinear: launch/loader/decode.h. Its seed and epoch are the job's (decode_spec()
  // sets them); resize 0 until resolve() sets the default, size * 256 / 224.
  media::TransformOptions transform{.resize = 0};
  int clip_stride = 4;  // clips, train: frames between a clip's selected frames
  // Remote decode workers (REMOTE DECODE above).
  // --workers HOST:PORT,HOST:PORT ; [remote] workers = ["h:p", ...] (an array of strings,
  // or one comma-separated string)
  std::vector<transport::Endpoint> workers{};
  // --directory HOST:PORT|auto ; [remote] directory. "auto": from the launch environment
  // (LAUNCH ENVIRONMENT above). Resolved to "HOST:PORT" by resolve().
  std::string directory{};
  OnNoWorkers on_no_workers = OnNoWorkers::local;  // --on-no-workers ; [remote] on_no_workers
  // --decode remote|hybrid ; [remote] decode (launch/loader/job.h HYBRID). hybrid never
  // waits for a worker, so on_no_workers does not apply to it.
  DecodeMode decode = DecodeMode::remote;
  // --rebalance ; [remote] rebalance = true: rank 0 (hosting the directory, with
  // cluster statistics) has the workers serve the ranks that fall behind first
  // (launch/loader/job.h REBALANCING).
  bool rebalance = false;
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
  // Whether epochs was given ("default" if not): the Python Loader runs without an
  // epoch limit unless one is given.
  std::string epochs_origin = "default";

  // ---- The shard-block shuffle of WebDataset tar shards (DataListing::shards)
  // With shards and shuffle: 0 shuffles every sample across the dataset; W > 0 reads W
  // shards at a time (actors::DistributedBlockSampler: the shards' order shuffled per
  // epoch, the samples within each window of W shards).
  std::uint64_t shuffle_window = 0;

  // ---- Several datasets mixed by weight ([[sources]]; launch/loader/job.h MIXING)
  // With sources, data/list/manifest/shards must not be given: each source has its own.
  std::vector<SourceConfig> sources{};
  // Draws per epoch of a mix, over all ranks (each rank draws ceil(N / world size));
  // 0: the sum of the sources' sizes.
  std::uint64_t epoch_samples = 0;
};

/// The job's description with `source`'s data keys in place of the job's (and no
/// sources): what open_dataset lists for that source.
RunConfig source_config(const RunConfig& job, const SourceConfig& source);

/// Whether this rank hosts the directory of remote workers: a resolved remote config
/// with a directory, on rank 0.
bool hosts_directory(const RunConfig& config);

std::string_view to_string(MediaKind kind);
std::string_view to_string(Normalize normalize);
std::string_view to_string(OnNoWorkers on_no_workers);
std::string_view to_string(DecodeMode decode);
std::string_view to_string(Labels labels);

}  // namespace brigade::launch
