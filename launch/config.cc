#include "launch/config.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <toml++/toml.h>
#include <unistd.h>

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

#include "transport/device/device.h"
#include "transport/files/files.h"
#include "transport/remote/endpoint.h"

namespace brigade::launch {
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
};

using Endpoints = std::vector<transport::Endpoint>;
using Value = std::variant<std::int64_t, bool, std::string, double, std::vector<std::string>,
                           Endpoints, std::vector<double>>;

// One key of the table. Everything that differs between keys is a field here, never a
// comparison of key names in the code below.
struct Key {
  std::string_view name;  // dotted TOML key
  std::string_view flag;  // "--flag" (switches: the "on" form; "" if none)
  Type type;
  std::string_view help;
  std::vector<std::string_view> choices{};
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
       "folder of media, searched recursively, sorted by path "
       "(default: the demo dataset, generated once)",
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
      {"kind",
       "--kind",
       Type::choice,
       "image or video (8 evenly spaced 224x224 frames per clip)",
       {"image", "video"},
       [](RunConfig& c, const Value& v) {
         c.kind = as_text(v) == "video" ? MediaKind::video : MediaKind::image;
       }},
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
       [](RunConfig& c, const Value& v) {
         c.max_failures =
             std::holds_alternative<std::string>(v) ? as_text(v) : std::to_string(as_int(v));
       }},
      {"ids_out",
       "--ids-out",
       Type::path,
       "write delivered sample ids, one per line, in "
       "delivery order",
       {},
       [](RunConfig& c, const Value& v) { c.ids_out = as_text(v); },
       0,
       false,
       "FILE"},
      {"digests_out",
       "--digests-out",
       Type::path,
       "write one line per delivered batch: epoch, sample ids and a 64-bit FNV-1a "
       "digest of the batch's bytes (to compare runs)",
       {},
       [](RunConfig& c, const Value& v) { c.digests_out = as_text(v); },
       0,
       false,
       "FILE"},
      {"stop_after_batches",
       "--stop-after-batches",
       Type::non_negative,
       "stop after this process delivered N batches (across epochs)",
       {},
       [](RunConfig& c, const Value& v) { c.stop_after_batches = as_int(v); }},
      {"json",
       "--json",
       Type::boolean,
       "print a JSON summary as the last line on stdout",
       {},
       [](RunConfig& c, const Value& v) { c.json = std::get<bool>(v); }},
      {"progress",
       "--progress",
       Type::boolean,
       "a progress bar when stderr is a terminal "
       "(default on; --no-progress turns it off)",
       {},
       [](RunConfig& c, const Value& v) { c.progress = std::get<bool>(v); },
       0,
       true,
       {},
       &RunConfig::progress_origin},
      {"layout",
       "--layout",
       Type::choice,
       "batch tensor layout (default nhwc)",
       {"nhwc", "nchw"},
       [](RunConfig& c, const Value& v) {
         c.layout = as_text(v) == "nchw" ? Layout::nchw : Layout::nhwc;
       }},
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
      {"normalize",
       "--normalize",
       Type::choice,
       "uint8 to float, (x/255 - mean)/std with ImageNet's mean and std (or "
       "--normalize-mean/--normalize-std), channels per --layout: on the device with "
       "--device, else on the CPU as float32 (default none)",
       {"none", "imagenet"},
       [](RunConfig& c, const Value& v) { c.normalize = as_text(v); }},
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
      {"transform",
       "--transform",
       Type::choice,
       "image transform: eval (shorter side to --resize, center crop --size), train "
       "(RandomResizedCrop(--size, --scale, --ratio) + horizontal flip, drawn from seed, "
       "epoch and sample id), none (decode only; images must be --size square) (default "
       "eval; clips take eval only)",
       {"eval", "train", "none"},
       [](RunConfig& c, const Value& v) { c.transform = as_text(v); }},
      {"size",
       "--size",
       Type::positive,
       "output height = width of images and clip frames (default 224; at most 4096)",
       {},
       [](RunConfig& c, const Value& v) { c.size = as_count(v); },
       4096},
      {"resize",
       "--resize",
       Type::positive,
       "eval: the shorter side before the center crop (default --size * 256 / 224; at "
       "most 65536)",
       {},
       [](RunConfig& c, const Value& v) { c.resize = as_count(v); },
       65536},
      {"scale",
       "--scale",
       Type::range,
       "train: range of the crop's share of the image area (default 0.08,1)",
       {},
       [](RunConfig& c, const Value& v) {
         c.scale = {as_numbers(v)[0], as_numbers(v)[1]};
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
         c.ratio = {as_numbers(v)[0], as_numbers(v)[1]};
       },
       0,
       false,
       "MIN,MAX"},
      {"flip_probability",
       "--flip-probability",
       Type::fraction,
       "train: probability of a horizontal flip (default 0.5)",
       {},
       [](RunConfig& c, const Value& v) { c.flip_probability = std::get<double>(v); },
       0,
       false,
       "P"},
      {"exif_orientation",
       "--exif-orientation",
       Type::boolean,
       "JPEG: turn images upright as their EXIF orientation says before the transform "
       "(default off, as PIL-based loaders)",
       {},
       [](RunConfig& c, const Value& v) { c.exif_orientation = std::get<bool>(v); },
       0,
       true},
      {"roi_decode",
       "--roi-decode",
       Type::boolean,
       "JPEG: decode only the region the transform reads, at the largest DCT scale that "
       "still covers it (default on: faster; off: a full decode, pixel-exact to PIL's)",
       {},
       [](RunConfig& c, const Value& v) { c.roi_decode = std::get<bool>(v); },
       0,
       true},
      {"clip_stride",
       "--clip-stride",
       Type::positive,
       "clips, train: frames between a clip's 8 frames, from a random first frame (default 4; "
       "a clip shorter than the span gives 8 evenly spaced frames; at most 1024)",
       {},
       [](RunConfig& c, const Value& v) { c.clip_stride = as_count(v); },
       1024},
      {"normalize_dtype",
       "--normalize-dtype",
       Type::choice,
       "element type of normalized batches (default float32)",
       {"float32", "float16"},
       [](RunConfig& c, const Value& v) { c.normalize_dtype = as_text(v); }},
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
      {"remote.on_no_workers",
       "--on-no-workers",
       Type::choice,
       "when no remote worker is reachable: decode locally, or fail (default local)",
       {"local", "fail"},
       [](RunConfig& c, const Value& v) { c.on_no_workers = as_text(v); }},
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

