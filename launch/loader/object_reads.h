#pragma once

// Samples and listings in object storage: what the loader reads through
// transport/storage (object_store.h) when a path it is given is a URL (s3://bucket/key,
// http://…, https://…) instead of a local path.
//
// ONE STORE PER PROCESS. Every read of a process (the read stage, a remote worker's
// read, a listing) goes through one ObjectStore, made on first use, so connections and
// the per-host limit are shared. configure_object_reads() sets its options before that
// first use (open_dataset calls it with the config's read settings); a later call with
// other options makes a new store for the reads after it.
//
// ERRORS. A read throws transport::StorageError (a std::system_error naming the URL and
// the server's code): transient codes map onto the conditions actors::is_transient()
// retries, so the read stage retries them and fails the sample on the last attempt;
// permanent ones fail the sample at once. A short body is an error (short_body), never a
// truncated sample.

#include <cstdint>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "launch/loader/dataset.h"
#include "launch/loader/job_config.h"
#include "transport/files/files.h"
#include "transport/storage/object_store.h"

namespace brigade::launch {

/// Whether `path` names an object (s3://, http://, https://) rather than a local file.
bool is_object_url(std::string_view path);

/// The options of the process's store (see ONE STORE PER PROCESS).
struct ObjectReadOptions {
  int retries = 4;                    // transient failures retried per request
  std::uint64_t timeout_ms = 60'000;  // one request's whole time
  int requests_per_host = 16;         // requests in flight per host
  std::string cache_dir{};            // "": no shard cache (see SHARD CACHE)
  std::uint64_t cache_bytes = 0;      // the cache's bound (0: none)
  bool stream = true;                 // planned members read by streams (see STREAMING)
};
ObjectReadOptions object_read_options(const RunConfig& config);
void configure_object_reads(const ObjectReadOptions& options);

// STREAMING. A remote tar shard's members are planned once it is indexed
// (plan_object_stream: their byte ranges, the shard's size and ETag); while `stream` is on
// (the job reads in order or with the shard-block shuffle: object_read_options), a read
// of a planned member that no cached copy holds is served by detail/member_streams.h:
// the shard is read as a few large range requests (chunks of at most kStreamChunkBytes,
// usually one per shard), its members cut from each body as it arrives. The requests
// are made by the streams' fetchers, at most `requests_per_host` ([stages.read]
// concurrency) at once: a read asks for its chunk and waits (returning at once, failed
// `cancelled`, when its stop token is requested). prefetch_object_stream() queues a
// shard's chunks to be fetched before they are read (the job's sampler names the shards
// it reads next: launch/loader/detail/job_sampling.h LOOKAHEAD), within
// kStreamPrefetchBytes of bytes held. An open shard holds at most its planned members'
// bytes (each released when read), all shards at most kStreamHeldBytes once their
// requests end (the least recently used ones are dropped beyond that, and fetched again
// if read again), plus a chunk per request in flight. A shard indexed from a whole read
// without a shard cache hands that read's member bytes to its stream
// (offer_object_members: within kStreamHeldBytes), so a first run reads its bytes once,
// not twice. A changed object (another ETag or size) fails its samples (`changed`); a
// failure names the shard's URL and the member. Without streaming (a full shuffle, where
// a window of shards is not read together), and in processes that did not index the
// shards (a remote decode worker), each member is one range request.
inline constexpr std::uint64_t kStreamChunkBytes = std::uint64_t{16} << 20;
inline constexpr std::uint64_t kStreamHeldBytes = std::uint64_t{1} << 30;
inline constexpr std::uint64_t kStreamPrefetchBytes = std::uint64_t{256} << 20;

/// A planned member: its byte range in the object, and its name (for messages).
struct StreamMember {
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::string name{};
};
/// Plans `url` (an object of `size` bytes and ETag `etag`) as read by `members` (see
/// STREAMING). Throws std::invalid_argument for members beyond its end or overlapping.
void plan_object_stream(const std::string& url, std::uint64_t size, const std::string& etag,
                        std::vector<StreamMember> members);
/// Hands the members of planned `url` that `copy` (a whole copy of it: `copy_size`
/// bytes at offset 0) holds to its stream, while kStreamHeldBytes allows (see
/// STREAMING); returns the bytes handed over.
std::uint64_t offer_object_members(const std::string& url, int copy, std::uint64_t copy_size,
                                   const std::vector<StreamMember>& members);
/// Queues planned `url`'s chunks for prefetching; nothing when streaming is off, `url`
/// is not planned, or the shard cache holds a copy of it (its reads read that).
/// clear_object_prefetches(): drops the queue, and the shards' members already read are
/// fetched again when read again (an epoch's start).
void prefetch_object_stream(const std::string& url);
/// The members of planned `url` (their offsets) this process reads from now on: its
/// streams fetch only those (detail/member_streams.h WANTED); nothing when streaming is
/// off. A rank of several names them at the start of each epoch.
void want_object_members(const std::string& url, const std::vector<std::uint64_t>& offsets);
void clear_object_prefetches();
/// Whether the process's reads stream planned shards (ObjectReadOptions::stream).
bool object_streaming();

/// The object's bytes: the whole object for size == kWholeFile, else exactly `size`
/// bytes from `offset` (Content-Range checked; a planned member: see STREAMING). Throws
/// transport::StorageError; StorageError(cancelled) when `stop` is requested while a
/// planned member is awaited.
std::vector<std::uint8_t> read_object(const std::string& url, std::uint64_t offset = 0,
                                      std::uint64_t size = kWholeFile, std::stop_token stop = {});

/// A whole object as text (a list, a manifest, a classes file): its bytes. Throws
/// ConfigError (`key`) naming the URL and the server's code when it cannot be read.
std::string fetch_object_text(const std::string& url, const std::string& key);

// SHARD CACHE. With a cache_dir, copy_object() keeps whole objects (tar shards) there as
// files named by a hash of the URL, the size and a hash of the ETag (so a changed
// object is a new file, never a stale one): written to a temporary name and renamed
// (no torn file), fetched by one process at a time (a lock file per object: ranks of
// one node sharing the folder fetch it once), verified by size (a body of another size
// is short_body). After a copy is added the least recently used files (by mtime, which
// a use refreshes) are removed until the folder holds at most cache_bytes (the new one
// stays). read_object() reads a byte range of an object it knows a cached copy of from
// that file, without a request; a copy removed meanwhile is read from the network.

/// A whole object's copy: an open descriptor (a file of the shard cache, or an
/// anonymous memory file without one) and its size.
struct ObjectCopy {
  transport::FileDescriptor fd{};
  std::uint64_t size = 0;
  std::string etag{};  // as HEAD answered
};
/// HEAD (unless `known` gives its answer), then (unless the cache holds it) GET the
/// whole object. Throws StorageError, or transport::FileError when the cache folder
/// cannot be written.
ObjectCopy copy_object(const std::string& url, const transport::ObjectInfo* known = nullptr);
/// Whether the process's reads have a shard cache (a cache_dir).
bool object_cache_enabled();
/// The object's size and ETag (HEAD). Throws StorageError.
transport::ObjectInfo head_object(const std::string& url);

/// Counters of the process's store since it was made (requests, retries, bytes, per
/// host); all zero before the first read.
transport::StoreStats object_read_stats();
/// Counters of member streams since they were made (see STREAMING): the process's, and
/// each detail::MemberStreams' own.
struct StreamReadStats {
  std::uint64_t fetches = 0;     // range requests made (chunks fetched), prefetches included
  std::uint64_t prefetches = 0;  // of them, made before a read asked
  std::uint64_t reads = 0;       // member reads served by the streams
  std::uint64_t waits = 0;       // of them, found their member not yet received
  std::uint64_t held_bytes = 0;  // now: received, not yet taken
  std::uint64_t peak_held_bytes = 0;
  std::uint64_t dropped_bytes = 0;  // dropped by the bound before a read took them
  std::uint64_t offered_bytes = 0;  // kept from the index's whole reads (offer())
};
StreamReadStats object_stream_stats();

/// list_folder / list_class_folders of an s3:// prefix: the objects under `url` (a
/// trailing '/' is implied) whose names have an extension of `kind`, listed with
/// ListObjectsV2. Unlabelled: sorted by the bytes of their keys, as list_folder sorts
/// relative paths. With `by_folder`: the classes are the next path segment after the
/// prefix, sorted; samples class by class, each class's "folders" (key prefixes) in
/// order of their paths, each folder's objects sorted by name, as list_class_folders;
/// objects directly under the prefix belong to no class (a warning counts them).
/// Identities are keys relative to the prefix; the dataset's root is the prefix's URL.
/// Throws ConfigError (key `data`) naming the URL for a failed listing, no objects of
/// `kind`, no class folders.
Dataset list_object_folder(const std::string& url, MediaKind kind, bool by_folder);

}  // namespace brigade::launch
