#include "launch/config.h"

#include <fmt/format.h>

#include <variant>

namespace brigade::launch {

FrontEndSetting output_keys(RunOutput& output) {
  return [&output](std::string_view key, const SettingValue& value) {
    if (key == "ids_out") output.ids_out = std::get<std::string>(value);
    if (key == "digests_out") output.digests_out = std::get<std::string>(value);
    if (key == "stop_after_batches") output.stop_after_batches = std::get<std::int64_t>(value);
    if (key == "json") output.json = std::get<bool>(value);
    if (key == "progress") output.progress = std::get<bool>(value);
    if (key == "stats_interval") {
      output.stats_interval = std::stod(std::get<std::string>(value));
      if (output.stats_interval < 0.2) {
        throw ConfigError(fmt::format("stats_interval: at least 0.2 seconds, got {}",
                                      std::get<std::string>(value)),
                          "stats_interval");
      }
    }
    if (key == "stats_out") output.stats_out = std::get<std::string>(value);
    if (key == "metrics_port") output.metrics_port = int(std::get<std::int64_t>(value));
    if (key == "metrics_address") output.metrics_address = std::get<std::string>(value);
    if (key == "stats") output.stats = std::get<std::string>(value);
    if (key == "stats_consecutive") output.stats_consecutive = int(std::get<std::int64_t>(value));
    if (key == "hang_after") {
      output.hang_after = std::stod(std::get<std::string>(value));
      if (!(output.hang_after > 0)) {
        throw ConfigError(
            fmt::format("hang_after: more than 0 seconds, got {}", std::get<std::string>(value)),
            "hang_after");
      }
    }
    if (key == "pause_after_batches") output.pause_after_batches = std::get<std::int64_t>(value);
  };
}

void apply_toml(RunCommand& config, std::string_view text, const std::string& name) {
  apply_toml(static_cast<RunConfig&>(config), text, name, output_keys(config));
}

void apply_toml_file(RunCommand& config, const std::string& path) {
  apply_toml_file(static_cast<RunConfig&>(config), path, output_keys(config));
}

void apply_flag(RunCommand& config, std::string_view flag, std::string_view value) {
  const auto output = output_keys(config);
  for (const auto& k : setting_keys()) {
    if (k.flag == flag) return apply_setting(config, k.key, value, flag, false, output);
    if (k.negatable && flag.starts_with("--no-") && k.flag.substr(2) == flag.substr(5))
      return apply_setting(config, k.key, value, flag, true, output);
  }
  throw ConfigError(fmt::format("{}: unknown option", flag));
}

std::vector<FlagInfo> run_flags() {
  std::vector<FlagInfo> flags;
  for (auto& k : setting_keys())
    flags.push_back({k.flag, k.help, k.takes_value, k.negatable, std::move(k.metavar)});
  return flags;
}

}  // namespace brigade::launch
