#include "launch/loader/detail/member_streams.h"

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "transport/storage/object_store.h"

namespace brigade::launch::detail {
namespace {

struct Range {
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
};

// A member's bytes while its shard is open.
struct Slot {
  enum class State { absent, filling, ready };
  State state = State::absent;
  std::vector<std::uint8_t> bytes{};
};

struct Chunk {
  std::size_t first = 0, last = 0;  // members [first, last)
  bool fetching = false;
  std::uint64_t generation = 0;  // fetches begun
  std::exception_ptr error{};    // of fetch `generation`, when it failed
};

struct Shard {
  std::uint64_t object_size = 0;
  std::string etag{};
  std::vector<Range> members{};  // sorted by offset
  std::string names{};           // the members' names, each ended by '\0'
  std::vector<std::uint32_t> name_at{};
  std::vector<Chunk> chunks{};
  std::vector<Slot> slots{};  // while open: one per member
  std::uint64_t held = 0;     // ready slots' bytes
  std::uint64_t last_use = 0;
  int busy = 0;  // reads inside read(): fetching or waiting

  std::string name(std::size_t member) const { return names.c_str() + name_at[member]; }
  std::size_t chunk_of(std::size_t member) const {
    auto it = std::upper_bound(chunks.begin(), chunks.end(), member,
                               [](std::size_t m, const Chunk& c) { return m < c.first; });
    return static_cast<std::size_t>(it - chunks.begin()) - 1;
  }
};

// `error` with the shard and member named; a StorageError keeps its code (transient or
// not), anything else is rethrown as it is.
[[noreturn]] void fail(const std::exception_ptr& error, const std::string& url, const Shard& s,
                       std::size_t member) {
  const auto& m = s.members[member];
  try {
    std::rethrow_exception(error);
  } catch (const transport::StorageError& e) {
    throw transport::StorageError(
        e.storage_code(), url,
        fmt::format("shard {} member {} (bytes {}-{}): {}", url, s.name(member), m.offset,
                    m.offset + m.size, e.what()),
        e.server_code(), e.http_status());
  }
}

}  // namespace

struct MemberStreams::Impl {
  Fetch fetch;
  StreamLimits limits;
  mutable std::mutex mutex;
  std::condition_variable changed;
  std::unordered_map<std::string, std::unique_ptr<Shard>> shards;
  std::unordered_set<Shard*> holding;  // shards with held > 0
  std::uint64_t clock = 0;
  StreamStats stats;

  void release_if_idle(Shard& s) {
    if (s.busy == 0 && s.held == 0) {
      holding.erase(&s);
      std::vector<Slot>().swap(s.slots);
    }
  }

  void drop(Shard& s) {
    for (auto& slot : s.slots) {
      if (slot.state != Slot::State::ready) continue;
      stats.dropped_bytes += slot.bytes.size();
      slot = {};
    }
    stats.held_bytes -= s.held;
    s.held = 0;
    release_if_idle(s);
  }

  // Drops the least recently read idle shards' members until the bound holds.
  void bound() {
    while (stats.held_bytes > limits.held_bytes) {
      Shard* oldest = nullptr;
      for (Shard* s : holding) {
        if (s->busy == 0 && (!oldest || s->last_use < oldest->last_use)) oldest = s;
      }
      if (!oldest) return;
      drop(*oldest);
    }
  }

  // Called by the fetcher of `chunk` without the lock: copies the body's bytes into the
  // slots it claimed (filling), and hands each member over as it completes.
  struct Cutter {
    Impl& impl;
    Shard& shard;
    const Chunk& chunk;
    std::uint64_t position;     // the object offset of the next byte
    std::size_t member;         // the first member not yet complete
    std::vector<char> claimed;  // per member of the chunk: this fetch fills it

    void operator()(const std::byte* data, std::size_t size) {
      const std::uint64_t end = position + size;
      while (member < chunk.last && position < end) {
        const Range m = shard.members[member];
        if (position < m.offset) {  // a tar header or padding: skip to the member
          const auto gap = std::min(m.offset, end) - position;
          data += gap;
          position += gap;
          continue;
        }
        auto& slot = shard.slots[member];
        const bool mine = claimed[member - chunk.first] != 0;
        const auto n = std::min(m.offset + m.size, end) - position;
        if (mine) {
          if (slot.bytes.empty()) slot.bytes.reserve(m.size);
          const auto* p = reinterpret_cast<const std::uint8_t*>(data);
          slot.bytes.insert(slot.bytes.end(), p, p + n);
        }
        data += n;
        position += n;
        if (position == m.offset + m.size) {
          if (mine) {
            std::lock_guard lock(impl.mutex);
            slot.state = Slot::State::ready;
            shard.held += m.size;
            impl.stats.held_bytes += m.size;
            impl.stats.peak_held_bytes =
                std::max(impl.stats.peak_held_bytes, impl.stats.held_bytes);
            impl.holding.insert(&shard);
            impl.changed.notify_all();
          }
          ++member;
        }
      }
    }
  };

