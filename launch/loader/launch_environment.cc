#include "launch/loader/detail/launch_environment.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <system_error>
#include <vector>

#include "transport/files/files.h"
#include "transport/remote/endpoint.h"

namespace brigade::launch {
namespace detail {
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

void resolve_launch_env(RunConfig& config, const Env& env) {
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

void resolve_remote_env(RunConfig& config, const Env& env) {
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

void resolve_launch(RunConfig& config, const Getenv& getenv) {
  resolve_launch_env(config, Env(getenv));
}

void resolve_remote(RunConfig& config, const Getenv& getenv) {
  resolve_remote_env(config, Env(getenv));
}

}  // namespace detail

std::string first_slurm_host(std::string_view nodelist) {
  using detail::first_in_brackets, detail::host_list_error;
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

std::string read_job_token(const std::string& token_file, const Getenv& getenv) {
  RunConfig config;
  config.token_file = token_file;
  return detail::job_token(config, detail::Env(getenv));
}

}  // namespace brigade::launch
