#include "launch/config.h"

#include <fmt/format.h>

namespace brigade::launch {

void apply_flag(RunConfig& config, std::string_view flag, std::string_view value) {
  for (const auto& k : setting_keys()) {
    if (k.flag == flag) return apply_setting(config, k.key, value, flag);
    if (k.negatable && flag.starts_with("--no-") && k.flag.substr(2) == flag.substr(5))
      return apply_setting(config, k.key, value, flag, true);
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
