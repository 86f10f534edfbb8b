#pragma once

// The members of remote tar shards, cut from a few large range reads as the bytes arrive
// (STREAMING in launch/loader/object_reads.h): what read_object() uses for a shard whose
// members were planned.
//
// CHUNKS. A planned object's members (sorted by offset) are grouped into chunks: runs of
// consecutive members spanning at most StreamLimits::chunk_bytes (one member at least,
// however large). The first read of a member whose chunk holds nothing is that chunk's
// FETCHER: it asks for the chunk's whole span with one range request (the tar headers
// between members come along), cuts every member of the chunk from the body as it
// arrives, and hands each one over the moment its last byte is in — a read waiting for an
// earlier member of the chunk returns before the chunk's end arrives. Reads of the
// chunk's other members wait for the fetcher, not the network: so the read stage's
// concurrency is the number of requests in flight (each read fetches or waits), and a
// shard read in any order within a block-shuffle window costs one request per chunk.
//
// MEMORY. A member received is held until a read takes it (once: a second read of the
// same member fetches its chunk again). So an open shard holds at most its planned
// members' bytes, less those taken; all shards together hold at most
// StreamLimits::held_bytes once their fetches end — beyond it, the members of the least
// recently read shards that no read is fetching or waiting on are dropped (read again,
// they are fetched again) — plus the chunks being received (at most one chunk per read
// in flight). A shard none of whose members are held keeps only its plan (16 bytes and
// its name per member).
//
// ERRORS. A failed fetch fails the read that made it and every read waiting on its chunk,
// each with the fetch's error (a transport::StorageError keeps its code, so a transient
// one is retried by the read stage: the next read fetches the chunk again), its message
// prefixed with the shard's URL and the member's name and bytes.
//
// THREADS. Safe to call from many threads; one mutex guards the state, members are
// copied out of the body without it.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace brigade::launch::detail {

/// A member of an object as planned: its byte range and its name (for messages).
struct PlannedMember {
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::string name{};
};

struct StreamLimits {
  std::uint64_t chunk_bytes = std::uint64_t{16} << 20;  // the most one request spans
  std::uint64_t held_bytes = std::uint64_t{1} << 30;    // received, not yet taken
};

/// Counters since the streams were made.
struct StreamStats {
  std::uint64_t fetches = 0;     // range requests made (chunks fetched)
  std::uint64_t held_bytes = 0;  // now: received, not yet taken
  std::uint64_t peak_held_bytes = 0;
  std::uint64_t dropped_bytes = 0;  // dropped by the bound before a read took them
};

class MemberStreams {
 public:
  using Sink = std::function<void(const std::byte* data, std::size_t size)>;
  /// Delivers bytes [offset, offset + size) of `url` to `sink` in order, or throws; the
  /// object is known by `object_size` and `etag` (its changing is an error).
  using Fetch =
      std::function<void(const std::string& url, std::uint64_t offset, std::uint64_t size,
                         std::uint64_t object_size, const std::string& etag, const Sink& sink)>;

  MemberStreams(Fetch fetch, StreamLimits limits = {});
  ~MemberStreams();
  MemberStreams(const MemberStreams&) = delete;
  MemberStreams& operator=(const MemberStreams&) = delete;

  /// Plans `url` (an object of `object_size` bytes, ETag `etag`) as read by members:
  /// `members` in any order, each within the object. Replaces an earlier plan of `url`
  /// (its held members are dropped). Throws std::invalid_argument for a member beyond the
  /// object's end or two members that overlap.
  void plan(const std::string& url, std::uint64_t object_size, std::string etag,
            std::vector<PlannedMember> members);

  /// The member of `url` at exactly [offset, offset + size): its bytes (see CHUNKS), or
  /// nullopt when `url` is not planned or has no such member (the caller reads it another
  /// way). Throws the fetch's error (see ERRORS).
  std::optional<std::vector<std::uint8_t>> read(const std::string& url, std::uint64_t offset,
                                                std::uint64_t size);

  StreamStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace brigade::launch::detail
