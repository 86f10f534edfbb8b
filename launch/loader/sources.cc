#include "launch/loader/sources.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "launch/loader/demo_dataset.h"
#include "launch/loader/manifest.h"
#include "launch/loader/object_reads.h"
#include "launch/loader/shards.h"

namespace brigade::launch {

namespace fs = std::filesystem;

const std::vector<std::string>& folder_extensions(MediaKind kind) {
  static const std::vector<std::string> kImages{".jpg", ".jpeg", ".png",  ".ppm", ".bmp",
                                                ".pgm", ".tif",  ".tiff", ".webp"};
  static const std::vector<std::string> kVideos{".mp4", ".mkv", ".webm", ".avi", ".mov"};
  return kind == MediaKind::video ? kVideos : kImages;
}

namespace {

bool has_extension(std::string_view name, const std::vector<std::string>& extensions) {
  return std::any_of(extensions.begin(), extensions.end(), [name](const std::string& e) {
    return name.size() >= e.size() &&
           std::equal(
               e.begin(), e.end(), name.end() - static_cast<std::ptrdiff_t>(e.size()),
               [](char x, char y) { return x == std::tolower(static_cast<unsigned char>(y)); });
  });
}

std::string extension_names(MediaKind kind) {
  std::string names;
  for (const auto& e : folder_extensions(kind)) names += (names.empty() ? "" : " ") + e;
  return names;
}

// A folder as the walk meets it: its path relative to the listing's folder ("" for
// that folder) and the names of its media files, sorted.
struct Folder {
  std::string rel;
  std::vector<std::string> files;
};

// What stat() says a folder is, whatever links led to it.
struct FolderId {
  dev_t device = 0;
  ino_t inode = 0;
  friend bool operator==(const FolderId&, const FolderId&) = default;
};

std::string joined(const std::string& rel, const std::string& name) {
  return rel.empty() ? name : rel + "/" + name;
}

// Walks the listing's folders (os.walk with followlinks=True, plus loop detection).
class FolderWalk {
 public:
  FolderWalk(const std::string& dir, MediaKind kind)
      : dir_(dir), extensions_(folder_extensions(kind)) {
    ancestors_.push_back({id_of(""), ""});
  }

  // The folder `rel`: its media files (sorted) and the names of its subfolders.
  Folder read(const std::string& rel, std::vector<std::string>& subfolders) const {
    std::error_code ec;
    fs::directory_iterator it(path_of(rel), ec), end;
    if (ec) fail(rel, ec);
    Folder folder{rel, {}};
    for (; it != end; it.increment(ec)) {
      if (ec) fail(rel, ec);
      auto name = it->path().filename().string();
      std::error_code type_ec;  // a dangling link or a loop on a file: a file (os.walk's rule)
      if (it->is_directory(type_ec)) {
        subfolders.push_back(std::move(name));
      } else if (has_extension(name, extensions_)) {
        folder.files.push_back(std::move(name));
      }
    }
    if (ec) fail(rel, ec);  // an increment that failed ended the loop
    std::sort(folder.files.begin(), folder.files.end());
    std::sort(subfolders.begin(), subfolders.end());
    return folder;
  }

  // `rel` and every folder under it, appended to `out`.
  void walk(const std::string& rel, std::vector<Folder>& out) {
    if (!rel.empty()) enter(rel);
    std::vector<std::string> subfolders;
    out.push_back(read(rel, subfolders));
    for (const auto& name : subfolders) walk(joined(rel, name), out);
    if (!rel.empty()) ancestors_.pop_back();
  }

 private:
  // Pushes `rel` on the folders being walked; a ConfigError if it is one of them.
  void enter(const std::string& rel) {
    const FolderId id = id_of(rel);
    const auto loop = std::find_if(ancestors_.begin(), ancestors_.end(),
                                   [&](const auto& a) { return a.first == id; });
    if (loop != ancestors_.end()) {
      throw ConfigError(
          fmt::format("data {}: {} leads back to {}, a folder that contains it (a loop of "
                      "symbolic links; remove the link, or list the files with list=FILE)",
                      dir_, rel, loop->second.empty() ? std::string(".") : loop->second),
          "data");
    }
    ancestors_.emplace_back(id, rel);
  }

  fs::path path_of(const std::string& rel) const {
    return rel.empty() ? fs::path(dir_) : fs::path(dir_) / rel;
  }

  FolderId id_of(const std::string& rel) const {
    struct stat st {};
    if (::stat(path_of(rel).c_str(), &st) != 0)
      fail(rel, std::error_code(errno, std::generic_category()));
    return {st.st_dev, st.st_ino};
  }

  [[noreturn]] void fail(const std::string& rel, const std::error_code& ec) const {
    if (rel.empty()) throw ConfigError(fmt::format("data {}: {}", dir_, ec.message()), "data");
    throw ConfigError(
        fmt::format("data {}: cannot read the folder {}: {}", dir_, rel, ec.message()), "data");
  }

