#pragma once

// WebDataset tar shards as a job's samples (`shards = [...]` / `--shards SPEC`).
//
// SAMPLES. A shard is a tar file (ustar, pax or GNU: long names, pax headers; no
// compression, since a member must be readable by its byte range). Its members are
// grouped by key, WebDataset's rule: the key is the member's name up to the first dot
// of its basename ("a/b/000123.seg.png": key "a/b/000123", extension "seg.png"), and
// the members of one sample are consecutive. A sample's media member is the one whose
// extension is among `media_extensions` (exactly one; compared in lower case); its
// label is the integer in its `.cls` member, or with `label_field` the integer field of
// that name in its `.json` member; its metadata columns (`meta_fields`) are fields of
// its `.json` (strings as they are, numbers and booleans as JSON writes them, "" when
// absent). Directories and names of the form "__*__" (WebDataset's shard metadata) are
// not members of any sample; other members (a .txt beside the image) are allowed and
// unused. Sample ids follow the shards in the order given, then the members' order in
// each shard; a sample's identity is "<shard>/<media member's name>", the shard named
// relative to the folder holding all the shards (so that a worker that mounts them
// elsewhere has the same identities and fingerprint).
//
// ERRORS. Every bad input is a ShardError (a ConfigError of key "shards") naming the
// shard, the member where there is one, and the cause: a file that cannot be read or
// is not a tar file, a truncated shard or a member cut off, a key without a media
// member, two media members for one key, a key whose members are not consecutive, a
// .cls or .json that does not parse or lacks the label, a symbolic link or other
// special member, a mix of labelled and unlabelled samples. Nothing is skipped
// silently. A shard changed after it was indexed fails its samples at read time
// (media::read_file_range: a short read is an io error naming the shard).
//
// INDEX AND CACHE. Each shard's members (name, data offset, size; the bytes of its .cls
// and .json members, at most kMaxInlineBytes each) are read once with libarchive, a few
// shards at a time, and cached in "<shard>.brigade-index" beside it when that folder is
// writable, else in `cache_dir` (default $XDG_CACHE_HOME/brigade/shards, else
// ~/.cache/brigade/shards) under a name made from the shard's absolute path. A cache
// entry is used only if it records the shard's current size and mtime (nanoseconds),
// its format version and its checksum agree; any other one is rebuilt and rewritten
// (atomically, without fsync: a torn cache is detected by its checksum and rebuilt).
// The cache's format is private to this build's major version (kIndexFormat).
// A remote shard (a URL) is indexed from one whole read of it (the shard cache's copy
// with a cache_dir in the object reads, launch/loader/object_reads.h); without a shard
// cache its index is cached in `cache_dir` (as above) under a name made from the URL,
// valid while the object's size and ETag (a HEAD) are those recorded: a later run reads
// no shard whole to start. When its members are streamed (object_reads.h STREAMING),
// the whole read that indexed a remote shard without a shard cache hands its media
// members' bytes to the shard's stream (the copies kept while indexing, and the bytes
// handed over, both within kStreamHeldBytes): the first epoch of a first run reads them
// from there, not from the network again.
//
// THREADING. Plain functions; index_shards uses up to `threads` threads of its own.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "launch/loader/dataset.h"
#include "launch/loader/job_config.h"

namespace brigade::launch {

/// A bad shard or shard spec (see ERRORS); key() is "shards".
class ShardError : public ConfigError {
 public:
  explicit ShardError(const std::string& message) : ConfigError(message, "shards") {}
};

/// The largest .cls or .json member kept in the index.
inline constexpr std::uint64_t kMaxInlineBytes = 1 << 20;
/// The version of the index cache's format.
inline constexpr std::uint32_t kIndexFormat = 1;

/// WebDataset's usual image extensions, and the video one.
inline constexpr std::string_view kDefaultImageKeys = "jpg;jpeg;png;webp;ppm;pgm;pbm;pnm";
inline constexpr std::string_view kDefaultVideoKeys = "mp4";

/// Expands a shard spec: each item a path, with brace groups expanded —
/// "{000000..000127}" (a numeric range, zero-padded to the width of its first bound)
/// or "{a,b}" (alternatives) — one file per expansion, in order. Throws ShardError for
/// an unbalanced brace, a range whose bounds are not numbers or run backwards, or more
/// than 10^7 files.
std::vector<std::string> expand_shard_spec(std::span<const std::string> spec);

/// One member of a shard as indexed.
struct ShardMember {
  std::string name{};
  std::uint64_t offset = 0;  // of its data in the shard
  std::uint64_t size = 0;
  std::string inline_bytes{};  // .cls and .json members: their bytes
};

/// The members of `shard` in archive order (regular files only). Throws ShardError.
std::vector<ShardMember> index_shard(const std::string& shard);

struct ShardOptions {
  std::vector<std::string> media_extensions{};  // empty: kDefaultImageKeys
  std::string label_field{};                    // "": labels from .cls, if any
  std::vector<std::string> meta_fields{};       // .json fields as metadata columns
  std::string cache_dir{};                      // "": see INDEX AND CACHE
  bool use_cache = true;                        // false: neither read nor write it
  int threads = 4;                              // shards indexed at once
};

/// The options `config` gives: its kind's key (image_key or video_key, split at ';'),
/// label_key, meta.
ShardOptions shard_options(const RunConfig& config);

/// The samples of `shards` (files, already expanded; relative paths against the
/// working directory), as Dataset members: container i is shards[i]. Throws ShardError.
Dataset open_shards(const std::vector<std::string>& shards, const ShardOptions& options);

/// Sample id ranges per container of a member dataset: boundaries[i] is the first id
/// of container i, boundaries.back() == d.size() (containers().size() + 1 entries).
/// For a dataset of files: {0, d.size()}.
std::vector<std::uint64_t> container_boundaries(const Dataset& d);

}  // namespace brigade::launch