std::optional<std::int64_t> parse_int(std::string_view text) {
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

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
        parse_failure_budget(text, where);
      } catch (const ConfigError&) {
        bad_value(where, key, got);
      }
      return text;
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

void apply_table(RunConfig& config, const toml::table& table, const std::string& prefix,
                 const std::string& name, const std::filesystem::path& folder) {
  for (auto&& [k, node] : table) {
    const std::string key =
        prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    const auto line = k.source().begin.line ? k.source().begin.line : node.source().begin.line;
    const std::string where = fmt::format("{}:{}", name, line);
    if (node.is_table() && is_table(key)) {
      apply_table(config, *node.as_table(), key, name, folder);
      continue;
    }
    const Key* spec = find_key(key);
    if (!spec) {
      throw ConfigError(
          is_table(key) ? fmt::format("{}: {}: expected a table, got {}", where, key, show(node))
                        : fmt::format("{}: unknown key '{}'", where, key),
          key);
    }
    Value value = toml_value(node, where, *spec);
    value = check(*spec, std::move(value), where, show(node));
    if (spec->type == Type::path) {
      std::filesystem::path p(as_text(value));
      if (p.is_relative() && !folder.empty()) value = (folder / p).lexically_normal().string();
    }
    spec->set(config, value);
    note_origin(config, *spec, where);
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

void apply_toml(RunConfig& config, std::string_view text, const std::string& name) {
  toml::table table;
  try {
    table = toml::parse(text, name);
  } catch (const toml::parse_error& e) {
    throw ConfigError(fmt::format("{}:{}: {}", name, e.source().begin.line, e.description()));
  }
  apply_table(config, table, "", name, std::filesystem::path(name).parent_path());
}

void apply_toml_file(RunConfig& config, const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(fmt::format("{}: cannot read the config file", path));
  std::ostringstream text;
  text << in.rdbuf();
  apply_toml(config, text.str(), path);
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

void apply_flag(RunConfig& config, std::string_view flag, std::string_view value) {
  bool negated = false;
  const Key* spec = nullptr;
  for (const auto& k : keys()) {
    if (k.flag == flag) spec = &k;
    if (k.negatable && flag.starts_with("--no-") && k.flag.substr(2) == flag.substr(5)) {
      spec = &k;
      negated = true;
    }
  }
  if (!spec) throw ConfigError(fmt::format("{}: unknown option", flag));
  Value v = flag_value(*spec, value, negated);
  const std::string got = fmt::format("'{}'", value);
  // Errors name the flag; the key name follows, as for TOML.
  spec->set(config, check(*spec, std::move(v), flag, got));
  note_origin(config, *spec, std::string(flag));
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
    default:
      return "";
  }
}

}  // namespace

std::vector<FlagInfo> run_flags() {
  std::vector<FlagInfo> flags;
  for (const auto& k : keys()) {
    flags.push_back({k.flag, k.help, k.type != Type::boolean, k.negatable, metavar(k)});
  }
  return flags;
}

namespace {

// The environment, an empty variable counting as unset.
class Env {
 public:
  explicit Env(const Getenv& getenv) : getenv_(getenv) {}
  const char* operator()(const char* name) const {
    const char* value = getenv_(name);
    return value && *value ? value : nullptr;
  }

 private:
  const Getenv& getenv_;
};

std::uint32_t env_count(const char* name, std::string_view text, std::int64_t low,
                        std::string_view key) {
  auto v = parse_int(text);
  if (!v || *v < low || *v > std::numeric_limits<std::int32_t>::max()) {
    throw ConfigError(fmt::format("{}={}: expected {} integer", name, text,
                                  low ? "a positive" : "a non-negative"),
                      std::string(key));
  }
  return static_cast<std::uint32_t>(*v);
}

// Where one launcher puts the four counts; "" where it has no variable.
struct LauncherVars {
  std::string_view name;
  const char* rank;
  const char* world_size;
  const char* local_rank;
  const char* local_world_size;
};
constexpr LauncherVars kTorchrun{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                                 "LOCAL_WORLD_SIZE"};
constexpr LauncherVars kSlurm{"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
                              "SLURM_NTASKS_PER_NODE"};
constexpr LauncherVars kNoLauncher{"none", "", "", "", ""};

// Slurm's other way to say tasks per node, when SLURM_NTASKS_PER_NODE is unset.
constexpr const char* kSlurmTasksPerNode = "SLURM_TASKS_PER_NODE";

const LauncherVars& find_launcher(const Env& env) {
  if (env(kTorchrun.rank) || env(kTorchrun.world_size)) return kTorchrun;
  if (env(kSlurm.rank) || env(kSlurm.world_size)) return kSlurm;
  return kNoLauncher;
}

// Under torchrun, one half of a pair without the other while Slurm's other half is set:
// taking Slurm's would count srun's tasks (torchrun launchers), not trainers.
void refuse_mixed_halves(const Env& env, const char* have, const char* missing, const char* slurms,
                         std::string_view fix, const char* key) {
  const char* given = env(have);
  const char* theirs = env(slurms);
  if (!given || env(missing) || !theirs) return;
  throw ConfigError(fmt::format("{}={} (torchrun) without {}; {}={} is Slurm's: set {}", have,
                                given, missing, slurms, theirs, fix),
                    key);
}

void read_count(std::optional<std::uint32_t>& field, std::string& origin, const Env& env,
                const char* name, std::int64_t low, std::string_view key) {
  if (field || !*name) return;
  if (const char* text = env(name)) {
    field = env_count(name, text, low, key);
    origin = name;
  }
}

// This node's entry of SLURM_TASKS_PER_NODE, "2(x3),1" (2 tasks on each of 3 nodes, then
// 1), picked by SLURM_NODEID; without it, the entry all nodes share; else unset.
std::optional<std::uint32_t> tasks_on_this_node(const Env& env, std::string_view text) {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> runs;  // (tasks, nodes)
  for (std::size_t begin = 0; begin <= text.size();) {
    const auto end = std::min(text.find(',', begin), text.size());
    const auto item = text.substr(begin, end - begin);
    const auto paren = item.find("(x");
    const auto tasks = parse_int(item.substr(0, paren));
    std::optional<std::int64_t> nodes = 1;
    if (paren != std::string_view::npos) {
      nodes = item.ends_with(')') ? parse_int(item.substr(paren + 2, item.size() - paren - 3))
                                  : std::nullopt;
    }
    if (!tasks || !nodes || *tasks < 1 || *nodes < 1 ||
        *tasks > std::numeric_limits<std::int32_t>::max() ||
        *nodes > std::numeric_limits<std::int32_t>::max()) {
      throw ConfigError(
          fmt::format("{}={}: expected task counts like 2(x3),1", kSlurmTasksPerNode, text));
    }
    runs.emplace_back(static_cast<std::uint32_t>(*tasks), static_cast<std::uint32_t>(*nodes));
    begin = end + 1;
  }
  if (const char* id = env("SLURM_NODEID")) {
    std::uint64_t node = env_count("SLURM_NODEID", id, 0, "");
    for (auto [tasks, nodes] : runs) {
      if (node < nodes) return tasks;
      node -= nodes;
    }
    return std::nullopt;
  }
  const bool same = std::all_of(runs.begin(), runs.end(),
                                [&](const auto& run) { return run.first == runs[0].first; });
  return same ? std::optional(runs[0].first) : std::nullopt;
}

void resolve_local(RunConfig& config, const Env& env, const LauncherVars& launcher) {
  std::string rank_origin, size_origin;
  // Not keys: the launch environment alone gives the local counts.
  read_count(config.local_rank, rank_origin, env, launcher.local_rank, 0, "");
  read_count(config.local_world_size, size_origin, env, launcher.local_world_size, 1, "");
  const char* per_node = env(kSlurmTasksPerNode);
  if (&launcher == &kSlurm && !config.local_world_size && per_node) {
    config.local_world_size = tasks_on_this_node(env, per_node);
    size_origin = kSlurmTasksPerNode;
  }
  if (config.local_rank && config.local_world_size &&
      *config.local_rank >= *config.local_world_size) {
    throw ConfigError(
        fmt::format("local rank {} (from {}) must be less than the local world size {} (from {})",
                    *config.local_rank, rank_origin, *config.local_world_size, size_origin));
  }
}

std::string slurm_launch_node(const Env& env) {
  if (const char* ip = env("SLURM_LAUNCH_NODE_IPADDR")) return ip;
  const char* nodelist = env("SLURM_JOB_NODELIST");
  if (!nodelist) return {};
  try {
    return first_slurm_host(nodelist);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("SLURM_JOB_NODELIST: {}", e.what()));
  }
}

void resolve_master(RunConfig& config, const Env& env, const LauncherVars& launcher) {
  if (const char* addr = env("MASTER_ADDR")) {
    config.master_addr = addr;
  } else if (&launcher == &kSlurm) {
    config.master_addr = slurm_launch_node(env);
  }
  if (const char* port = env("MASTER_PORT")) {
    auto v = parse_int(port);
    if (!v || *v < 1 || *v > 65535) {
      throw ConfigError(fmt::format("MASTER_PORT={}: expected a port 1-65535", port));
    }
    config.master_port = static_cast<int>(*v);
  } else if (!config.master_addr.empty()) {
    config.master_port = kDefaultMasterPort;
  }
}

// Under torchrun, each pair of counts comes whole from its variables (or from flags),
// never half from Slurm's.
void refuse_mixed_launchers(const RunConfig& config, const Env& env) {
  const char* slurm_size =
      env(kSlurm.local_world_size) ? kSlurm.local_world_size : kSlurmTasksPerNode;
  if (!config.world_size) {
    refuse_mixed_halves(env, kTorchrun.rank, kTorchrun.world_size, kSlurm.world_size,
                        "WORLD_SIZE or --world-size", "world_size");
  }
  if (!config.rank) {
    refuse_mixed_halves(env, kTorchrun.world_size, kTorchrun.rank, kSlurm.rank, "RANK or --rank",
                        "rank");
  }
  refuse_mixed_halves(env, kTorchrun.local_rank, kTorchrun.local_world_size, slurm_size,
                      kTorchrun.local_world_size, "");
  refuse_mixed_halves(env, kTorchrun.local_world_size, kTorchrun.local_rank, kSlurm.local_rank,
                      kTorchrun.local_rank, "");
}

void resolve_launch(RunConfig& config, const Env& env) {
  const LauncherVars& launcher = find_launcher(env);
  config.launcher = launcher.name;
  if (&launcher == &kTorchrun) refuse_mixed_launchers(config, env);
  read_count(config.rank, config.rank_origin, env, launcher.rank, 0, "rank");
  read_count(config.world_size, config.world_size_origin, env, launcher.world_size, 1,
             "world_size");
  if (!config.rank) config.rank = 0;
  if (!config.world_size) config.world_size = 1;
  if (*config.rank >= *config.world_size) {
    throw ConfigError(
        fmt::format("rank {} (from {}) must be less than the world size {} (from {})", *config.rank,
                    config.rank_origin, *config.world_size, config.world_size_origin),
        "rank");
  }
  resolve_local(config, env, launcher);
  resolve_master(config, env, launcher);
}

[[noreturn]] void file_error(std::string_view key, const std::string& path) {
  throw ConfigError(
      fmt::format("{} {}: cannot read: {}", key, path, std::generic_category().message(errno)),
      fmt::format("remote.{}", key));
}

// The whole file. `secret`: refused when group or others may read it (ssh's rule).
std::string read_whole(std::string_view key, const std::string& path, bool secret) {
  transport::FileDescriptor file(path, O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (file.get() < 0 || ::fstat(file.get(), &st) != 0) file_error(key, path);
  if (secret && (st.st_mode & 077) != 0) {
    throw ConfigError(fmt::format("{} {}: permissions {:04o} are too open; chmod 600", key, path,
                                  st.st_mode & 07777),
                      fmt::format("remote.{}", key));
  }
  std::string text;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(file.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) file_error(key, path);
    if (n == 0) return text;
    text.append(buffer, static_cast<std::size_t>(n));
  }
}

std::string job_token(const RunConfig& config, const Env& env) {
  if (config.token_file.empty()) {
    const char* token = env("BRIGADE_TOKEN");
    if (!token) {
      throw ConfigError("a remote run needs a job token: --token-file FILE or BRIGADE_TOKEN",
                        "remote.token_file");
    }
    return token;
  }
  std::string token = read_whole("token_file", config.token_file, true);
  token.erase(token.find_last_not_of(" \t\r\n") + 1);
  if (token.empty()) {
    throw ConfigError(fmt::format("token_file {}: the file is empty", config.token_file),
                      "remote.token_file");
  }
  return token;
}

void check_tls(const RunConfig& config) {
  struct TlsFile {
    std::string_view key, flag;
    const std::string& path;
  };
  const TlsFile files[] = {{"tls_cert", "--tls-cert", config.tls_cert},
                           {"tls_key", "--tls-key", config.tls_key},
                           {"tls_ca", "--tls-ca", config.tls_ca}};
  std::string missing;
  int given = 0;
  for (const auto& f : files) {
    if (!f.path.empty()) ++given;
    if (f.path.empty())
      missing += fmt::format("{}{} ({})", missing.empty() ? "" : ", ", f.key, f.flag);
  }
  if (given == 0) return;
  if (!missing.empty()) {
    throw ConfigError(
        fmt::format("TLS takes tls_cert, tls_key and tls_ca together, or none: {} missing",
                    missing),
        "remote.tls_cert");
  }
  for (const auto& f : files) read_whole(f.key, f.path, false);
}

void resolve_directory(RunConfig& config) {
  if (config.directory != "auto") return;
  if (config.master_addr.empty()) {
    throw ConfigError(
        "directory auto: the launch environment names no master: looked for MASTER_ADDR "
        "(torchrun), and under Slurm SLURM_LAUNCH_NODE_IPADDR, then SLURM_JOB_NODELIST; give "
        "--directory HOST:PORT",
        "remote.directory");
  }
  const int port = config.master_port + kDirectoryPortOffset;
  if (port > 65535) {
    throw ConfigError(fmt::format("directory auto: port {} (MASTER_PORT {} + {}) is past 65535",
                                  port, config.master_port, kDirectoryPortOffset),
                      "remote.directory");
  }
  config.directory =
      transport::Endpoint{config.master_addr, static_cast<std::uint16_t>(port)}.to_string();
}

void resolve_remote(RunConfig& config, const Env& env) {
  if (config.on_no_workers != "local" && config.on_no_workers != "fail") {
    throw ConfigError(
        fmt::format("on_no_workers: expected local or fail, got '{}'", config.on_no_workers),
        "remote.on_no_workers");
  }
  if (!config.remote()) return;
  resolve_directory(config);
  config.token = job_token(config, env);
  check_tls(config);
}

// A malformed host list; `why` says what is wrong.
ConfigError host_list_error(std::string_view nodelist, std::string_view why) {
  return ConfigError(fmt::format(
      "expected a Slurm host list like node[001-004,007],gpu12 ({}), got '{}'", why, nodelist));
}

std::optional<std::int64_t> digits(std::string_view text) {
  const bool all =
      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  return all ? parse_int(text) : std::nullopt;
}

// The first number of a bracket's "001-004,007", as written (zero padding kept).
std::string_view first_in_brackets(std::string_view nodelist, std::string_view ranges) {
  if (ranges.empty()) throw host_list_error(nodelist, "an empty '[]'");
  std::string_view first;
  for (std::size_t begin = 0; begin <= ranges.size();) {
    const auto end = std::min(ranges.find(',', begin), ranges.size());
    const auto range = ranges.substr(begin, end - begin);
    const auto dash = range.find('-');
    const auto low = range.substr(0, dash);
    const auto high = dash == std::string_view::npos ? low : range.substr(dash + 1);
    const auto a = digits(low);
    const auto b = digits(high);
    if (!a || !b || *a > *b) {
      throw host_list_error(nodelist, fmt::format("'{}' in brackets is no number or range", range));
    }
    if (first.empty()) first = low;
    begin = end + 1;
  }
  return first;
}

}  // namespace

