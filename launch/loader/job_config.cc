#include "launch/loader/job_config.h"

namespace brigade::launch {

bool hosts_directory(const RunConfig& config) {
  return config.remote() && !config.directory.empty() && config.rank == 0u;
}

RunConfig source_config(const RunConfig& job, const SourceConfig& s) {
  RunConfig c = job;
  c.sources.clear();
  c.data = s.data;
  c.list = s.list;
  c.manifest = s.manifest;
  c.manifest_format = s.manifest_format;
  c.path_column = s.path_column;
  c.label_column = s.label_column;
  c.classes = s.classes;
  c.labels = s.labels;
  c.shards = s.shards;
  c.image_key = s.image_key;
  c.video_key = s.video_key;
  c.label_key = s.label_key;
  return c;
}

std::string_view to_string(MediaKind kind) { return kind == MediaKind::video ? "video" : "image"; }
std::string_view to_string(Normalize n) { return n == Normalize::imagenet ? "imagenet" : "none"; }
std::string_view to_string(OnNoWorkers o) { return o == OnNoWorkers::fail ? "fail" : "local"; }
std::string_view to_string(DecodeMode d) { return d == DecodeMode::hybrid ? "hybrid" : "remote"; }
std::string_view to_string(Labels l) { return l == Labels::folder ? "folder" : "none"; }

}  // namespace brigade::launch
