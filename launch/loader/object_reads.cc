#include "launch/loader/object_reads.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "launch/loader/detail/member_streams.h"
#include "launch/loader/sources.h"
#include "media/errors.h"
#include "media/source.h"
#include "transport/storage/object_store.h"

namespace brigade::launch {

namespace fs = std::filesystem;

namespace {

struct Stores {
  std::mutex mutex;
  ObjectReadOptions options;
  std::shared_ptr<transport::ObjectStore> store;
};

Stores& stores() {
  static Stores s;
  return s;
}

std::shared_ptr<transport::ObjectStore> store() {
  auto& s = stores();
  std::lock_guard lock(s.mutex);
  if (!s.store) {
    transport::StoreOptions o;
    o.retries = s.options.retries;
    o.timeout = std::chrono::milliseconds(s.options.timeout_ms);
    o.connect_timeout = std::min(o.connect_timeout, o.timeout);
    o.max_requests_per_host = s.options.requests_per_host;
    s.store = std::make_shared<transport::ObjectStore>(std::move(o));
  }
  return s.store;
}

bool same(const ObjectReadOptions& a, const ObjectReadOptions& b) {
  return a.retries == b.retries && a.timeout_ms == b.timeout_ms &&
         a.requests_per_host == b.requests_per_host && a.cache_dir == b.cache_dir &&
         a.cache_bytes == b.cache_bytes && a.stream == b.stream;
}

bool streaming() {
  std::lock_guard lock(stores().mutex);
  return stores().options.stream;
}

// The process's member streams: their plans outlive a change of the store's options.
detail::MemberStreams& streams() {
  static detail::MemberStreams s(
      [](const std::string& url, std::uint64_t offset, std::uint64_t size,
         std::uint64_t object_size, const std::string& etag,
         const detail::MemberStreams::Sink& sink, std::stop_token stop) {
        store()->get_stream(url, offset, size, sink, object_size, etag, std::move(stop));
      },
      {.chunk_bytes = kStreamChunkBytes,
       .held_bytes = kStreamHeldBytes,
       .prefetch_bytes = kStreamPrefetchBytes,
       .requests = [] {
         std::lock_guard lock(stores().mutex);
         return stores().options.requests_per_host;
       }()});
  return s;
}

// Cached copies this process made or found: URL -> file.
struct Copies {
  std::mutex mutex;
  std::unordered_map<std::string, std::string> files;
};
Copies& copies() {
  static Copies c;
  return c;
}

std::optional<std::string> cached_copy(const std::string& url) {
  std::lock_guard lock(copies().mutex);
  const auto it = copies().files.find(url);
  if (it == copies().files.end()) return std::nullopt;
  return it->second;
}

std::uint64_t fnv1a(std::string_view text) {
  std::uint64_t h = 1469598103934665603ULL;
  for (const char c : text) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  return h;
}

// Removes the least recently used copies until `dir` holds at most `bound` bytes;
// `keep` stays. Files of other processes may vanish meanwhile: errors are ignored.
void evict(const fs::path& dir, std::uint64_t bound, const fs::path& keep) {
  struct Entry {
    fs::file_time_type time;
    std::uint64_t size;
    fs::path path;
  };
  std::vector<Entry> entries;
  std::uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const auto name = e.path().filename().string();
    if (name.starts_with('.') || !e.is_regular_file(ec)) continue;
    const auto size = e.file_size(ec);
    if (ec) continue;
    total += size;
    if (e.path() != keep) entries.push_back({e.last_write_time(ec), size, e.path()});
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.time < b.time; });
  for (const auto& e : entries) {
    if (total <= bound) break;
    if (fs::remove(e.path, ec)) total -= e.size;
  }
}

// Opens `path` when it holds `size` bytes, refreshing its mtime (its LRU position).
transport::FileDescriptor open_copy(const fs::path& path, std::uint64_t size) {
  transport::FileDescriptor fd(path, O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0 || static_cast<std::uint64_t>(st.st_size) != size)
    return {};
  ::futimens(fd.get(), nullptr);
  return fd;
}

// An anonymous memory file holding `bytes`, positioned at 0.
template <class Bytes>
transport::FileDescriptor memory_copy(const Bytes& bytes) {
  transport::FileDescriptor fd(::memfd_create("brigade-object", MFD_CLOEXEC));
  if (fd.get() < 0) throw std::system_error(errno, std::generic_category(), "memfd_create");
  for (std::size_t done = 0; done < bytes.size();) {
    const auto n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::system_error(errno, std::generic_category(), "memfd write");
    done += static_cast<std::size_t>(n);
  }
  ::lseek(fd.get(), 0, SEEK_SET);
  return fd;
}