  std::string dir_;
  const std::vector<std::string>& extensions_;
  std::vector<std::pair<FolderId, std::string>> ancestors_;  // the folders being walked
};

}  // namespace

Dataset list_folder(const std::string& dir, MediaKind kind) {
  std::vector<Folder> folders;
  FolderWalk(dir, kind).walk("", folders);
  std::vector<std::string> files;
  for (const auto& f : folders) {
    for (const auto& name : f.files) files.push_back(joined(f.rel, name));
  }
  if (files.empty()) {
    throw ConfigError(
        fmt::format("data {}: no {} files ({}) found", dir, to_string(kind), extension_names(kind)),
        "data");
  }
  std::sort(files.begin(), files.end());
  Dataset d(dir);
  for (const auto& f : files) d.add({.identity = f});
  return d;
}

Dataset list_class_folders(const std::string& dir, MediaKind kind) {
  FolderWalk walk(dir, kind);
  std::vector<std::string> classes;  // sorted
  const Folder top = walk.read("", classes);
  if (classes.empty()) {
    throw ConfigError(fmt::format("data {}: no class folders (labels = folder takes the "
                                  "classes from DIR's subfolders: DIR/CLASS/...)",
                                  dir),
                      "data");
  }
  if (const auto& stray = top.files; !stray.empty()) {
    spdlog::warn(
        "brigade: data {}: {} {} file(s) directly in the folder belong to no class and are not "
        "listed (labels = folder, as ImageFolder), e.g. {}",
        dir, stray.size(), to_string(kind), stray.front());
  }
  Dataset d(dir);
  d.set_classes(classes);
  std::vector<std::string> empty_classes;
  for (std::size_t label = 0; label < classes.size(); ++label) {
    std::vector<Folder> folders;
    walk.walk(classes[label], folders);
    std::sort(folders.begin(), folders.end(),
              [](const Folder& a, const Folder& b) { return a.rel < b.rel; });
    const auto before = d.size();
    for (const auto& f : folders) {
      for (const auto& name : f.files) {
        d.add({.identity = joined(f.rel, name), .label = static_cast<std::int64_t>(label)});
      }
    }
    if (d.size() == before) empty_classes.push_back(classes[label]);
  }
  if (!empty_classes.empty()) {
    std::string names;
    for (const auto& c : empty_classes) names += (names.empty() ? "" : ", ") + c;
    throw ConfigError(fmt::format("data {}: no {} files ({}) in the class folder(s) {} (labels = "
                                  "folder needs at least one per class, as ImageFolder)",
                                  dir, to_string(kind), extension_names(kind), names),
                      "data");
  }
  return d;
}

Dataset read_list(const std::string& list_file) {
  std::ifstream file;
  std::istringstream text;
  if (is_object_url(list_file)) {
    text.str(fetch_object_text(list_file, "list"));
  } else {
    file.open(list_file);
    if (!file) throw ConfigError(fmt::format("list {}: cannot read the file", list_file), "list");
  }
  std::istream& in = is_object_url(list_file) ? static_cast<std::istream&>(text) : file;
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

namespace {

Dataset open_sources(const RunConfig& c) {
  std::vector<Dataset> parts;
  std::vector<std::string> names;
  for (std::size_t i = 0; i < c.sources.size(); ++i) {
    const auto at = fmt::format("sources[{}]", i);
    try {
      parts.push_back(open_dataset(source_config(c, c.sources[i]), false));
    } catch (const ConfigError& e) {
      throw ConfigError(fmt::format("{} ({}): {}", at, c.sources[i].name, e.what()),
                        e.key().empty() ? at : at + "." + e.key());
    }
    names.push_back(c.sources[i].name);
  }
  try {
    return Dataset::join(std::move(parts), std::move(names));
  } catch (const std::invalid_argument& e) {
    throw ConfigError(fmt::format("sources: {}", e.what()), "sources");
  }
}

}  // namespace

Dataset open_dataset(const RunConfig& c, bool demo_allowed) {
  if (!c.sources.empty()) return open_sources(c);
  configure_object_reads(object_read_options(c));
  const bool by_folder = c.labels == Labels::folder;
  if (by_folder && (!c.list.empty() || !c.manifest.empty())) {
    throw ConfigError(
        "labels: folder takes the classes from the data folder's subfolders; a list or a "
        "manifest has none (give data=DIR instead; a manifest's labels come from its "
        "label_column)",
        "labels");
  }
  if (by_folder && !c.shards.empty()) {
    throw ConfigError(
        "labels: folder takes the classes from the data folder's subfolders; "
        "shards have their own labels (.cls, or label_key)",
        "labels");
  }
  if (!c.shards.empty()) return open_shards(expand_shard_spec(c.shards), shard_options(c));
  if (!c.manifest.empty()) return read_manifest(c.manifest, manifest_options(c));
  if (!c.meta.empty())
    throw ConfigError(
        "meta: only a manifest or shards' .json have metadata columns (give manifest=FILE "
        "or shards=SPEC)",
        "meta");
  if (!c.list.empty()) return read_list(c.list);
  if (!c.data.empty() && is_object_url(c.data))
    return list_object_folder(c.data, c.kind, by_folder);
  if (!c.data.empty())
    return by_folder ? list_class_folders(c.data, c.kind) : list_folder(c.data, c.kind);
  if (!demo_allowed) {
    throw ConfigError(
        "data: no data given: pass data=DIR (a folder of media) or list=FILE (a file of paths), "
        "or demo=True for Brigade's synthetic demo set",
        "data");
  }
  const auto demo = demo_folder(c.kind).string();
  return by_folder ? list_class_folders(demo, c.kind) : list_folder(demo, c.kind);
}

}  // namespace brigade::launch
