#include "launch/loader/sources.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "launch/loader/demo_dataset.h"
#include "launch/loader/manifest.h"

namespace brigade::launch {

namespace fs = std::filesystem;

Dataset list_folder(const std::string& dir, MediaKind kind) {
  static const std::vector<std::string> kImages{".jpg", ".jpeg", ".png", ".webp", ".bmp"};
  static const std::vector<std::string> kVideos{".mp4", ".mkv", ".webm", ".avi", ".mov"};
  const auto& extensions = kind == MediaKind::video ? kVideos : kImages;
  std::vector<std::string> files;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, ec), end;
  if (ec) throw ConfigError(fmt::format("data {}: {}", dir, ec.message()), "data");
  for (; it != end; it.increment(ec)) {
    if (ec) throw ConfigError(fmt::format("data {}: {}", dir, ec.message()), "data");
    // symlink_status never follows a link, so a dangling link or a loop cannot throw
    // here; what it points to is checked when the sample is read.
    const auto type = it->symlink_status(ec).type();
    if (ec || type == fs::file_type::directory) continue;
    auto ext = it->path().extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(),
                   [](unsigned char ch) { return std::tolower(ch); });
    if (std::find(extensions.begin(), extensions.end(), ext) != extensions.end()) {
      files.push_back(it->path().lexically_relative(dir).string());
    }
  }
  if (files.empty()) {
    std::string names;
    for (const auto& e : extensions) names += " " + e;
    throw ConfigError(fmt::format("data {}: no {} files ({} ) found", dir, to_string(kind), names),
                      "data");
  }
  std::sort(files.begin(), files.end());
  Dataset d(dir);
  for (const auto& f : files) d.add({.identity = f});
  return d;
}

Dataset read_list(const std::string& list_file) {
  std::ifstream in(list_file);
  if (!in) throw ConfigError(fmt::format("list {}: cannot read the file", list_file), "list");
  Dataset d(fs::path(list_file).parent_path().string());
  std::string line;
  while (std::getline(in, line)) {
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    const auto last = line.find_last_not_of(" \t\r");
    d.add({.identity = std::string_view(line).substr(first, last - first + 1)});
  }
  if (d.empty()) throw ConfigError(fmt::format("list {}: no paths in the file", list_file), "list");
  return d;
}

Dataset open_dataset(const RunConfig& c, bool demo_allowed) {
  if (!c.manifest.empty()) return read_manifest(c.manifest, manifest_options(c));
  if (!c.meta.empty())
    throw ConfigError("meta: only a manifest has metadata columns (give manifest=FILE)", "meta");
  if (!c.list.empty()) return read_list(c.list);
  if (!c.data.empty()) return list_folder(c.data, c.kind);
  if (!demo_allowed) {
    throw ConfigError(
        "data: no data given: pass data=DIR (a folder of media) or list=FILE (a file of paths), "
        "or demo=True for Brigade's synthetic demo set",
        "data");
  }
  return list_folder(demo_folder(c.kind).string(), c.kind);
}

}  // namespace brigade::launch