std::string first_slurm_host(std::string_view nodelist) {
  std::string first;
  bool in_first = true;    // still in the list's first host
  bool host_empty = true;  // nothing yet of the current host
  for (std::size_t i = 0; i <= nodelist.size();) {
    if (i == nodelist.size() || nodelist[i] == ',') {
      if (host_empty) throw host_list_error(nodelist, "an empty host");
      in_first = false;
      host_empty = true;
      ++i;
      continue;
    }
    host_empty = false;
    if (nodelist[i] == '[') {
      const auto close = nodelist.find(']', i);
      if (close == std::string_view::npos) throw host_list_error(nodelist, "an unclosed '['");
      const auto low = first_in_brackets(nodelist, nodelist.substr(i + 1, close - i - 1));
      if (in_first) first += low;
      i = close + 1;
      continue;
    }
    if (nodelist[i] == ']' || nodelist[i] == ' ' || nodelist[i] == '\t') {
      throw host_list_error(nodelist, fmt::format("a stray '{}'", nodelist[i]));
    }
    if (in_first) first += nodelist[i];
    ++i;
  }
  return first;
}

namespace {

// Defaults and checks of the transform keys (the keys' own checks ran as they were set).
void resolve_transform(RunConfig& config) {
  if (!config.resize) config.resize = static_cast<int>(std::int64_t(config.size) * 256 / 224);
  if (config.transform == "eval" && *config.resize < config.size) {
    throw ConfigError(fmt::format("resize {}: eval's shorter side must be at least size {}",
                                  *config.resize, config.size),
                      "resize");
  }
  if (config.kind == MediaKind::video && config.transform == "none") {
    throw ConfigError(
        "transform none: clips (kind video) take eval (evenly spaced frames, center crop) or "
        "train (frames at clip_stride from a random first frame, a random crop and flip)",
        "transform");
  }
}

}  // namespace

void resolve(RunConfig& config, const Getenv& getenv) {
  const Env env(getenv);
  resolve_launch(config, env);
  if (!config.data.empty() && !config.list.empty()) {
    throw ConfigError("data and list: give one of them, not both", "list");
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
  config.failure_budget = parse_failure_budget(config.max_failures, "max_failures");
  if (config.normalize != "none" && config.device.empty() && config.normalize_dtype != "float32") {
    throw ConfigError(
        fmt::format(
            "normalize_dtype {}: without a device, batches are normalized on the CPU as float32; "
            "{} needs --device",
            config.normalize_dtype, config.normalize_dtype),
        "normalize_dtype");
  }
  resolve_transform(config);
  resolve_remote(config, env);
}

std::string read_job_token(const std::string& token_file, const Getenv& getenv) {
  RunConfig config;
  config.token_file = token_file;
  return job_token(config, Env(getenv));
}

}  // namespace brigade::launch
