#include "launch/loader/shards.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <unordered_set>

#include "actors/sampler.h"
#include "launch/loader/object_reads.h"
#include "transport/files/files.h"

namespace brigade::launch {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kMaxShards = 10'000'000;

// ---- the spec

void expand_one(const std::string& item, std::vector<std::string>& out) {
  const auto open = item.find('{');
  const auto close_any = item.find('}');
  if (open == std::string::npos) {
    if (close_any != std::string::npos)
      throw ShardError(fmt::format("shards: {}: '}}' without '{{'", item));
    out.push_back(item);
    return;
  }
  const auto close = item.find('}', open);
  if (close == std::string::npos || close_any < open)
    throw ShardError(fmt::format("shards: {}: unbalanced braces", item));
  const std::string head = item.substr(0, open), tail = item.substr(close + 1);
  const std::string body = item.substr(open + 1, close - open - 1);
  if (body.find('{') != std::string::npos)
    throw ShardError(fmt::format("shards: {}: nested braces", item));
  std::vector<std::string> choices;
  if (const auto dots = body.find(".."); dots != std::string::npos) {
    const std::string a = body.substr(0, dots), b = body.substr(dots + 2);
    std::uint64_t lo = 0, hi = 0;
    const auto num = [](const std::string& s, std::uint64_t& v) {
      auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      return !s.empty() && ec == std::errc() && end == s.data() + s.size();
    };
    if (!num(a, lo) || !num(b, hi) || hi < lo)
      throw ShardError(
          fmt::format("shards: {}: {{{}}} is not a range of numbers LOW..HIGH", item, body));
    if (hi - lo >= kMaxShards) throw ShardError(fmt::format("shards: {}: too many files", item));
    for (std::uint64_t v = lo; v <= hi; ++v) choices.push_back(fmt::format("{:0{}}", v, a.size()));
  } else {
    std::size_t start = 0;
    for (auto comma = body.find(',');; comma = body.find(',', start)) {
      choices.push_back(body.substr(start, comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  for (const auto& c : choices) {
    expand_one(head + c + tail, out);
    if (out.size() > kMaxShards) throw ShardError(fmt::format("shards: {}: too many files", item));
  }
}

// ---- names

struct KeyExt {
  std::string_view key, ext;
};

// WebDataset's base_plus_ext: the key up to the first dot of the basename.
KeyExt split_name(std::string_view name) {
  const auto slash = name.rfind('/');
  const auto base = slash == std::string_view::npos ? 0 : slash + 1;
  const auto dot = name.find('.', base);
  if (dot == std::string_view::npos) return {name, {}};
  return {name.substr(0, dot), name.substr(dot + 1)};
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool is_shard_metadata(std::string_view name) {
  const auto slash = name.rfind('/');
  const auto base = slash == std::string_view::npos ? name : name.substr(slash + 1);
  return base.size() >= 4 && base.starts_with("__") && base.ends_with("__");
}

// ---- libarchive

struct ArchiveDeleter {
  void operator()(archive* a) const { archive_read_free(a); }
};
using Archive = std::unique_ptr<archive, ArchiveDeleter>;

std::string archive_cause(archive* a) {
  const char* s = archive_error_string(a);
  return s ? s : "unknown libarchive error";
}

struct ShardStat {
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
};

ShardStat stat_of(int fd, const std::string& shard) {
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    throw ShardError(fmt::format("shard {}: cannot stat: {}", shard, std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) throw ShardError(fmt::format("shard {}: not a regular file", shard));
  return {static_cast<std::uint64_t>(st.st_size),
          std::int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
}

std::vector<ShardMember> index_fd(int fd, const std::string& shard, std::uint64_t file_size) {
  Archive a(archive_read_new());
  if (!a) throw ShardError(fmt::format("shard {}: out of memory", shard));
  // Tar only (ustar, pax, GNU), no compression filter: members must be byte ranges of
  // the file itself.
  archive_read_support_format_tar(a.get());
  if (archive_read_open_fd(a.get(), fd, 64 * 1024) != ARCHIVE_OK)
    throw ShardError(fmt::format("shard {}: not a tar file ({})", shard, archive_cause(a.get())));
  std::vector<ShardMember> members;
  std::string last = "(the first header)";
  for (;;) {
    archive_entry* e = nullptr;
    const int r = archive_read_next_header(a.get(), &e);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
      throw ShardError(fmt::format(
          "shard {}: {} after member {} ({})", shard,
          members.empty() && last.front() == '(' ? "not a tar file" : "truncated or corrupt", last,
          archive_cause(a.get())));
    }
    const char* raw = archive_entry_pathname(e);
    std::string name = raw ? raw : "";
    while (name.starts_with("./")) name.erase(0, 2);
    last = name;
    const auto type = archive_entry_filetype(e);
    if (type == AE_IFDIR) continue;
    if (type != AE_IFREG || archive_entry_hardlink(e) != nullptr) {
      throw ShardError(
          fmt::format("shard {}: member {}: not a regular file (a link or special "
                      "file); shards hold regular files",
                      shard, name));
    }
    ShardMember m{.name = std::move(name),
                  .offset = static_cast<std::uint64_t>(archive_filter_bytes(a.get(), 0)),
                  .size = static_cast<std::uint64_t>(archive_entry_size(e))};
    if (m.offset > file_size || m.size > file_size - m.offset) {
      throw ShardError(
          fmt::format("shard {}: member {} is cut off: {} bytes at offset {} in a "
                      "file of {} bytes",
                      shard, m.name, m.size, m.offset, file_size));
    }
    const auto ext = lower(split_name(m.name).ext);
    if ((ext == "cls" || ext == "json") && m.size <= kMaxInlineBytes) {
      m.inline_bytes.resize(m.size);
      const auto n = archive_read_data(a.get(), m.inline_bytes.data(), m.size);
      if (n < 0 || static_cast<std::uint64_t>(n) != m.size)
        throw ShardError(fmt::format("shard {}: member {}: cannot read ({})", shard, m.name,
                                     n < 0 ? archive_cause(a.get()) : "cut off"));
    } else if (archive_read_data_skip(a.get()) != ARCHIVE_OK) {
      throw ShardError(fmt::format("shard {}: member {} is cut off ({})", shard, m.name,
                                   archive_cause(a.get())));
    }
    members.push_back(std::move(m));
  }
  return members;
}

// ---- the cache: magic, format, size, mtime, count, members, checksum (all little-endian)

constexpr char kMagic[8] = {'B', 'R', 'G', 'T', 'A', 'R', 'I', 'X'};

struct Writer {
  std::string out;
  void u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
  }
  void text(std::string_view s) {
    u64(s.size());
    out.append(s);
  }
};

struct Reader {
  std::string_view in;
  bool ok = true;
  std::uint64_t u64() {
    if (in.size() < 8) return ok = false, 0;
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= std::uint64_t(static_cast<unsigned char>(in[i])) << (8 * i);
    in.remove_prefix(8);
    return v;
  }
  std::string text(std::uint64_t limit) {
    const auto n = u64();
    if (!ok || n > limit || n > in.size()) return ok = false, std::string();
    std::string s(in.substr(0, n));
    in.remove_prefix(n);
    return s;
  }
};

std::uint64_t checksum(std::string_view bytes) {
  actors::IdentityHasher h(bytes.size());
  h.add(bytes);
  return h.value();
}

std::string encode_cache(const ShardStat& st, const std::vector<ShardMember>& members) {
  Writer w;
  w.out.append(kMagic, sizeof(kMagic));
  w.u64(kIndexFormat);
  w.u64(st.size);
  w.u64(static_cast<std::uint64_t>(st.mtime_ns));
  w.u64(members.size());
  for (const auto& m : members) {
    w.text(m.name);
    w.u64(m.offset);
    w.u64(m.size);
    w.text(m.inline_bytes);
  }
  w.u64(checksum(w.out));
  return std::move(w.out);
}

// The members a cache file holds for a shard of `st`, or nullopt if it is for another
// state of the shard, another format, or corrupt.
std::optional<std::vector<ShardMember>> decode_cache(std::string_view bytes, const ShardStat& st) {
  if (bytes.size() < sizeof(kMagic) + 8 || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    return std::nullopt;
  Reader tail{bytes.substr(bytes.size() - 8)};
  if (tail.u64() != checksum(bytes.substr(0, bytes.size() - 8))) return std::nullopt;
  Reader r{bytes.substr(sizeof(kMagic), bytes.size() - sizeof(kMagic) - 8)};
  if (r.u64() != kIndexFormat || r.u64() != st.size ||
      r.u64() != static_cast<std::uint64_t>(st.mtime_ns))
    return std::nullopt;
  const auto count = r.u64();
  if (!r.ok || count > r.in.size() / 32) return std::nullopt;
  std::vector<ShardMember> members(count);
  for (auto& m : members) {
    m.name = r.text(1 << 16);
    m.offset = r.u64();
    m.size = r.u64();
    m.inline_bytes = r.text(kMaxInlineBytes);
    if (!r.ok || m.offset > st.size || m.size > st.size - m.offset) return std::nullopt;
  }
  if (!r.ok || !r.in.empty()) return std::nullopt;
  return members;
}

fs::path default_cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return fs::path(x) / "brigade/shards";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache/brigade/shards";
  return fs::temp_directory_path() / "brigade-shards";
}

fs::path cache_path(const std::string& shard, const ShardOptions& o) {
  const fs::path p = fs::absolute(shard).lexically_normal();
  if (o.cache_dir.empty() && ::access(p.parent_path().c_str(), W_OK) == 0)
    return fs::path(p.string() + ".brigade-index");
  const fs::path dir = o.cache_dir.empty() ? default_cache_dir() : fs::path(o.cache_dir);
  const std::string id = fmt::format("{:016x}", checksum(p.string()));
  return dir / (p.filename().string() + "." + id + ".brigade-index");
}

std::optional<std::string> slurp(const fs::path& path) {
  transport::FileDescriptor f(path, O_RDONLY | O_CLOEXEC);
  if (f.get() < 0) return std::nullopt;
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const auto n = ::read(f.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) return out;
    out.append(buf, static_cast<std::size_t>(n));
  }
}

// A remote shard as indexed: its size and ETag (what its member streams check), and the
// whole read that indexed it when its members go to the streams (see INDEX AND CACHE).
struct RemoteShard {
  std::uint64_t size = 0;
  std::string etag{};
  transport::FileDescriptor copy{};
  std::atomic<std::uint64_t>* kept = nullptr;  // the copies' bytes kept so far, all shards
};

// The index cache's file for a remote shard: named by its URL, in the cache folder.
fs::path remote_cache_path(const std::string& url, const ShardOptions& o) {
  const fs::path dir = o.cache_dir.empty() ? default_cache_dir() : fs::path(o.cache_dir);
  const auto slash = url.rfind('/');
  return dir / fmt::format("{}.{:016x}.brigade-index", url.substr(slash + 1), checksum(url));
}

// A remote shard's index: from the index cache when it records the object's size and
// ETag (a HEAD, no GET), else from a whole copy (the shard cache's, or fetched), written
// to the index cache. With a shard cache the copy is always taken (HEAD, and GET unless
// the cache holds it): the read stage reads its members from it.
std::vector<ShardMember> remote_index(const std::string& shard, const ShardOptions& o,
                                      RemoteShard* remote) {
  const bool use_index_cache = o.use_cache && !object_cache_enabled();
  std::optional<transport::ObjectInfo> info;
  if (use_index_cache) {
    info = head_object(shard);
    if (remote) {
      remote->size = info->size;
      remote->etag = info->etag;
    }
    // The ETag's hash stands for the mtime of a local shard's entry.
    const ShardStat st{info->size, static_cast<std::int64_t>(checksum(info->etag) >> 1)};
    if (auto bytes = slurp(remote_cache_path(shard, o))) {
      if (auto members = decode_cache(*bytes, st)) return std::move(*members);
    }
  }
  auto copy = copy_object(shard, info ? &*info : nullptr);
  if (remote) {
    remote->size = copy.size;
    remote->etag = copy.etag;
  }
  auto members = index_fd(copy.fd.get(), shard, copy.size);
  // Without a shard cache the copy is in memory: kept for the streams, within their bound.
  if (remote && remote->kept && !object_cache_enabled() && object_streaming()) {
    if (remote->kept->fetch_add(copy.size) + copy.size <= kStreamHeldBytes) {
      remote->copy = std::move(copy.fd);
    } else {
      remote->kept->fetch_sub(copy.size);
    }
  }
  if (use_index_cache) {
    const ShardStat st{copy.size, static_cast<std::int64_t>(checksum(copy.etag) >> 1)};
    const auto bytes = encode_cache(st, members);
    try {
      transport::publish_file(remote_cache_path(shard, o),
                              std::as_bytes(std::span(bytes.data(), bytes.size())),
                              {.sync = false});
    } catch (const transport::FileError&) {
      // A cache that cannot be written costs the next run a read of the shard.
    }
  }
  return members;
}

std::vector<ShardMember> cached_index(const std::string& shard, const ShardOptions& o,
                                      RemoteShard* remote = nullptr) {
  if (is_object_url(shard)) {
    try {
      return remote_index(shard, o, remote);
    } catch (const transport::StorageError& e) {
      throw ShardError(fmt::format("shard {}: cannot read: {}", shard, e.what()));
    } catch (const transport::FileError& e) {
      throw ShardError(fmt::format("shard {}: the cache: {}", shard, e.what()));
    }
  }
  transport::FileDescriptor f(shard, O_RDONLY | O_CLOEXEC);
  if (f.get() < 0)
    throw ShardError(fmt::format("shard {}: cannot open: {}", shard, std::strerror(errno)));
  const ShardStat st = stat_of(f.get(), shard);
  const fs::path cache = o.use_cache ? cache_path(shard, o) : fs::path();
  if (o.use_cache) {
    if (auto bytes = slurp(cache)) {
      if (auto members = decode_cache(*bytes, st)) return std::move(*members);
    }
  }
  auto members = index_fd(f.get(), shard, st.size);
  if (o.use_cache) {
    const auto bytes = encode_cache(st, members);
    try {
      // No fsync: a torn cache fails its checksum and is rebuilt.
      transport::publish_file(cache, std::as_bytes(std::span(bytes.data(), bytes.size())),
                              {.sync = false});
    } catch (const transport::FileError&) {
      // A cache that cannot be written costs the next run an index, nothing else.
    }
  }
  return members;
}

// ---- samples

std::string json_scalar(const nlohmann::json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

std::int64_t parse_label(std::string_view text, const std::string& where) {
  const auto first = text.find_first_not_of(" \t\r\n");
  const auto last = text.find_last_not_of(" \t\r\n");
  const auto t =
      first == std::string_view::npos ? std::string_view() : text.substr(first, last - first + 1);
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc() || end != t.data() + t.size() || v < 0)
    throw ShardError(fmt::format("{}: label '{}' is not a non-negative integer", where, t));
  return v;
}

struct Group {
  std::string key;
  std::vector<const ShardMember*> members;
};

// The shards' names in identities: relative to the folder that holds them all, so that
// a worker that mounts the shards elsewhere has the same identities.
std::vector<std::string> shard_names(const std::vector<std::string>& shards) {
  std::vector<fs::path> abs;
  for (const auto& s : shards) abs.push_back(fs::absolute(s).lexically_normal());
  fs::path common = abs.front().parent_path();
  for (const auto& p : abs) {
    while (!common.empty() && p.lexically_relative(common).native().starts_with(".."))
      common = common.parent_path();
  }
  std::vector<std::string> out;
  for (const auto& p : abs) out.push_back(p.lexically_relative(common).string());
  return out;
}

// Adds the sample of `g`; returns its media member.
const ShardMember* add_sample(Dataset& d, std::uint32_t container, const std::string& shard,
                              const std::string& name, const Group& g,
                              const std::vector<std::string>& media, const ShardOptions& o) {
  const ShardMember* item = nullptr;
  const ShardMember *cls = nullptr, *json = nullptr;
  for (const auto* m : g.members) {
    const auto ext = lower(split_name(m->name).ext);
    if (std::find(media.begin(), media.end(), ext) != media.end()) {
      if (item)
        throw ShardError(fmt::format("shard {}: key {}: two media members, {} and {}", shard, g.key,
                                     item->name, m->name));
      item = m;
    } else if (ext == "cls") {
      cls = m;
    } else if (ext == "json") {
      json = m;
    }
  }
  std::string exts;
  for (const auto& e : media) exts += (exts.empty() ? "" : ";") + e;
  if (!item)
    throw ShardError(fmt::format("shard {}: key {}: no media member (extensions {}; members: {})",
                                 shard, g.key, exts, g.members.front()->name));
  for (const auto* m : {cls, json}) {
    if (m && m->size > kMaxInlineBytes)
      throw ShardError(fmt::format("shard {}: member {} is larger than {} bytes", shard, m->name,
                                   kMaxInlineBytes));
  }
  nlohmann::json doc;
  const bool needs_json = !o.label_field.empty() || !o.meta_fields.empty();
  if (needs_json && json) {
    try {
      doc = nlohmann::json::parse(json->inline_bytes);
    } catch (const nlohmann::json::exception& e) {
      throw ShardError(
          fmt::format("shard {}: member {}: not JSON ({})", shard, json->name, e.what()));
    }
    if (!doc.is_object())
      throw ShardError(fmt::format("shard {}: member {}: not a JSON object", shard, json->name));
  }
  std::optional<std::int64_t> label;
  if (!o.label_field.empty()) {
    if (!json || !doc.contains(o.label_field))
      throw ShardError(fmt::format("shard {}: key {}: no label: {} has no field '{}'", shard, g.key,
                                   json ? json->name : g.key + ".json", o.label_field));
    const auto& v = doc[o.label_field];
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0)
      throw ShardError(
          fmt::format("shard {}: member {}: field '{}' is {}, not a non-negative "
                      "integer",
                      shard, json->name, o.label_field, v.dump()));
    label = v.get<std::int64_t>();
  } else if (cls) {
    label = parse_label(cls->inline_bytes, fmt::format("shard {}: member {}", shard, cls->name));
  }
  std::vector<std::string> values;
  for (const auto& f : o.meta_fields)
    values.push_back(json && doc.contains(f) ? json_scalar(doc[f]) : std::string());
  std::vector<std::string_view> views(values.begin(), values.end());
  const std::string identity = name + "/" + item->name;
  try {
    d.add(
        {.identity = identity,
         .label = label,
         .member = MemberRange{.container = container, .offset = item->offset, .size = item->size},
         .meta = views});
  } catch (const std::invalid_argument& e) {
    throw ShardError(fmt::format("shard {}: key {}: {}", shard, g.key, e.what()));
  }
  return item;
}

}  // namespace

std::vector<std::string> expand_shard_spec(std::span<const std::string> spec) {
  std::vector<std::string> out;
  for (const auto& item : spec) expand_one(item, out);
  if (out.empty()) throw ShardError("shards: no shard given");
  return out;
}

ShardOptions shard_options(const RunConfig& c) {
  ShardOptions o{.label_field = c.label_key, .meta_fields = c.meta};
  std::string_view rest = c.kind == MediaKind::video ? c.video_key : c.image_key;
  for (auto semi = rest.find(';');; semi = rest.find(';')) {
    if (!rest.substr(0, semi).empty()) o.media_extensions.emplace_back(rest.substr(0, semi));
    if (semi == std::string_view::npos) break;
    rest.remove_prefix(semi + 1);
  }
  if (o.media_extensions.empty())
    throw ShardError(fmt::format("{}: no extension given",
                                 c.kind == MediaKind::video ? "video_key" : "image_key"));
  return o;
}

std::vector<ShardMember> index_shard(const std::string& shard) {
  return cached_index(shard, {.use_cache = false});
}

Dataset open_shards(const std::vector<std::string>& shards, const ShardOptions& o) {
  if (shards.empty()) throw ShardError("shards: no shard given");
  std::vector<std::string> media;
  if (o.media_extensions.empty()) {
    std::string_view rest = kDefaultImageKeys;
    for (auto semi = rest.find(';');; semi = rest.find(';')) {
      media.emplace_back(rest.substr(0, semi));
      if (semi == std::string_view::npos) break;
      rest.remove_prefix(semi + 1);
    }
  } else {
    for (const auto& e : o.media_extensions) media.push_back(lower(e));
  }
  // Index the shards a few at a time; the first error (in shard order) wins.
  std::vector<std::vector<ShardMember>> index(shards.size());
  std::vector<RemoteShard> remote(shards.size());
  std::atomic<std::uint64_t> kept{0};
  for (auto& r : remote) r.kept = &kept;
  std::vector<std::exception_ptr> errors(shards.size());
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < shards.size();) {
      try {
        index[i] = cached_index(shards[i], o, &remote[i]);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  const auto n =
      std::clamp<std::size_t>(static_cast<std::size_t>(std::max(o.threads, 1)), 1, shards.size());
  std::vector<std::jthread> threads;
  for (std::size_t t = 1; t < n; ++t) threads.emplace_back(work);
  work();
  threads.clear();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  const auto names = shard_names(shards);
  Dataset d;
  d.set_meta_columns(o.meta_fields);
  // Room for the samples and their identities (the media members), so the packed
  // buffers do not grow by doubling.
  std::size_t samples = 0, bytes = 0;
  for (std::size_t s = 0; s < index.size(); ++s) {
    for (const auto& m : index[s]) {
      const auto ext = lower(split_name(m.name).ext);
      if (std::find(media.begin(), media.end(), ext) == media.end()) continue;
      ++samples;
      bytes += names[s].size() + 1 + m.name.size();
    }
  }
  d.reserve(samples, bytes);
  for (std::size_t s = 0; s < shards.size(); ++s) {
    const auto container = d.add_container(shards[s]);
    std::unordered_set<std::string> seen;  // keys of this shard: one may not come back
    std::vector<StreamMember> planned;     // a remote shard's media members
    const bool streamed = is_object_url(shards[s]);
    Group g;
    auto flush = [&] {
      if (g.members.empty()) return;
      if (!seen.insert(g.key).second)
        throw ShardError(
            fmt::format("shard {}: key {}: its members are not consecutive (the "
                        "key comes back after other keys, at member {})",
                        shards[s], g.key, g.members.front()->name));
      const auto* item = add_sample(d, container, shards[s], names[s], g, media, o);
      if (streamed) planned.push_back({item->offset, item->size, item->name});
      g = {};
    };
    for (const auto& m : index[s]) {
      if (is_shard_metadata(m.name)) continue;
      const std::string key(split_name(m.name).key);
      if (key != g.key || g.members.empty()) {
        flush();
        g.key = key;
      }
      g.members.push_back(&m);
    }
    flush();
    if (streamed) {
      const auto members = remote[s].copy.get() >= 0 ? planned : std::vector<StreamMember>();
      try {
        plan_object_stream(shards[s], remote[s].size, remote[s].etag, std::move(planned));
      } catch (const std::invalid_argument& e) {
        throw ShardError(fmt::format("shard {}: {}", shards[s], e.what()));
      }
      if (remote[s].copy.get() >= 0) {
        offer_object_members(shards[s], remote[s].copy.get(), remote[s].size, members);
        remote[s].copy = {};
      }
    }
  }
  if (d.empty()) throw ShardError("shards: no samples in the shards given");
  return d;
}

std::vector<std::uint64_t> container_boundaries(const Dataset& d) {
  if (d.containers().empty()) return {0, d.size()};
  std::vector<std::uint64_t> b(d.containers().size() + 1, 0);
  for (std::size_t i = 0; i < d.size(); ++i) b[d.container_of(i) + 1] = i + 1;
  for (std::size_t c = 1; c < b.size(); ++c) b[c] = std::max(b[c], b[c - 1]);
  return b;
}

}  // namespace brigade::launch
