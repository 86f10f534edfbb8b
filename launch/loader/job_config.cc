#include "launch/loader/job_config.h"

namespace brigade::launch {

bool hosts_directory(const RunConfig& config) {
  return config.remote() && !config.directory.empty() && config.rank == 0u;
}

RunConfig source_config(const RunConfig& job, const SourceConfig& s) {
  RunConfig c = job;
  c.sources.clear();
  static_cast<DataListing&>(c) = s.listing;
  return c;
}

std::string_view to_string(MediaKind kind) { return kind == MediaKind::video ? "video" : "image"; }
std::string_view to_string(Normalize n) { return n == Normalize::imagenet ? "imagenet" : "none"; }
std::string_view to_string(OnNoWorkers o) { return o == OnNoWorkers::fail ? "fail" : "local"; }
std::string_view to_string(DecodeMode d) { return d == DecodeMode::hybrid ? "hybrid" : "remote"; }
std::string_view to_string(Labels l) { return l == Labels::folder ? "folder" : "none"; }

}  // namespace brigade::launch