  std::vector<std::uint8_t> read(const std::string& url, Shard& s, std::size_t member,
                                 std::unique_lock<std::mutex>& lock) {
    const std::size_t c = s.chunk_of(member);
    for (;;) {
      Slot& slot = s.slots[member];
      if (slot.state == Slot::State::ready) {
        auto bytes = std::move(slot.bytes);
        slot = {};
        s.held -= bytes.size();
        stats.held_bytes -= bytes.size();
        return bytes;
      }
      Chunk& chunk = s.chunks[c];
      if (chunk.fetching) {
        const auto generation = chunk.generation;
        changed.wait(lock, [&] {
          return slot.state == Slot::State::ready || !chunk.fetching ||
                 chunk.generation != generation;
        });
        if (slot.state != Slot::State::ready && chunk.generation == generation && chunk.error) {
          fail(chunk.error, url, s, member);
        }
        continue;
      }
      // The fetcher: claims the chunk's absent members, then reads its span unlocked.
      chunk.fetching = true;
      chunk.error = nullptr;
      ++chunk.generation;
      ++stats.fetches;
      const auto begin = s.members[chunk.first].offset;
      Cutter cut{*this, s, chunk, begin, chunk.first, std::vector<char>(chunk.last - chunk.first)};
      for (auto i = chunk.first; i < chunk.last; ++i) {
        if (s.slots[i].state != Slot::State::absent) continue;
        s.slots[i].state = Slot::State::filling;
        cut.claimed[i - chunk.first] = 1;
      }
      const auto& back = s.members[chunk.last - 1];
      std::exception_ptr error;
      lock.unlock();
      try {
        fetch(url, begin, back.offset + back.size - begin, s.object_size, s.etag, std::ref(cut));
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      chunk.fetching = false;
      for (auto i = chunk.first; i < chunk.last; ++i) {
        if (s.slots[i].state == Slot::State::filling) s.slots[i] = {};  // cut short
      }
      if (error) {
        chunk.error = error;
        changed.notify_all();
        fail(error, url, s, member);
      }
      changed.notify_all();
      bound();
    }
  }
};

MemberStreams::MemberStreams(Fetch fetch, StreamLimits limits) : impl_(std::make_unique<Impl>()) {
  impl_->fetch = std::move(fetch);
  impl_->limits = limits;
  impl_->limits.chunk_bytes = std::max<std::uint64_t>(impl_->limits.chunk_bytes, 1);
}

MemberStreams::~MemberStreams() = default;

void MemberStreams::plan(const std::string& url, std::uint64_t object_size, std::string etag,
                         std::vector<PlannedMember> members) {
  std::sort(members.begin(), members.end(),
            [](const PlannedMember& a, const PlannedMember& b) { return a.offset < b.offset; });
  auto s = std::make_unique<Shard>();
  s->object_size = object_size;
  s->etag = std::move(etag);
  for (std::size_t i = 0; i < members.size(); ++i) {
    const auto& m = members[i];
    if (m.offset > object_size || m.size > object_size - m.offset) {
      throw std::invalid_argument(fmt::format("{}: member {} (bytes {}-{}) beyond the end ({})",
                                              url, m.name, m.offset, m.offset + m.size,
                                              object_size));
    }
    if (i > 0 && members[i - 1].offset + members[i - 1].size > m.offset) {
      throw std::invalid_argument(
          fmt::format("{}: members {} and {} overlap", url, members[i - 1].name, m.name));
    }
    s->members.push_back({m.offset, m.size});
    s->name_at.push_back(static_cast<std::uint32_t>(s->names.size()));
    s->names += m.name;
    s->names += '\0';
  }
  for (std::size_t i = 0; i < s->members.size();) {
    Chunk chunk{.first = i, .last = i + 1};
    const auto begin = s->members[i].offset;
    while (chunk.last < s->members.size()) {
      const auto& next = s->members[chunk.last];
      if (next.offset + next.size - begin > impl_->limits.chunk_bytes) break;
      ++chunk.last;
    }
    i = chunk.last;
    s->chunks.push_back(chunk);
  }
  std::lock_guard lock(impl_->mutex);
  auto& slot = impl_->shards[url];
  if (slot && slot->busy > 0) {
    throw std::invalid_argument(fmt::format("{}: planned again while it is read", url));
  }
  if (slot) impl_->drop(*slot);
  slot = std::move(s);
}

std::optional<std::vector<std::uint8_t>> MemberStreams::read(const std::string& url,
                                                             std::uint64_t offset,
                                                             std::uint64_t size) {
  std::unique_lock lock(impl_->mutex);
  const auto it = impl_->shards.find(url);
  if (it == impl_->shards.end()) return std::nullopt;
  Shard& s = *it->second;
  const auto m = std::lower_bound(s.members.begin(), s.members.end(), offset,
                                  [](const Range& r, std::uint64_t o) { return r.offset < o; });
  if (m == s.members.end() || m->offset != offset || m->size != size) return std::nullopt;
  if (s.slots.empty()) s.slots.resize(s.members.size());
  s.last_use = ++impl_->clock;
  ++s.busy;
  struct Done {
    Impl& impl;
    Shard& s;
    ~Done() {
      --s.busy;
      impl.release_if_idle(s);
    }
  } done{*impl_, s};
  return impl_->read(url, s, static_cast<std::size_t>(m - s.members.begin()), lock);
}

StreamStats MemberStreams::stats() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->stats;
}

}  // namespace brigade::launch::detail
