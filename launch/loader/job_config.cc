#include "launch/loader/job_config.h"

namespace brigade::launch {

bool hosts_directory(const RunConfig& config) {
  return config.remote() && !config.directory.empty() && config.rank == 0u;
}

std::string_view to_string(MediaKind kind) { return kind == MediaKind::video ? "video" : "image"; }

}  // namespace brigade::launch
