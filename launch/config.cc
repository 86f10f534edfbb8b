#include "launch/config.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>
#include <variant>
#include <vector>

#include "transport/device.h"

namespace brigade::launch {
namespace {

// How a key's value is checked; also the "expected …" text of its errors.
enum class Type { positive, non_negative, seed, boolean, text, path, choice, budget, device };

using Value = std::variant<std::int64_t, bool, std::string>;

// One key of the table. Everything that differs between keys is a field here, never a
// comparison of key names in the code below.
struct Key {
  std::string_view name;  // dotted TOML key
  std::string_view flag;  // "--flag" (switches: the "on" form; "" if none)
  Type type;
  std::string_view help;
  std::vector<std::string_view> choices{};
  void (*set)(RunConfig&, const Value&) = nullptr;
  std::int64_t max = 0;        // integers: the largest value accepted (0: the type's own)
  bool negatable = false;      // switches: "--no-<name>" turns it off
  std::string_view metavar{};  // in help, instead of the type's (paths: FILE or DIR)
  std::string RunConfig::*origin = nullptr;  // records where the value came from
};

std::int64_t as_int(const Value& v) { return std::get<std::int64_t>(v); }
const std::string& as_text(const Value& v) { return std::get<std::string>(v); }
int as_count(const Value& v) { return static_cast<int>(as_int(v)); }

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
       [](RunConfig& c, const Value& v) { c.epochs = static_cast<std::uint64_t>(as_int(v)); }},
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
       true},
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
       "on the device: uint8 to float, (x/255 - mean)/std with ImageNet's mean and std, "
       "channels moved per --layout (default none; needs --device)",
       {"none", "imagenet"},
       [](RunConfig& c, const Value& v) { c.normalize = as_text(v); }},
      {"normalize_dtype",
       "--normalize-dtype",
       Type::choice,
       "element type of normalized batches (default float32)",
       {"float32", "float16"},
       [](RunConfig& c, const Value& v) { c.normalize_dtype = as_text(v); }},
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
    case Type::choice: {
      std::string s = "one of ";
      for (std::size_t i = 0; i < key.choices.size(); ++i) {
        s += (i ? ", " : "") + std::string(key.choices[i]);
      }
      return s;
    }
  }
  return "?";
}

[[noreturn]] void bad_value(std::string_view where, const Key& key, std::string_view got) {
  throw ConfigError(
      fmt::format("{}: {}: expected {}, got {}", where, key.name, expected(key), got));
}

std::optional<std::int64_t> parse_int(std::string_view text) {
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
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
        throw ConfigError(
            fmt::format("{}: {}: {}: this build has no CUDA (rebuild where CMake "
                        "finds the CUDA toolkit)",
                        where, key.name, got));
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
  if (node.is_array()) return "an array";
  if (auto s = node.value<std::string>(); s && node.is_string()) return "\"" + *s + "\"";
  if (node.is_floating_point())
    out << *node.value<double>();
  else if (node.is_integer())
    out << *node.value<std::int64_t>();
  else if (node.is_boolean())
    out << (*node.value<bool>() ? "true" : "false");
  else
    out << node.type();
  return out.str();
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
                        : fmt::format("{}: unknown key '{}'", where, key));
    }
    Value value;
    if (node.is_integer())
      value = *node.value<std::int64_t>();
    else if (node.is_boolean())
      value = *node.value<bool>();
    else if (node.is_string())
      value = *node.value<std::string>();
    else
      bad_value(where, *spec, show(node));
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
    throw ConfigError(fmt::format(
        "{}: max_failures: expected a count N or a rate \"N%\" (0-100), got '{}'", where, text));
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
  Value v;
  if (spec->type == Type::boolean) {
    v = !negated;
  } else if (auto i = parse_int(value);
             i && (spec->type == Type::positive || spec->type == Type::non_negative ||
                   spec->type == Type::seed)) {
    v = *i;
  } else {
    v = std::string(value);
  }
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

void resolve(RunConfig& config, const Getenv& getenv) {
  auto from_env = [&](std::optional<std::uint32_t>& field, std::string& origin,
                      std::initializer_list<const char*> names, std::int64_t low) {
    if (field) return;
    for (const char* name : names) {
      const char* text = getenv(name);
      if (!text || !*text) continue;
      auto v = parse_int(text);
      if (!v || *v < low || *v > std::numeric_limits<std::int32_t>::max()) {
        throw ConfigError(fmt::format("{}={}: expected {} integer", name, text,
                                      low ? "a positive" : "a non-negative"));
      }
      field = static_cast<std::uint32_t>(*v);
      origin = name;
      return;
    }
  };
  from_env(config.rank, config.rank_origin, {"RANK", "SLURM_PROCID"}, 0);
  from_env(config.world_size, config.world_size_origin, {"WORLD_SIZE", "SLURM_NTASKS"}, 1);
  if (!config.rank) config.rank = 0;
  if (!config.world_size) config.world_size = 1;
  if (*config.rank >= *config.world_size) {
    throw ConfigError(fmt::format("rank {} (from {}) must be less than the world size {} (from {})",
                                  *config.rank, config.rank_origin, *config.world_size,
                                  config.world_size_origin));
  }
  if (!config.data.empty() && !config.list.empty()) {
    throw ConfigError("data and list: give one of them, not both");
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
  if (config.normalize != "none" && config.device.empty()) {
    throw ConfigError(fmt::format(
        "normalize {}: normalizing runs on the device: give a device (--device cpu or cuda:N)",
        config.normalize));
  }
}

std::string_view to_string(MediaKind kind) { return kind == MediaKind::video ? "video" : "image"; }
std::string_view to_string(Layout layout) { return layout == Layout::nchw ? "nchw" : "nhwc"; }

}  // namespace brigade::launch