bool has_media_extension(std::string_view name, MediaKind kind) {
  return std::any_of(
      folder_extensions(kind).begin(), folder_extensions(kind).end(), [name](const std::string& e) {
        return name.size() >= e.size() &&
               std::equal(
                   e.begin(), e.end(), name.end() - static_cast<std::ptrdiff_t>(e.size()),
                   [](char x, char y) { return x == std::tolower(static_cast<unsigned char>(y)); });
      });
}

// A key relative to the prefix, split at its last '/': ImageFolder's order is by folder
// path, then by name within a folder.
struct Rel {
  std::string folder, name;
  std::string path() const { return folder.empty() ? name : folder + "/" + name; }
};

bool folder_order(const Rel& a, const Rel& b) {
  return a.folder != b.folder ? a.folder < b.folder : a.name < b.name;
}

}  // namespace

bool is_object_url(std::string_view path) {
  return path.starts_with("s3://") || path.starts_with("http://") || path.starts_with("https://");
}

ObjectReadOptions object_read_options(const RunConfig& c) {
  return {.retries = c.read_retries,
          .timeout_ms = c.read_timeout_ms,
          .requests_per_host = c.read_concurrency,
          .cache_dir = c.object_cache_dir,
          .cache_bytes = c.object_cache_bytes,
          // In order, or a window of shards at a time: a shard's members are read together.
          .stream = !c.shuffle || c.shuffle_window > 0};
}

void configure_object_reads(const ObjectReadOptions& options) {
  auto& s = stores();
  std::unique_lock lock(s.mutex);
  if (s.store && same(s.options, options)) return;
  s.options = options;
  s.store.reset();  // the next read makes one with these options; reads in flight keep theirs
  lock.unlock();
  streams().set_requests(options.requests_per_host);
}

std::vector<std::uint8_t> read_object(const std::string& url, std::uint64_t offset,
                                      std::uint64_t size, std::stop_token stop) {
  if (const auto local = cached_copy(url)) {
    try {
      return size == kWholeFile ? media::read_file(*local)
                                : media::read_file_range(*local, offset, size);
    } catch (const media::MediaError& e) {
      if (e.code() != media::ErrorCode::not_found) throw;
      std::lock_guard lock(copies().mutex);
      copies().files.erase(url);  // evicted: read it from the network
    }
  }
  if (size != kWholeFile && streaming()) {
    if (auto bytes = streams().read(url, offset, size, std::move(stop))) return std::move(*bytes);
  }
  const auto bytes = size == kWholeFile ? store()->get(url) : store()->get(url, offset, size);
  const auto* p = reinterpret_cast<const std::uint8_t*>(bytes.data());
  return {p, p + bytes.size()};
}

std::string fetch_object_text(const std::string& url, const std::string& key) {
  try {
    const auto bytes = store()->get(url);
    return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
  } catch (const transport::StorageError& e) {
    throw ConfigError(fmt::format("{} {}: cannot read the object: {}", key, url, e.what()), key);
  }
}

void plan_object_stream(const std::string& url, std::uint64_t size, const std::string& etag,
                        std::vector<StreamMember> members) {
  std::vector<detail::PlannedMember> planned;
  planned.reserve(members.size());
  for (auto& m : members) planned.push_back({m.offset, m.size, std::move(m.name)});
  streams().plan(url, size, etag, std::move(planned));
}

