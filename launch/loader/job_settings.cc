#include "launch/loader/job_settings.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <system_error>
#include <thread>
#include <variant>
#include <vector>

#include "launch/loader/decode.h"
#include "launch/loader/detail/launch_environment.h"
#include "launch/loader/object_reads.h"
#include "transport/device/device.h"
#include "transport/remote/endpoint.h"

namespace brigade::launch {

std::optional<std::int64_t> detail::parse_int(std::string_view text) {
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

namespace {

// How a key's value is checked; also the "expected …" text of its errors. real: a
// positive number; endpoints: a list of HOST:PORT; endpoint: one, or one of the choices.
enum class Type {
  positive,
  non_negative,
  seed,
  boolean,
  text,
  path,
  choice,
  budget,
  device,
  real,
  endpoints,
  endpoint,
  fraction,  // a number in [0, 1]
  range,     // two numbers MIN,MAX with 0 < MIN <= MAX (<= max when set)
  channels,  // three finite numbers, one per channel (max 1: each must be positive)
  names,     // names: an array of strings, or one comma-separated string
  paths,     // files: an array of strings, or one string of items separated by commas
             // outside braces (brace groups are the key's to expand)
};

using Endpoints = std::vector<transport::Endpoint>;
using Value = std::variant<std::int64_t, bool, std::string, double, std::vector<std::string>,
                           Endpoints, std::vector<double>, actors::FailureBudget>;

// One key of the table. Everything that differs between keys is a field here, never a
// comparison of key names in the code below.
struct Key {
  std::string_view name;  // dotted TOML key
  std::string_view flag;  // "--flag" (switches: the "on" form; "" if none)
  Type type;
  std::string_view help;
  std::vector<std::string_view> choices{};
  // Sets the job's field; null for a front end's key (SettingKey::job), handed to its
  // FrontEndSetting instead.
  void (*set)(RunConfig&, const Value&) = nullptr;
  std::int64_t max = 0;        // numbers: the largest value accepted (0: the type's own)
  bool negatable = false;      // switches: "--no-<name>" turns it off
  std::string_view metavar{};  // in help, instead of the type's (paths: FILE or DIR)
  std::string RunConfig::*origin = nullptr;  // records where the value came from
};

std::int64_t as_int(const Value& v) { return std::get<std::int64_t>(v); }
const std::string& as_text(const Value& v) { return std::get<std::string>(v); }
int as_count(const Value& v) { return static_cast<int>(as_int(v)); }
const std::vector<double>& as_numbers(const Value& v) { return std::get<std::vector<double>>(v); }
std::array<float, 3> as_channels(const Value& v) {
  const auto& n = as_numbers(v);
  return {static_cast<float>(n[0]), static_cast<float>(n[1]), static_cast<float>(n[2])};
}

// The typed choices of the choice keys whose values are enums: the key's choices are
// their names (in this order), and the text the key was given (checked against them) is
// turned into the value here, once.
constexpr std::array kKinds{MediaKind::image, MediaKind::video};
constexpr std::array kLayouts{Layout::nhwc, Layout::nchw};
constexpr std::array kTransforms{media::TransformKind::eval, media::TransformKind::train,
                                 media::TransformKind::none};
constexpr std::array kInterpolations{media::Interpolation::bilinear, media::Interpolation::bicubic};
constexpr std::array kNormalizes{Normalize::none, Normalize::imagenet};
constexpr std::array kNormalizeDtypes{media::DType::float32, media::DType::float16};
constexpr std::array kOnNoWorkers{OnNoWorkers::local, OnNoWorkers::fail};
constexpr std::array kDecodeModes{DecodeMode::remote, DecodeMode::hybrid};
constexpr std::array kLabels{Labels::none, Labels::folder};

std::string_view name_of(MediaKind v) { return to_string(v); }
std::string_view name_of(Layout v) { return media::layout_name(v); }
std::string_view name_of(media::TransformKind v) { return media::to_string(v); }
std::string_view name_of(media::Interpolation v) { return media::to_string(v); }
std::string_view name_of(media::DType v) { return media::dtype_name(v); }
std::string_view name_of(Normalize v) { return to_string(v); }
std::string_view name_of(OnNoWorkers v) { return to_string(v); }
std::string_view name_of(DecodeMode v) { return to_string(v); }
std::string_view name_of(Labels v) { return to_string(v); }

template <class E, std::size_t N>
std::vector<std::string_view> names(const std::array<E, N>& values) {
  std::vector<std::string_view> out;
  for (E v : values) out.push_back(name_of(v));
  return out;
}

template <class E, std::size_t N>
E pick(const Value& v, const std::array<E, N>& values) {
  for (E e : values) {
    if (name_of(e) == as_text(v)) return e;
  }
  return values[0];  // unreachable: check() accepted only these names
}

actors::TailPolicy to_tail(const std::string& s) {
  if (s == "drop") return actors::TailPolicy::drop_last;
  if (s == "none") return actors::TailPolicy::none;
  return actors::TailPolicy::pad;
}

actors::Order to_order(const std::string& s) {
  return s == "completion" ? actors::Order::completion : actors::Order::input;
}

const std::vector<Key>& keys() {
  static const std::vector<Key> table{
      {"data",
       "--data",
       Type::path,
       "folder of media (images: .jpg .jpeg .png .ppm .bmp .pgm .tif .tiff .webp, any case; "
       "videos: .mp4 .mkv .webm .avi .mov), searched recursively following symbolic links, "
       "sorted by the bytes of the relative path (with --labels folder: ImageFolder's order) "
       "(default: the demo dataset, generated once); or s3://BUCKET/PREFIX/, its objects "
       "listed, class folders the next path segment",
       {},
       [](RunConfig& c, const Value& v) { c.data = as_text(v); },
       0,
       false,
       "DIR"},
      {"list",
       "--list",
       Type::path,
       "file of media paths, one per line; relative paths resolve "
       "against the list's folder; a sample's id is its index among non-blank lines",
       {},
       [](RunConfig& c, const Value& v) { c.list = as_text(v); },
       0,
       false,
       "FILE"},
      // Labels (issue 23, class folders).
      {"labels", "--labels", Type::choice,
       "where labels come from: none (default) or folder (with --data: its subfolders are "
       "the classes, sorted by name; label = class index; samples in torchvision "
       "ImageFolder's order)",
       names(kLabels), [](RunConfig& c, const Value& v) { c.labels = pick(v, kLabels); }},
      // -- Manifests (launch/loader/manifest.h) --
      {"manifest",
       "--manifest",
       Type::path,
       "CSV, TSV or JSON Lines file of samples, one row each: a path column (relative to "
       "the manifest's folder, or absolute), an optional label column, metadata columns; "
       "a sample's id is its row's index",
       {},
       [](RunConfig& c, const Value& v) { c.manifest = as_text(v); },
       0,
       false,
       "FILE"},
      {"manifest_format",
       "--manifest-format",
       Type::choice,
       "format of --manifest (default: by its extension .csv, .tsv, .jsonl, .ndjson)",
       {"csv", "tsv", "jsonl", "ndjson"},
       [](RunConfig& c, const Value& v) { c.manifest_format = as_text(v); }},
      {"path_column",
       "--path-column",
       Type::text,
       "the manifest's column of sample paths (default path)",
       {},
       [](RunConfig& c, const Value& v) { c.path_column = as_text(v); }},
      {"label_column",
       "--label-column",
       Type::text,
       "the manifest's column of labels: integers >= 0, or class names numbered in sorted "
       "order (default: label, when the manifest has it)",
       {},
       [](RunConfig& c, const Value& v) { c.label_column = as_text(v); }},
      {"classes",
       "--classes",
       Type::path,
       "file of class names, one per line: a manifest's label is the line index of its "
       "name (or an integer below the number of classes)",
       {},
       [](RunConfig& c, const Value& v) { c.classes = as_text(v); },
       0,
       false,
       "FILE"},
      {"meta",
       "--meta",
       Type::names,
       "manifest columns delivered with each batch as metadata (comma-separated; default "
       "none)",
       {},
       [](RunConfig& c, const Value& v) { c.meta = std::get<std::vector<std::string>>(v); },
       0,
       false,
       "FIELD,..."},
      // -- end of manifests --
      {"kind", "--kind", Type::choice, "image or video (8 evenly spaced 224x224 frames per clip)",
       names(kKinds), [](RunConfig& c, const Value& v) { c.kind = pick(v, kKinds); }},
      {"batch_size",
       "--batch-size",
       Type::positive,
       "samples per batch (default 32; video 8; at most 1048576)",
       {},
       [](RunConfig& c, const Value& v) { c.batch_size = as_count(v); },
       kMaxBatchSize},
      {"epochs",
       "--epochs",
       Type::positive,
       "total epochs of the job (default 1)",
       {},
       [](RunConfig& c, const Value& v) { c.epochs = static_cast<std::uint64_t>(as_int(v)); },
       0,
       false,
       {},
       &RunConfig::epochs_origin},
      {"seed",
       "--seed",
       Type::seed,
       "shuffling seed (default 0)",
       {},
       [](RunConfig& c, const Value& v) { c.seed = static_cast<std::uint64_t>(as_int(v)); }},
      {"shuffle",
       "--shuffle",
       Type::boolean,
       "shuffle each epoch (default on; --no-shuffle: "
       "sorted order)",
       {},
       [](RunConfig& c, const Value& v) { c.shuffle = std::get<bool>(v); },
       0,
       true},
      {"tail",
       "--tail",
       Type::choice,
       "evening ranks' shares of an epoch, as DistributedSampler: pad (default: repeat "
       "samples from the epoch's start so every rank gets ceil(n / world_size)), drop (drop "
       "the tail: floor(n / world_size) each), none (every sample exactly once; shares "
       "differ by one: for evaluation)",
       {"pad", "drop", "none"},
       [](RunConfig& c, const Value& v) { c.tail = to_tail(as_text(v)); }},
      {"drop_last",
       "--drop-last",
       Type::boolean,
       "drop each rank's last partial batch, as DataLoader's drop_last (default off)",
       {},
       [](RunConfig& c, const Value& v) { c.drop_last = std::get<bool>(v); },
       0,
       true},
      {"order",
       "--order",
       Type::choice,
       "output order of every stage (default input)",
       {"input", "completion"},
       [](RunConfig& c, const Value& v) { c.order = to_order(as_text(v)); }},
      {"threads",
       "--threads",
       Type::positive,
       "cpu threads (default: number of cores; at most 1024)",
       {},
       [](RunConfig& c, const Value& v) { c.threads = as_count(v); },
       kMaxConcurrency},
      {"stages.read.concurrency",
       "--read-concurrency",
       Type::positive,
       "io threads reading files (default 8; at most 1024)",
       {},
       [](RunConfig& c, const Value& v) { c.read_concurrency = as_count(v); },
       kMaxConcurrency},
      {"stages.read.retries",
       "--read-retries",
       Type::non_negative,
       "times a transient object-storage failure (5xx, 429, a timeout, a reset) is retried "
       "per request, with backoff and jitter (default 4; at most 100)",
       {},
       [](RunConfig& c, const Value& v) { c.read_retries = as_count(v); },
       100},
      {"stages.read.timeout",
       "--read-timeout",
       Type::real,
       "seconds one object-storage request may take, connection included (default 60; at "
       "most 3600)",
       {},
       [](RunConfig& c, const Value& v) {
         c.read_timeout_ms = static_cast<std::uint64_t>(std::get<double>(v) * 1000);
       },
       3600,
       false,
       "SECONDS"},
      {"cache_dir",
       "--cache-dir",
       Type::path,
       "folder of whole object-storage shards kept on local disk (s3:// or https:// shards: "
       "fetched once, verified by size and ETag, shared by the ranks of a node)",
       {},
       [](RunConfig& c, const Value& v) { c.object_cache_dir = as_text(v); },
       0,
       false,
       "DIR"},
      {"cache_size",
       "--cache-size",
       Type::non_negative,
       "bytes --cache-dir may hold; the least recently used shards are removed beyond it "
       "(default 0: no bound)",
       {},
       [](RunConfig& c, const Value& v) {
         c.object_cache_bytes = static_cast<std::uint64_t>(as_int(v));
       },
       0,
       false,
       "BYTES"},
      {"stages.decode.concurrency",
       "--decode-concurrency",
       Type::positive,
       "decode tasks at once (default: --threads; at most 1024)",
       {},
       [](RunConfig& c, const Value& v) { c.decode_concurrency = as_count(v); },
       kMaxConcurrency},
      {"rank",
       "--rank",
       Type::non_negative,
       "this process's rank (default: RANK, else "
       "SLURM_PROCID, else 0)",
       {},
       [](RunConfig& c, const Value& v) { c.rank = static_cast<std::uint32_t>(as_int(v)); },
       0,
       false,
       {},
       &RunConfig::rank_origin},
      {"world_size",
       "--world-size",
       Type::positive,
       "number of ranks (default: WORLD_SIZE, "
       "else SLURM_NTASKS, else 1)",
       {},
       [](RunConfig& c, const Value& v) { c.world_size = static_cast<std::uint32_t>(as_int(v)); },
       0,
       false,
       {},
       &RunConfig::world_size_origin},
      {"max_failures",
       "--max-failures",
       Type::budget,
       "failures tolerated over the whole job: a count N, or a rate N% of the samples "
       "this process consumes, enforced from the first sample (default unlimited)",
       {},
       [](RunConfig& c, const Value& v) { c.failure_budget = std::get<actors::FailureBudget>(v); }},
      {"ids_out",
       "--ids-out",
       Type::path,
       "write delivered sample ids, one per line, in "
       "delivery order",
       {},
       nullptr,
       0,
       false,
       "FILE"},
      {"digests_out",
       "--digests-out",
       Type::path,
       "write one line per delivered batch: epoch, sample ids and a 64-bit FNV-1a "
       "digest of the batch's bytes (to compare runs)",
       {},
       nullptr,
       0,
       false,
       "FILE"},
      {"stop_after_batches",
       "--stop-after-batches",
       Type::non_negative,
       "stop after this process delivered N batches (across epochs)",
       {},
       nullptr},
      {"json",
       "--json",
       Type::boolean,
       "print a JSON summary as the last line on stdout",
       {},
       nullptr},
      {"progress",
       "--progress",
       Type::boolean,
       "a progress bar when stderr is a terminal "
       "(default on; --no-progress turns it off)",
       {},
       nullptr,
       0,
       true},
      // Statistics (issue 24; launch/config.h RunOutput, launch/stats_output.h): front
      // end keys of `brigade run`.
      {"stats_interval",
       "--stats-interval",
       Type::real,
       "seconds between two statistics reports (default 10; at least 0.2)",
       {},
       nullptr,
       86400,
       false,
       "SECONDS"},
      {"stats_out",
       "--stats-out",
       Type::path,
       "append one JSON object per statistics interval (schema: README, Statistics)",
       {},
       nullptr,
       0,
       false,
       "FILE"},
      {"metrics_port",
       "--metrics-port",
       Type::non_negative,
       "serve Prometheus metrics at http://ADDRESS:PORT/metrics (0: off, the default)",
       {},
       nullptr,
       65535,
       false,
       "PORT"},
      {"metrics_address",
       "--metrics-address",
       Type::text,
       "the metrics endpoint's IPv4 address (default 127.0.0.1)",
       {},
       nullptr,
       0,
       false,
       "ADDRESS"},
      {"stats",
       "--stats",
       Type::text,
       "HOST:PORT of rank 0's statistics collector, or auto (MASTER_ADDR, MASTER_PORT + 2): "
       "every rank reports there (with the job token) and rank 0 names stragglers",
       {},
       nullptr,
       0,
       false,
       "HOST:PORT|auto"},
      {"stats_consecutive",
       "--stats-consecutive",
       Type::positive,
       "intervals in a row a rank must be slow before it is named a straggler (default 2)",
       {},
       nullptr,
       1000,
       false,
       "K"},
      {"hang_after",
       "--hang-after",
       Type::real,
       "seconds without a request for a batch, the pipeline full, before rank 0 reports a "
       "rank as not consuming (default 60)",
       {},
       nullptr,
       86400,
       false,
       "SECONDS"},
      {"pause_after_batches",
       "--pause-after-batches",
       Type::non_negative,
       "after this process delivered N batches its consumer stops asking for batches until "
       "interrupted: a hung training step, to check the statistics' not-consuming report",
       {},
       nullptr,
       0,
       false,
       "N"},
      {"layout", "--layout", Type::choice, "batch tensor layout (default nhwc)", names(kLayouts),
       [](RunConfig& c, const Value& v) { c.layout = pick(v, kLayouts); }},
      {"checkpoint_dir",
       "--checkpoint-dir",
       Type::path,
       "write this rank's checkpoint (DIR/gen-G.job-J.run-U.rank-R-of-W.ckpt, a new generation "
       "beside the older ones) when the run stops, is interrupted, fails or ends",
       {},
       [](RunConfig& c, const Value& v) { c.checkpoint_dir = as_text(v); },
       0,
       false,
       "DIR"},
      {"keep_checkpoints",
       "--keep-checkpoints",
       Type::non_negative,
       "complete checkpoint sets kept in --checkpoint-dir, older ones pruned (default 2; "
       "0 keeps all)",
       {},
       [](RunConfig& c, const Value& v) { c.keep_checkpoints = as_count(v); },
       1000},
      {"launch_id",
       "--launch-id",
       Type::text,
       "what all ranks of this launch share and no other launch does, telling this run's "
       "checkpoints from an earlier launch's (default: TORCHELASTIC_RUN_ID, else "
       "SLURM_JOB_ID.SLURM_STEP_ID)",
       {},
       [](RunConfig& c, const Value& v) { c.launch_id = as_text(v); }},
      {"resume_from",
       "--resume-from",
       Type::path,
       "resume from the newest complete checkpoint "
       "set in DIR (elastic when --world-size differs)",
       {},
       [](RunConfig& c, const Value& v) { c.resume_from = as_text(v); },
       0,
       false,
       "DIR"},
      {"device",
       "--device",
       Type::device,
       "copy each batch to this device as the last stage: cuda:N (a GPU), or cpu (the "
       "same path with host memory standing in for the device) (default: none)",
       {},
       [](RunConfig& c, const Value& v) { c.device = as_text(v); },
       0,
       false,
       "cpu|cuda:N"},
      {"pinned_direct_mib",
       "--pinned-direct-mib",
       Type::non_negative,
       "with --device: the most page-locked memory (MiB) that decode may write batches "
       "into directly (default 1024); a job that would need more decodes into ordinary "
       "memory and stages each batch through 3 pinned buffers (one host memcpy more)",
       {},
       [](RunConfig& c, const Value& v) { c.pinned_direct_mib = as_count(v); },
       1 << 20,
       false,
       "MIB"},
      {"normalize", "--normalize", Type::choice,
       "uint8 to float, (x/255 - mean)/std with ImageNet's mean and std (or "
       "--normalize-mean/--normalize-std), channels per --layout: on the device with "
       "--device, else on the CPU as float32 (default none)",
       names(kNormalizes),
       [](RunConfig& c, const Value& v) { c.normalize = pick(v, kNormalizes); }},
      {"normalize_mean",
       "--normalize-mean",
       Type::channels,
       "per-channel mean (R,G,B) of --normalize (default 0.485,0.456,0.406)",
       {},
       [](RunConfig& c, const Value& v) { c.normalize_mean = as_channels(v); }},
      {"normalize_std",
       "--normalize-std",
       Type::channels,
       "per-channel standard deviation (R,G,B) of --normalize (default 0.229,0.224,0.225)",
       {},
       [](RunConfig& c, const Value& v) { c.normalize_std = as_channels(v); },
       1},
      {"transform", "--transform", Type::choice,
       "image transform: eval (shorter side to --resize, center crop --size), train "
       "(RandomResizedCrop(--size, --scale, --ratio) + horizontal flip, drawn from seed, "
       "epoch and sample id), none (decode only; images must be --size square) (default "
       "eval; clips take eval only)",
       names(kTransforms),
       [](RunConfig& c, const Value& v) { c.transform.kind = pick(v, kTransforms); }},
      {"size",
       "--size",
       Type::positive,
       "output height = width of images and clip frames (default 224; at most 4096)",
       {},
       [](RunConfig& c, const Value& v) { c.transform.size = as_count(v); },
       media::kMaxTransformSize},
      {"resize",
       "--resize",
       Type::positive,
       "eval: the shorter side before the center crop (default --size * 256 / 224; at "
       "most 65536)",
       {},
       [](RunConfig& c, const Value& v) { c.transform.resize = as_count(v); },
       media::kMaxResize},
      {"scale",
       "--scale",
       Type::range,
       "train: range of the crop's share of the image area (default 0.08,1)",
       {},
       [](RunConfig& c, const Value& v) {
         c.transform.scale_min = as_numbers(v)[0];
         c.transform.scale_max = as_numbers(v)[1];
       },
       1,
       false,
       "MIN,MAX"},
      {"ratio",
       "--ratio",
       Type::range,
       "train: range of the crop's aspect ratio w/h (default 0.75,1.3333333333333333)",
       {},
       [](RunConfig& c, const Value& v) {
         c.transform.ratio_min = as_numbers(v)[0];
         c.transform.ratio_max = as_numbers(v)[1];
       },
       0,
       false,
       "MIN,MAX"},
      {"flip_probability",
       "--flip-probability",
       Type::fraction,
       "train: probability of a horizontal flip (default 0.5)",
       {},
       [](RunConfig& c, const Value& v) { c.transform.flip_probability = std::get<double>(v); },
       0,
       false,
       "P"},
      {"exif_orientation",
       "--exif-orientation",
       Type::boolean,
       "JPEG: turn images upright as their EXIF orientation says before the transform "
       "(default off, as PIL-based loaders)",
       {},
       [](RunConfig& c, const Value& v) { c.transform.exif_orientation = std::get<bool>(v); },
       0,
       true},
      {"roi_decode",
       "--roi-decode",
       Type::boolean,
       "JPEG: decode only the region the transform reads, at the largest DCT scale that "
       "still covers it (default on: faster; off: a full decode, pixel-exact to PIL's)",
       {},
       [](RunConfig& c, const Value& v) { c.transform.roi_decode = std::get<bool>(v); },
       0,
       true},
      {"interpolation", "--interpolation", Type::choice,
       "the resampling filter of eval's resize and train's resized crop, as torchvision's "
       "InterpolationMode on PIL images: bilinear (default) or bicubic (images only; clips "
       "take bilinear)",
       names(kInterpolations),
       [](RunConfig& c, const Value& v) { c.transform.interpolation = pick(v, kInterpolations); }},
      {"clip_stride",
       "--clip-stride",
       Type::positive,
       "clips, train: frames between a clip's 8 frames, from a random first frame (default 4; "
       "a clip shorter than the span gives 8 evenly spaced frames; at most 1024)",
       {},
       [](RunConfig& c, const Value& v) { c.clip_stride = as_count(v); },
       kMaxClipStride},
      {"normalize_dtype", "--normalize-dtype", Type::choice,
       "element type of normalized batches (default float32)", names(kNormalizeDtypes),
       [](RunConfig& c, const Value& v) { c.normalize_dtype = pick(v, kNormalizeDtypes); }},
      {"remote.workers",
       "--workers",
       Type::endpoints,
       "decode on these remote workers (brigade worker), comma-separated (default: none)",
       {},
       [](RunConfig& c, const Value& v) { c.workers = std::get<Endpoints>(v); },
       0,
       false,
       "HOST:PORT,..."},
      {"remote.directory",
       "--directory",
       Type::endpoint,
       "decode on the workers registered with this directory; auto: at MASTER_ADDR, port "
       "MASTER_PORT + 1, hosted by rank 0 (default: none)",
       {"auto"},
       [](RunConfig& c, const Value& v) { c.directory = as_text(v); },
       0,
       false,
       "HOST:PORT|auto"},
      {"remote.on_no_workers", "--on-no-workers", Type::choice,
       "when no remote worker is reachable: decode locally, or fail (default local)",
       names(kOnNoWorkers),
       [](RunConfig& c, const Value& v) { c.on_no_workers = pick(v, kOnNoWorkers); }},
      {"remote.decode", "--decode", Type::choice,
       "with remote workers: remote (every batch on the workers) or hybrid (this rank "
       "decodes at its own pace, the workers take what it cannot keep up with; default "
       "remote)",
       names(kDecodeModes), [](RunConfig& c, const Value& v) { c.decode = pick(v, kDecodeModes); }},
      {"remote.rebalance",
       "--rebalance",
       Type::boolean,
       "rank 0 (hosting the directory, with --stats) has the workers serve the ranks that "
       "fall behind first (default off)",
       {},
       [](RunConfig& c, const Value& v) { c.rebalance = std::get<bool>(v); },
       0,
       true},
      {"remote.token_file",
       "--token-file",
       Type::path,
       "file holding the job token shared with the workers, mode 600 (default: "
       "BRIGADE_TOKEN)",
       {},
       [](RunConfig& c, const Value& v) { c.token_file = as_text(v); },
       0,
       false,
       "FILE"},
      {"remote.tls_cert",
       "--tls-cert",
       Type::path,
       "TLS certificate of this rank (with --tls-key and --tls-ca; default: no TLS)",
       {},
       [](RunConfig& c, const Value& v) { c.tls_cert = as_text(v); },
       0,
       false,
       "FILE"},
      {"remote.tls_key",
       "--tls-key",
       Type::path,
       "TLS private key of --tls-cert",
       {},
       [](RunConfig& c, const Value& v) { c.tls_key = as_text(v); },
       0,
       false,
       "FILE"},
      {"remote.tls_ca",
       "--tls-ca",
       Type::path,
       "TLS certificate authority the workers' certificates must be signed by",
       {},
       [](RunConfig& c, const Value& v) { c.tls_ca = as_text(v); },
       0,
       false,
       "FILE"},
      {"remote.task_timeout",
       "--task-timeout",
       Type::real,
       "seconds a remote worker has for one batch (default 30; a decimal is fine; at "
       "most 3600)",
       {},
       [](RunConfig& c, const Value& v) { c.task_timeout = std::get<double>(v); },
       3600,
       false,
       "SECONDS"},
      {"remote.max_attempts",
       "--max-attempts",
       Type::positive,
       "attempts of one batch on remote workers (default 2; at most 100)",
       {},
       [](RunConfig& c, const Value& v) { c.max_attempts = as_count(v); },
       100},
      {"remote.inflight",
       "--remote-inflight",
       Type::non_negative,
       "batches in flight to remote workers at once (default 0: chosen by the job; at most "
       "1024)",
       {},
       [](RunConfig& c, const Value& v) { c.remote_inflight = as_count(v); },
       kMaxConcurrency},
      // ---- WebDataset tar shards and the shard-aware shuffle (launch/loader/shards.h)
      {"shards",
       "--shards",
       Type::paths,
       "WebDataset tar shards: files and brace ranges (train-{000000..000127}.tar), an "
       "array or one comma-separated string; a sample is the members sharing a key",
       {},
       [](RunConfig& c, const Value& v) { c.shards = std::get<std::vector<std::string>>(v); }},
      {"image_key",
       "--image-key",
       Type::text,
       "with shards: the image member's extensions, ';'-separated (default "
       "jpg;jpeg;png;webp;ppm;pgm;pbm;pnm)",
       {},
       [](RunConfig& c, const Value& v) { c.image_key = as_text(v); },
       0,
       false,
       "EXT;..."},
      {"video_key",
       "--video-key",
       Type::text,
       "with shards: the video member's extensions, ';'-separated (default mp4)",
       {},
       [](RunConfig& c, const Value& v) { c.video_key = as_text(v); },
       0,
       false,
       "EXT;..."},
      {"label_key",
       "--label-key",
       Type::text,
       "with shards: the .json field holding the label (default: the .cls member, if any)",
       {},
       [](RunConfig& c, const Value& v) { c.label_key = as_text(v); },
       0,
       false,
       "FIELD"},
      {"epoch_samples",
       "--epoch-samples",
       Type::non_negative,
       "with [[sources]]: draws per epoch over all ranks (each rank draws ceil(N / world "
       "size)); 0 (default): the sum of the sources' sizes",
       {},
       [](RunConfig& c, const Value& v) {
         c.epoch_samples = static_cast<std::uint64_t>(as_int(v));
       },
       std::numeric_limits<std::int64_t>::max(),
       false,
       "N"},
      {"shuffle_window",
       "--shuffle-window",
       Type::non_negative,
       "with shards and shuffle: read W shards at a time (the shards' order shuffled each "
       "epoch, samples shuffled within each window of W); 0 (default): every sample shuffled "
       "across the whole dataset (at most 1048576)",
       {},
       [](RunConfig& c, const Value& v) { c.shuffle_window = as_int(v); },
       1 << 20,
       false,
       "W"},
  };
  return table;
}

std::int64_t max_of(const Key& key) {
  if (key.max > 0) return key.max;
  return key.type == Type::seed ? std::numeric_limits<std::int64_t>::max()
                                : std::numeric_limits<std::int32_t>::max();
}

std::string expected(const Key& key) {
  const std::string up_to = key.max > 0 ? fmt::format(" up to {}", key.max) : "";
  switch (key.type) {
    case Type::positive:
      return "a positive integer" + up_to;
    case Type::non_negative:
    case Type::seed:
      return "a non-negative integer" + up_to;
    case Type::boolean:
      return "true or false";
    case Type::text:
      return "a string";
    case Type::path:
      return "a path (a non-empty string)";
    case Type::budget:
      return "a count N or a rate \"N%\" (0-100)";
    case Type::device:
      return "cpu, cuda or cuda:N";
    case Type::real:
      return "a positive number" + up_to;
    case Type::endpoints:
      return "HOST:PORT addresses (an array of strings, or one comma-separated string)";
    case Type::fraction:
      return "a number from 0 to 1";
    case Type::range:
      return key.max > 0 ? fmt::format("MIN,MAX with 0 < MIN <= MAX <= {}", key.max)
                         : "MIN,MAX with 0 < MIN <= MAX";
    case Type::channels:
      return key.max > 0 ? "three positive numbers R,G,B" : "three numbers R,G,B";
    case Type::names:
      return "names (an array of strings, or one comma-separated string)";
    case Type::paths:
      return "files (an array of strings, or one string of comma-separated files)";
    case Type::choice: {
      std::string s = "one of ";
      for (std::size_t i = 0; i < key.choices.size(); ++i) {
        s += (i ? ", " : "") + std::string(key.choices[i]);
      }
      return s;
    }
    case Type::endpoint: {
      std::string s = "HOST:PORT";
      for (auto c : key.choices) s += " or " + std::string(c);
      return s;
    }
  }
  return "?";
}

[[noreturn]] void bad_value(std::string_view where, const Key& key, std::string_view got) {
  throw ConfigError(fmt::format("{}: {}: expected {}, got {}", where, key.name, expected(key), got),
                    std::string(key.name));
}

using detail::parse_int;

std::optional<double> parse_real(std::string_view text) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

// Numbers as an array, or as one comma-separated string ("0.08,1"); nullopt if not.
std::optional<std::vector<double>> numbers_of(const Value& value) {
  if (auto* list = std::get_if<std::vector<double>>(&value)) return *list;
  if (auto* d = std::get_if<double>(&value)) return std::vector<double>{*d};
  if (auto* i = std::get_if<std::int64_t>(&value))
    return std::vector<double>{static_cast<double>(*i)};
  auto* s = std::get_if<std::string>(&value);
  if (!s) return std::nullopt;
  std::vector<double> out;
  std::string_view rest = *s;
  while (true) {
    const auto comma = rest.find(',');
    const auto v = parse_real(trim(rest.substr(0, comma)));
    if (!v) return std::nullopt;
    out.push_back(*v);
    if (comma == std::string_view::npos) return out;
    rest.remove_prefix(comma + 1);
  }
}

// parse_endpoint's error names the place and the key, as every ConfigError does.
transport::Endpoint endpoint_of(std::string_view text, std::string_view where, const Key& key) {
  try {
    return transport::parse_endpoint(text, fmt::format("{}: {}", where, key.name));
  } catch (const transport::EndpointError& e) {
    throw ConfigError(e.what(), std::string(key.name));
  }
}

// An array of strings, or one string of comma-separated items.
Endpoints endpoints_of(const Key& key, const Value& value, std::string_view where,
                       const std::string& got) {
  std::vector<std::string> items;
  if (auto* list = std::get_if<std::vector<std::string>>(&value)) {
    items = *list;
  } else if (auto* s = std::get_if<std::string>(&value); s && !s->empty()) {
    std::string_view rest = *s;
    for (auto comma = rest.find(','); comma != std::string_view::npos; comma = rest.find(',')) {
      items.emplace_back(trim(rest.substr(0, comma)));
      rest.remove_prefix(comma + 1);
    }
    items.emplace_back(trim(rest));
  }
  if (items.empty()) bad_value(where, key, got);
  Endpoints out;
  for (const auto& item : items) out.push_back(endpoint_of(item, where, key));
  return out;
}

// Type::paths: an array of non-empty strings, or one string cut at the commas that are
// outside braces ("a-{0..3}.tar,b-{x,y}.tar" is two items).
std::vector<std::string> paths_of(const Key& key, const Value& value, std::string_view where,
                                  const std::string& got) {
  std::vector<std::string> items;
  if (auto* list = std::get_if<std::vector<std::string>>(&value)) {
    items = *list;
  } else if (auto* s = std::get_if<std::string>(&value)) {
    std::string item;
    int depth = 0;
    for (char c : *s) {
      depth += c == '{' ? 1 : c == '}' ? -1 : 0;
      if (c == ',' && depth == 0) {
        items.emplace_back(trim(item));
        item.clear();
      } else {
        item += c;
      }
    }
    items.emplace_back(trim(item));
  }
  if (items.empty()) bad_value(where, key, got);
  for (const auto& i : items)
    if (i.empty()) bad_value(where, key, got);
  return items;
}

// Checks `value` against the key's type; `got` is how to show it in an error.
Value check(const Key& key, Value value, std::string_view where, const std::string& got) {
  switch (key.type) {
    case Type::positive:
    case Type::non_negative:
    case Type::seed: {
      auto* i = std::get_if<std::int64_t>(&value);
      const std::int64_t low = key.type == Type::positive ? 1 : 0;
      if (!i || *i < low || *i > max_of(key)) bad_value(where, key, got);
      return value;
    }
    case Type::boolean:
      if (!std::holds_alternative<bool>(value)) bad_value(where, key, got);
      return value;
    case Type::text:
    case Type::path:
      if (!std::holds_alternative<std::string>(value) || as_text(value).empty()) {
        bad_value(where, key, got);
      }
      return value;
    case Type::choice: {
      auto* s = std::get_if<std::string>(&value);
      if (!s || std::find(key.choices.begin(), key.choices.end(), *s) == key.choices.end()) {
        bad_value(where, key, got);
      }
      return value;
    }
    case Type::device: {
      auto* s = std::get_if<std::string>(&value);
      transport::DeviceSpec spec;
      try {
        spec = transport::parse_device(s ? *s : "");
      } catch (const std::invalid_argument&) {
        bad_value(where, key, got);
      }
      if (spec.kind == transport::DeviceKind::cuda && !transport::built_with_cuda()) {
        throw ConfigError(fmt::format("{}: {}: {}: this build has no CUDA (rebuild where CMake "
                                      "finds the CUDA toolkit)",
                                      where, key.name, got),
                          std::string(key.name));
      }
      return value;
    }
    case Type::real: {
      auto* i = std::get_if<std::int64_t>(&value);
      auto* d = std::get_if<double>(&value);
      const double v = i ? static_cast<double>(*i) : d ? *d : 0;
      if (!(v > 0 && v <= static_cast<double>(max_of(key)))) bad_value(where, key, got);
      return v;
    }
    case Type::endpoints:
      return endpoints_of(key, value, where, got);
    case Type::names: {
      std::vector<std::string> out;
      if (auto* list = std::get_if<std::vector<std::string>>(&value)) {
        out = *list;
      } else if (auto* s = std::get_if<std::string>(&value)) {
        std::string_view rest = *s;
        for (auto comma = rest.find(','); !rest.empty(); comma = rest.find(',')) {
          out.emplace_back(trim(rest.substr(0, comma)));
          rest.remove_prefix(comma == std::string_view::npos ? rest.size() : comma + 1);
        }
      } else {
        bad_value(where, key, got);
      }
      for (const auto& name : out) {
        if (name.empty() || std::count(out.begin(), out.end(), name) > 1)
          bad_value(where, key, got);
      }
      return out;
    }
    case Type::paths:
      return paths_of(key, value, where, got);
    case Type::fraction: {
      const auto n = numbers_of(value);
      if (!n || n->size() != 1 || !((*n)[0] >= 0 && (*n)[0] <= 1)) bad_value(where, key, got);
      return (*n)[0];
    }
    case Type::range: {
      const auto n = numbers_of(value);
      const double top =
          key.max > 0 ? static_cast<double>(key.max) : std::numeric_limits<double>::max();
      if (!n || n->size() != 2 || !std::isfinite((*n)[0]) || !std::isfinite((*n)[1]) ||
          !((*n)[0] > 0 && (*n)[0] <= (*n)[1] && (*n)[1] <= top))
        bad_value(where, key, got);
      return *n;
    }
    case Type::channels: {
      const auto n = numbers_of(value);
      bool ok = n && n->size() == 3;
      for (std::size_t i = 0; ok && i < 3; ++i)
        ok = std::isfinite((*n)[i]) && (key.max == 0 || (*n)[i] > 0);
      if (!ok) bad_value(where, key, got);
      return *n;
    }
    case Type::endpoint: {
      auto* s = std::get_if<std::string>(&value);
      if (!s || s->empty()) bad_value(where, key, got);
      if (std::find(key.choices.begin(), key.choices.end(), *s) == key.choices.end()) {
        endpoint_of(*s, where, key);
      }
      return value;
    }
    case Type::budget: {
      std::string text = std::holds_alternative<std::int64_t>(value) ? std::to_string(as_int(value))
                         : std::holds_alternative<std::string>(value) ? as_text(value)
                                                                      : "";
      try {
        return parse_failure_budget(text, where);
      } catch (const ConfigError&) {
        bad_value(where, key, got);
      }
    }
  }
  return value;
}

const Key* find_key(std::string_view name) {
  for (const auto& k : keys()) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

// Whether some key lives under table `prefix` ("stages", "stages.decode").
bool is_table(std::string_view prefix) {
  for (const auto& k : keys()) {
    if (k.name.size() > prefix.size() && k.name.starts_with(prefix) &&
        k.name[prefix.size()] == '.') {
      return true;
    }
  }
  return false;
}

void note_origin(RunConfig& config, const Key& key, const std::string& where) {
  if (key.origin) config.*key.origin = where;
}

std::string show(const toml::node& node) {
  std::ostringstream out;
  if (node.is_table()) return "a table";
  if (node.is_array()) return node.as_array()->empty() ? "an empty array" : "an array";
  if (auto s = node.value<std::string>(); s && node.is_string()) return "\"" + *s + "\"";
  if (const auto d = node.value<double>(); node.is_floating_point())
    out << (std::trunc(*d) == *d ? fmt::format("{:.1f}", *d) : fmt::format("{}", *d))
        << " (a float)";
  else if (node.is_integer())
    out << *node.value<std::int64_t>();
  else if (node.is_boolean())
    out << (*node.value<bool>() ? "true" : "false");
  else
    out << node.type();
  return out.str();
}

// The node as a Value; an array only of strings.
Value toml_value(const toml::node& node, std::string_view where, const Key& spec) {
  if (node.is_integer()) return *node.value<std::int64_t>();
  if (node.is_floating_point()) return *node.value<double>();
  if (node.is_boolean()) return *node.value<bool>();
  if (node.is_string()) return *node.value<std::string>();
  if (auto* array = node.as_array(); array && array->is_homogeneous(toml::node_type::string)) {
    std::vector<std::string> items;
    for (auto&& item : *array) items.push_back(*item.value<std::string>());
    return items;
  }
  if (auto* array = node.as_array(); array && !array->empty()) {
    std::vector<double> numbers;
    for (auto&& item : *array) {
      if (!item.is_number()) bad_value(where, spec, show(node));
      numbers.push_back(*item.value<double>());
    }
    return numbers;
  }
  bad_value(where, spec, show(node));
}

// A front end's key to its callback: its checked value as one of SettingValue's types.
void hand_over(const Key& key, const Value& value, const FrontEndSetting& front_end) {
  if (!front_end) return;
  if (auto* i = std::get_if<std::int64_t>(&value)) return front_end(key.name, SettingValue(*i));
  if (auto* b = std::get_if<bool>(&value))
    return front_end(key.name, SettingValue(std::in_place_type<bool>, *b));
  if (auto* d = std::get_if<double>(&value)) return front_end(key.name, fmt::format("{}", *d));
  front_end(key.name, as_text(value));
}

void set_key(RunConfig& config, const Key& key, const Value& value, const std::string& where,
             const FrontEndSetting& front_end) {
  if (!key.set) return hand_over(key, value, front_end);
  key.set(config, value);
  note_origin(config, key, where);
}

// The node as the checked value of `spec`, a path resolved against `folder`.
Value node_value(const Key& spec, const toml::node& node, const std::string& where,
                 const std::filesystem::path& folder) {
  Value value = toml_value(node, where, spec);
  value = check(spec, std::move(value), where, show(node));
  if (spec.type == Type::path) {
    std::filesystem::path p(as_text(value));
    // A URL (s3://, https://) is not a path: kept as given.
    if (p.is_relative() && !folder.empty() && !is_object_url(as_text(value)))
      value = (folder / p).lexically_normal().string();
  }
  if (spec.type == Type::paths && !folder.empty()) {
    for (auto& item : std::get<std::vector<std::string>>(value)) {
      std::filesystem::path p(item);
      if (p.is_relative() && !is_object_url(item)) item = (folder / p).lexically_normal().string();
    }
  }
  return value;
}

// The job's keys a [[sources]] table takes (besides name and weight): where a source's
// samples come from.
constexpr std::array<std::string_view, 12> kListingKeys{
    "data",    "list",   "manifest", "manifest_format", "path_column", "label_column",
    "classes", "labels", "shards",   "image_key",       "video_key",   "label_key"};

std::string source_keys_list() {
  std::string out = "name, weight";
  for (auto k : kListingKeys) out += ", " + std::string(k);
  return out;
}

// One [[sources]] table (SOURCES in job_settings.h).
SourceConfig apply_source(const toml::table& table, std::size_t index, const std::string& name,
                          const std::filesystem::path& folder) {
  const std::string at = fmt::format("sources[{}]", index);
  RunConfig listing;  // the job's defaults for the source's keys
  std::string source_name = fmt::format("source{}", index);
  double weight = 1;
  const auto line_of = [&](const toml::node& node) {
    return fmt::format("{}:{}", name, node.source().begin.line);
  };
  for (auto&& [k, node] : table) {
    const std::string key(k.str());
    const std::string where = fmt::format(
        "{}:{}", name, k.source().begin.line ? k.source().begin.line : node.source().begin.line);
    if (key == "name") {
      const auto text = node.value<std::string>();
      if (!node.is_string() || text->empty()) {
        throw ConfigError(
            fmt::format("{}: {}.name: expected a non-empty string, got {}", where, at, show(node)),
            at + ".name");
      }
      source_name = *text;
      continue;
    }
    if (key == "weight") {
      const auto w = node.value<double>();
      if (!node.is_number() || !std::isfinite(*w) || !(*w > 0)) {
        throw ConfigError(fmt::format("{}: {}.weight: expected a finite number > 0, got {}", where,
                                      at, show(node)),
                          at + ".weight");
      }
      weight = *w;
      continue;
    }
    const Key* spec = find_key(key);
    if (!spec || std::find(kListingKeys.begin(), kListingKeys.end(), key) == kListingKeys.end()) {
      throw ConfigError(fmt::format("{}: {}: unknown key '{}' (a source takes {}; the job's other "
                                    "keys go outside [[sources]])",
                                    where, at, key, source_keys_list()),
                        at + "." + key);
    }
    set_key(listing, *spec, node_value(*spec, node, where, folder), where, {});
  }
  if (listing.data.empty() && listing.list.empty() && listing.manifest.empty() &&
      listing.shards.empty()) {
    throw ConfigError(
        fmt::format("{}: {}: no data: give data, list, manifest or shards", line_of(table), at),
        at + ".data");
  }
  return {.name = std::move(source_name),
          .weight = weight,
          .listing = static_cast<const DataListing&>(listing)};
}

void apply_sources(RunConfig& config, const toml::node& node, const std::string& where,
                   const std::string& name, const std::filesystem::path& folder) {
  const auto* array = node.as_array();
  if (!array || array->empty() || !array->is_array_of_tables()) {
    throw ConfigError(
        fmt::format("{}: sources: expected tables ([[sources]] with data = ... and weight = ...), "
                    "got {}",
                    where, show(node)),
        "sources");
  }
  std::vector<SourceConfig> sources;
  for (std::size_t i = 0; i < array->size(); ++i) {
    sources.push_back(apply_source(*array->get(i)->as_table(), i, name, folder));
    for (std::size_t j = 0; j < i; ++j) {
      if (sources[j].name == sources[i].name) {
        throw ConfigError(fmt::format("{}: sources[{}].name: '{}' is also sources[{}]'s name",
                                      where, i, sources[i].name, j),
                          fmt::format("sources[{}].name", i));
      }
    }
  }
  config.sources = std::move(sources);
}

void apply_table(RunConfig& config, const toml::table& table, const std::string& prefix,
                 const std::string& name, const std::filesystem::path& folder,
                 const FrontEndSetting& front_end) {
  for (auto&& [k, node] : table) {
    const std::string key =
        prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    const auto line = k.source().begin.line ? k.source().begin.line : node.source().begin.line;
    const std::string where = fmt::format("{}:{}", name, line);
    if (node.is_table() && is_table(key)) {
      apply_table(config, *node.as_table(), key, name, folder, front_end);
      continue;
    }
    if (key == "sources") {
      apply_sources(config, node, where, name, folder);
      continue;
    }
    const Key* spec = find_key(key);
    if (!spec) {
      throw ConfigError(
          is_table(key) ? fmt::format("{}: {}: expected a table, got {}", where, key, show(node))
                        : fmt::format("{}: unknown key '{}'", where, key),
          key);
    }
    set_key(config, *spec, node_value(*spec, node, where, folder), where, front_end);
  }
}

}  // namespace

actors::FailureBudget parse_failure_budget(std::string_view text, std::string_view where) {
  if (text.empty() || text == "unlimited") return {};
  const bool rate = text.back() == '%';
  auto number = rate ? text.substr(0, text.size() - 1) : text;
  double value = 0;
  auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  const bool ok =
      ec == std::errc() && end == number.data() + number.size() && value >= 0 &&
      (rate ? value <= 100 : value == static_cast<double>(static_cast<std::int64_t>(value)));
  if (!ok) {
    throw ConfigError(
        fmt::format("{}: max_failures: expected a count N or a rate \"N%\" (0-100), got '{}'",
                    where, text),
        "max_failures");
  }
  if (rate) return actors::FailureBudget::rate(value / 100.0, 100);
  return actors::FailureBudget(static_cast<std::int64_t>(value));
}

void apply_toml(RunConfig& config, std::string_view text, const std::string& name,
                const FrontEndSetting& front_end) {
  toml::table table;
  try {
    table = toml::parse(text, name);
  } catch (const toml::parse_error& e) {
    throw ConfigError(fmt::format("{}:{}: {}", name, e.source().begin.line, e.description()));
  }
  apply_table(config, table, "", name, std::filesystem::path(name).parent_path(), front_end);
}

void apply_toml_file(RunConfig& config, const std::string& path, const FrontEndSetting& front_end) {
  std::ifstream in(path);
  if (!in) throw ConfigError(fmt::format("{}: cannot read the config file", path));
  std::ostringstream text;
  text << in.rdbuf();
  apply_toml(config, text.str(), path, front_end);
}
namespace {

// The flag's text as the Value its type checks; text that is no number stays text, so
// that the error shows it.
Value flag_value(const Key& key, std::string_view value, bool negated) {
  switch (key.type) {
    case Type::boolean:
      return !negated;
    case Type::positive:
    case Type::non_negative:
    case Type::seed:
      if (auto i = parse_int(value)) return *i;
      break;
    case Type::real:
      if (auto d = parse_real(value)) return *d;
      break;
    default:
      break;
  }
  return std::string(value);
}

}  // namespace

void apply_setting(RunConfig& config, std::string_view key, std::string_view text,
                   std::string_view where, bool negated, const FrontEndSetting& front_end) {
  const Key* spec = find_key(key);
  if (!spec) throw ConfigError(fmt::format("{}: unknown key '{}'", where, key), std::string(key));
  Value v = flag_value(*spec, text, negated);
  const std::string got = fmt::format("'{}'", text);
  // Errors name `where` (the flag); the key name follows, as for TOML.
  set_key(config, *spec, check(*spec, std::move(v), where, got), std::string(where), front_end);
}

namespace {

std::string metavar(const Key& k) {
  if (!k.metavar.empty()) return std::string(k.metavar);
  switch (k.type) {
    case Type::positive:
    case Type::non_negative:
    case Type::seed:
      return "N";
    case Type::budget:
      return "N|N%";
    case Type::choice: {
      std::string s;
      for (auto c : k.choices) s += (s.empty() ? "" : "|") + std::string(c);
      return s;
    }
    case Type::path:
      return "PATH";
    case Type::channels:
      return "R,G,B";
    case Type::paths:
      return "FILE,...";
    default:
      return "";
  }
}

}  // namespace

std::vector<SettingKey> setting_keys() {
  std::vector<SettingKey> out;
  for (const auto& k : keys()) {
    out.push_back({k.name, k.flag, k.help, k.type != Type::boolean, k.negatable, metavar(k),
                   k.set != nullptr});
  }
  return out;
}

namespace {

// The transform's default resize (decode_spec()'s), and the spec's checks
// (launch/decode.h validate(): media's ranges and the clips' rules) on the spec the job
// will use, so that a bad combination fails before the job, naming its key.
void resolve_transform(RunConfig& config) {
  const DecodeSpec spec = decode_spec(config, 0);
  config.transform.resize = spec.transform.resize;
  try {
    validate(spec);
  } catch (const SpecError& e) {
    throw ConfigError(e.what(), e.field());
  }
}

}  // namespace

namespace {

// The checks of one listing's data keys (the job's, or a source's: `at` "sources[i].").
void check_data_keys(const RunConfig& config, const std::string& at) {
  if (!config.data.empty() && !config.list.empty()) {
    throw ConfigError(fmt::format("{}data and {}list: give one of them, not both", at, at),
                      at + "list");
  }
  if (!config.shards.empty() &&
      (!config.data.empty() || !config.list.empty() || !config.manifest.empty())) {
    throw ConfigError(fmt::format("{}shards: give shards, data, list or manifest, not several", at),
                      at + "shards");
  }
  if (!config.manifest.empty() && (!config.data.empty() || !config.list.empty())) {
    throw ConfigError(fmt::format("{}manifest and {}{}: give one of them, not both", at, at,
                                  config.data.empty() ? "list" : "data"),
                      at + "manifest");
  }
}

}  // namespace

void resolve(RunConfig& config, const Getenv& getenv) {
  detail::resolve_launch(config, getenv);
  check_data_keys(config, "");
  if (!config.sources.empty()) {
    const std::pair<const char*, bool> listings[] = {{"data", !config.data.empty()},
                                                     {"list", !config.list.empty()},
                                                     {"manifest", !config.manifest.empty()},
                                                     {"shards", !config.shards.empty()}};
    for (const auto& [key, given] : listings) {
      if (!given) continue;
      throw ConfigError(fmt::format("sources and {}: a mix takes its samples from each "
                                    "[[sources]] table's own {}; give one or the other",
                                    key, key),
                        "sources");
    }
    for (std::size_t i = 0; i < config.sources.size(); ++i)
      check_data_keys(source_config(config, config.sources[i]), fmt::format("sources[{}].", i));
  } else if (config.epoch_samples > 0) {
    throw ConfigError("epoch_samples: sets the draws of a mix's epoch; it needs [[sources]]",
                      "epoch_samples");
  }
  bool any_shards = !config.shards.empty();
  for (const auto& s : config.sources) any_shards = any_shards || !s.listing.shards.empty();
  if (config.shuffle_window > 0 && !any_shards) {
    throw ConfigError("shuffle_window: the shard-block shuffle needs shards", "shuffle_window");
  }
  if (config.launch_id.empty()) {
    if (const char* id = getenv("TORCHELASTIC_RUN_ID"); id && *id) {
      config.launch_id = id;
    } else if (const char* job = getenv("SLURM_JOB_ID"); job && *job) {
      const char* step = getenv("SLURM_STEP_ID");
      config.launch_id = std::string(job) + "." + (step && *step ? step : "0");
    }
  }
  if (!config.batch_size) config.batch_size = config.kind == MediaKind::video ? 8 : 32;
  if (!config.threads) {
    config.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  if (!config.decode_concurrency) config.decode_concurrency = *config.threads;
  if (config.normalize != Normalize::none && config.device.empty() &&
      config.normalize_dtype != media::DType::float32) {
    const auto dtype = media::dtype_name(config.normalize_dtype);
    throw ConfigError(
        fmt::format(
            "normalize_dtype {}: without a device, batches are normalized on the CPU as float32; "
            "{} needs --device",
            dtype, dtype),
        "normalize_dtype");
  }
  resolve_transform(config);
  detail::resolve_remote(config, getenv);
}

}  // namespace brigade::launch