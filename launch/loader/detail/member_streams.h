#pragma once

// The members of remote tar shards, cut from a few large range reads as the bytes arrive
// (STREAMING in launch/loader/object_reads.h): what read_object() uses for a shard whose
// members were planned.
//
// CHUNKS. A planned object's members (sorted by offset) are grouped into chunks: runs of
// consecutive members whose WANTED members span at most StreamLimits::chunk_bytes (one
// member at least, however large) with gaps of at most StreamLimits::gap_bytes between
// consecutive wanted members. A chunk is fetched by one range request, made by one of the streams'
// FETCHERS (threads of their own, at most StreamLimits::requests of them, made as
// needed): it spans the chunk's members that no one holds or is receiving (the tar
// headers between them come along), cuts each of them from the body as it arrives, and
// hands each one over the moment its last byte is in — a read waiting for an earlier
// member of the chunk returns before the chunk's end arrives. A read never makes a
// request: it asks for its chunk (DEMAND, served before any prefetch) when no fetch of
// it is under way, and waits. So the requests in flight are at most `requests` (the read
// stage's concurrency, set_requests()), and a shard read in any order within a
// block-shuffle window costs one request per chunk.
//
// WANTED. Every member is wanted until want(url, offsets) names the ones this process
// reads from now on (a rank of several reads about 1/W of each shard's members in an
// epoch): the chunks are rebuilt over them (when no fetch of the shard is under way), a
// fetch spans only wanted members (and the one a read asks for, wanted or not), and a
// gap of more than gap_bytes (members of other ranks) between two of them starts another
// chunk: each range request moves at most gap_bytes it did not need per wanted member.
// want() also starts a new reading: members taken are read again, members held that
// are not wanted are dropped.
//
// PREFETCH. prefetch(url) queues the chunks of `url` (in order) for the fetchers to
// fetch before any read asks: the read stage's caller (launch/loader/detail/
// job_sampling.h LOOKAHEAD) names the shards its sampler will read next, so the next
// window's round trips overlap the current window's reads. A queued chunk is fetched
// (in queue order, after every demand) only while the members held plus the spans being
// prefetched plus its own span stay within StreamLimits::prefetch_bytes (or when nothing
// is held or prefetched: a chunk larger than the bound alone); it waits otherwise,
// until reads take members. A chunk whose members are all held or being received is
// skipped. clear_prefetches() drops the queue (an epoch that ends or restarts).
//
// MEMORY. A member received is held until a read takes it (once: a second read of the
// same member fetches its chunk again). So an open shard holds at most its planned
// members' bytes, less those taken; all shards together hold at most
// StreamLimits::held_bytes once their fetches end — beyond it, the members of the least
// recently read (or prefetched) shards that no read or fetch is using are dropped (read
// again, they are fetched again) — plus the chunks being received (at most one chunk per
// fetcher: `requests` × chunk_bytes). Prefetches add nothing to the bound: they start
// only within prefetch_bytes (≤ held_bytes) of held bytes. offer() keeps members given
// to it (the bytes of a shard read whole to index it) only within held_bytes. A shard
// none of whose members are held keeps only its plan (16 bytes and its name per member).
//
// ERRORS. A failed fetch fails every read waiting on its chunk, each with the fetch's
// error (a transport::StorageError keeps its code, so a transient one is retried by the
// read stage: its next read asks for the chunk again), its message prefixed with the
// shard's URL and the member's name and bytes. A failed prefetch no read waits on is
// forgotten (the chunk is fetched again when read).
//
// STOP. A read whose `stop` is requested while it waits returns at once, throwing
// transport::StorageError(cancelled) naming the shard and member; the fetch it waited
// for goes on (its members are kept for a later read, within the bound). The
// destructor stops the fetchers: each fetch is given a stop token that it requests, and
// joins them.
//
// THREADS. Safe to call from many threads; one mutex guards the state, members are
// copied out of the body without it.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "launch/loader/object_reads.h"

namespace brigade::launch::detail {

/// A member of an object as planned: its byte range and its name (for messages).
struct PlannedMember {
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::string name{};
};

struct StreamLimits {
  std::uint64_t chunk_bytes = std::uint64_t{16} << 20;      // the most one request spans
  std::uint64_t held_bytes = std::uint64_t{1} << 30;        // received, not yet taken
  std::uint64_t prefetch_bytes = std::uint64_t{256} << 20;  // held + prefetching (≤ held_bytes)
  int requests = 16;                                        // fetchers: requests in flight
  std::uint64_t gap_bytes = std::uint64_t{128} << 10;       // read rather than a request more
};

class MemberStreams {
 public:
  using Sink = std::function<void(const std::byte* data, std::size_t size)>;
  /// Delivers bytes [offset, offset + size) of `url` to `sink` in order, or throws; the
  /// object is known by `object_size` and `etag` (its changing is an error). `stop`
  /// requested: gives up promptly (throwing).
  using Fetch = std::function<void(const std::string& url, std::uint64_t offset, std::uint64_t size,
                                   std::uint64_t object_size, const std::string& etag,
                                   const Sink& sink, std::stop_token stop)>;

  MemberStreams(Fetch fetch, StreamLimits limits = {});
  ~MemberStreams();  // stops and joins the fetchers (STOP)
  MemberStreams(const MemberStreams&) = delete;
  MemberStreams& operator=(const MemberStreams&) = delete;

  /// Plans `url` (an object of `object_size` bytes, ETag `etag`) as read by members:
  /// `members` in any order, each within the object. Replaces an earlier plan of `url`
  /// (its held members are dropped). Throws std::invalid_argument for a member beyond the
  /// object's end, two members that overlap, or a plan of a shard being read or fetched.
  void plan(const std::string& url, std::uint64_t object_size, std::string etag,
            std::vector<PlannedMember> members);

  /// Keeps `bytes` as the member of `url` at exactly [offset, offset + bytes.size()) for
  /// a later read, when it is planned, not held, and the held bytes stay within
  /// held_bytes with it; returns whether it was kept (see MEMORY).
  bool offer(const std::string& url, std::uint64_t offset, std::vector<std::uint8_t>&& bytes);

  /// The member of `url` at exactly [offset, offset + size): its bytes (see CHUNKS), or
  /// nullopt when `url` is not planned or has no such member (the caller reads it another
  /// way). Throws the fetch's error (see ERRORS), or StorageError(cancelled) on `stop`.
  std::optional<std::vector<std::uint8_t>> read(const std::string& url, std::uint64_t offset,
                                                std::uint64_t size, std::stop_token stop = {});

  /// The members of `url` this process reads from now on: those at `offsets` (see WANTED);
  /// nothing for a URL not planned.
  void want(const std::string& url, const std::vector<std::uint64_t>& offsets);

  /// Queues `url`'s chunks for prefetching (see PREFETCH); nothing for a URL not planned.
  void prefetch(const std::string& url);
  /// Drops the chunks queued for prefetching (not those being fetched), and starts a new
  /// reading of every shard: the members reads took are read again (a fetch spans them;
  /// see WANTED), e.g. at an epoch's start.
  void clear_prefetches();
  /// The most fetchers (requests in flight) from now on; at least 1.
  void set_requests(int requests);

  StreamReadStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace brigade::launch::detail