std::uint64_t offer_object_members(const std::string& url, int copy, std::uint64_t copy_size,
                                   const std::vector<StreamMember>& members) {
  std::uint64_t kept = 0;
  for (const auto& m : members) {
    if (m.offset > copy_size || m.size > copy_size - m.offset) continue;
    if (streams().stats().held_bytes + m.size > kStreamHeldBytes) break;
    std::vector<std::uint8_t> bytes(m.size);
    std::uint64_t done = 0;
    while (done < m.size) {
      const auto n =
          ::pread(copy, bytes.data() + done, m.size - done, static_cast<off_t>(m.offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<std::uint64_t>(n);
    }
    if (done != m.size) break;  // the stream fetches what a copy cannot give
    if (streams().offer(url, m.offset, std::move(bytes))) kept += m.size;
  }
  return kept;
}

void prefetch_object_stream(const std::string& url) {
  if (streaming() && !cached_copy(url)) streams().prefetch(url);  // a cached copy: no network
}

void clear_object_prefetches() { streams().clear_prefetches(); }

void want_object_members(const std::string& url, const std::vector<std::uint64_t>& offsets) {
  if (streaming()) streams().want(url, offsets);
}

bool object_streaming() { return streaming(); }

StreamReadStats object_stream_stats() { return streams().stats(); }

bool object_cache_enabled() {
  std::lock_guard lock(stores().mutex);
  return !stores().options.cache_dir.empty();
}

transport::ObjectInfo head_object(const std::string& url) { return store()->head(url); }

ObjectCopy copy_object(const std::string& url, const transport::ObjectInfo* known) {
  ObjectReadOptions options;
  {
    std::lock_guard lock(stores().mutex);
    options = stores().options;
  }
  const auto info = known ? *known : store()->head(url);
  const auto fetch = [&] {
    auto bytes = store()->get(url);
    if (bytes.size() != info.size) {
      throw transport::StorageError(
          transport::StorageErrc::short_body, url,
          fmt::format("GET {}: {} bytes where HEAD said {}", url, bytes.size(), info.size));
    }
    return bytes;
  };
  if (options.cache_dir.empty()) return {memory_copy(fetch()), info.size, info.etag};
  const fs::path dir(options.cache_dir);
  const auto name = fmt::format("{:016x}-{}-{:016x}", fnv1a(url), info.size, fnv1a(info.etag));
  const auto path = dir / name;
  auto remember = [&] {
    std::lock_guard lock(copies().mutex);
    copies().files[url] = path.string();
  };
  if (auto fd = open_copy(path, info.size); fd.get() >= 0) {
    remember();
    return {std::move(fd), info.size, info.etag};
  }
  fs::create_directories(dir);
  // One fetcher per object across processes: the others wait, then find the copy.
  transport::FileDescriptor lock(dir / ("." + name + ".lock"), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock.get() >= 0) {
    while (::flock(lock.get(), LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  if (auto fd = open_copy(path, info.size); fd.get() >= 0) {
    remember();
    return {std::move(fd), info.size, info.etag};
  }
  auto bytes = fetch();
  transport::publish_file(path, bytes, {.sync = false});
  // Opened before anything is evicted: another fetcher's eviction (this process's or
  // another's) may remove the file at any time after the rename, and an open
  // descriptor keeps its bytes. Removed before this open: the bytes are still here.
  auto fd = open_copy(path, info.size);
  if (fd.get() >= 0) {
    remember();
  } else {
    fd = memory_copy(bytes);
  }
  if (options.cache_bytes > 0) evict(dir, options.cache_bytes, path);
  return {std::move(fd), info.size, info.etag};
}

transport::StoreStats object_read_stats() {
  std::shared_ptr<transport::ObjectStore> s;
  {
    std::lock_guard lock(stores().mutex);
    s = stores().store;
  }
  return s ? s->stats() : transport::StoreStats{};
}

Dataset list_object_folder(const std::string& url, MediaKind kind, bool by_folder) {
  const std::string prefix = url.ends_with('/') ? url : url + "/";
  std::vector<transport::ObjectEntry> entries;
  std::string prefix_key;
  try {
    prefix_key = transport::ObjectUrl::parse(prefix).key;
    entries = store()->list(prefix);
  } catch (const transport::StorageError& e) {
    throw ConfigError(fmt::format("data {}: cannot list the objects: {}", url, e.what()), "data");
  }
  std::vector<Rel> files;
  for (const auto& e : entries) {
    if (!e.key.starts_with(prefix_key) || e.key.ends_with('/')) continue;
    const std::string rel = e.key.substr(prefix_key.size());
    if (!has_media_extension(rel, kind)) continue;
    const auto slash = rel.rfind('/');
    files.push_back(slash == std::string::npos ? Rel{{}, rel}
                                               : Rel{rel.substr(0, slash), rel.substr(slash + 1)});
  }
  // The root without the trailing '/': Dataset joins root and identity with one.
  Dataset d(prefix.substr(0, prefix.size() - 1));
  if (!by_folder) {
    std::vector<std::string> paths;
    for (const auto& f : files) paths.push_back(f.path());
    std::sort(paths.begin(), paths.end());
    if (paths.empty()) {
      throw ConfigError(fmt::format("data {}: no {} objects found", url, to_string(kind)), "data");
    }
    for (const auto& p : paths) d.add({.identity = p});
    return d;
  }
  // Class = the first segment of the folder; files with no folder belong to no class.
  std::map<std::string, std::vector<Rel>> by_class;
  std::size_t stray = 0;
  for (auto& f : files) {
    if (f.folder.empty()) {
      ++stray;
      continue;
    }
    const auto cls = f.folder.substr(0, f.folder.find('/'));
    by_class[cls].push_back(std::move(f));
  }
  if (by_class.empty()) {
    throw ConfigError(fmt::format("data {}: no class folders (labels = folder takes the classes "
                                  "from the prefix's next path segment: PREFIX/CLASS/...)",
                                  url),
                      "data");
  }
  if (stray > 0) {
    spdlog::warn(
        "brigade: data {}: {} {} object(s) directly under the prefix belong to no class and are "
        "not listed (labels = folder, as ImageFolder)",
        url, stray, to_string(kind));
  }
  std::vector<std::string> classes;
  for (const auto& [cls, _] : by_class) classes.push_back(cls);
  d.set_classes(classes);
  std::int64_t label = 0;
  for (auto& [cls, members] : by_class) {
    std::sort(members.begin(), members.end(), folder_order);
    for (const auto& m : members) d.add({.identity = m.path(), .label = label});
    ++label;
  }
  return d;
}

}  // namespace brigade::launch
