#include "launch/loader/detail/member_streams.h"

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "transport/storage/object_store.h"

namespace brigade::launch::detail {
namespace {

struct Range {
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
};

// A member's bytes while its shard is open. Taken: a read took it; a fetch spans it only
// when a read asks for it again (absent again).
struct Slot {
  enum class State { absent, filling, ready, taken };
  State state = State::absent;
  std::vector<std::uint8_t> bytes{};
};

struct Chunk {
  std::size_t first = 0, last = 0;  // members [first, last)
  bool fetching = false;
  bool demanded = false;       // in the demand queue
  std::uint64_t done = 0;      // fetches ended
  std::exception_ptr error{};  // of the last fetch that ended, when it failed
};

struct Shard {
  std::uint64_t object_size = 0;
  std::string etag{};
  std::vector<Range> members{};  // sorted by offset
  std::string names{};           // the members' names, each ended by '\0'
  std::vector<std::uint32_t> name_at{};
  std::vector<Chunk> chunks{};
  std::vector<char> wanted{};  // per member: this process reads it (empty: every member)
  std::vector<Slot> slots{};   // while open: one per member
  std::uint64_t held = 0;      // ready slots' bytes
  std::size_t taken = 0;       // taken slots
  std::uint64_t last_use = 0;
  int busy = 0;      // reads inside read(), and fetches until their last member is in
  int fetching = 0;  // fetches under way (their slots in use until they end)

  std::string name(std::size_t member) const { return names.c_str() + name_at[member]; }
  bool is_wanted(std::size_t member) const { return wanted.empty() || wanted[member] != 0; }
  std::size_t chunk_of(std::size_t member) const {
    auto it = std::upper_bound(chunks.begin(), chunks.end(), member,
                               [](std::size_t m, const Chunk& c) { return m < c.first; });
    return static_cast<std::size_t>(it - chunks.begin()) - 1;
  }
  void open() {
    if (slots.empty()) slots.resize(members.size());
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

// A chunk for the fetchers, and the member a read asks for (npos: a prefetch).
struct Job {
  std::string url;
  std::size_t chunk = 0;
  std::size_t member = std::string::npos;
};

// The chunks of `s` (see CHUNKS and WANTED): a chunk ends before a wanted member that
// would take its span of wanted members past `chunk_bytes` or follows the previous
// wanted one by more than `gap_bytes`; members not wanted ride along.
void make_chunks(Shard& s, const StreamLimits& limits) {
  s.chunks.clear();
  std::size_t first = 0;
  bool open = false;
  std::uint64_t begin = 0, end = 0;
  for (std::size_t i = 0; i < s.members.size(); ++i) {
    if (!s.is_wanted(i)) continue;
    const auto& m = s.members[i];
    if (open &&
        (m.offset + m.size - begin > limits.chunk_bytes || m.offset - end > limits.gap_bytes)) {
      s.chunks.push_back({.first = first, .last = i});
      first = i;
      open = false;
    }
    if (!open) begin = m.offset;
    open = true;
    end = m.offset + m.size;
  }
  if (first < s.members.size()) s.chunks.push_back({.first = first, .last = s.members.size()});
}

}  // namespace

struct MemberStreams::Impl {
  Fetch fetch;
  StreamLimits limits;
  mutable std::mutex mutex;
  std::condition_variable_any changed;     // for reads: a member in, a fetch ended
  std::condition_variable_any work_ready;  // for fetchers: a job, or room for a prefetch
  std::unordered_map<std::string, std::unique_ptr<Shard>> shards;
  std::unordered_set<Shard*> holding;  // shards with held > 0
  std::uint64_t clock = 0;
  StreamReadStats stats;
  std::deque<Job> demand, ahead;  // chunks asked for by reads; queued by prefetch()
  std::uint64_t prefetching = 0;  // the spans of the prefetches under way
  int idle = 0;                   // fetchers waiting for a job
  std::vector<std::thread> fetchers;
  std::stop_source stopping;

  // A shard no one uses, holding nothing, read whole or not at all: its plan only.
  void release_if_idle(Shard& s) {
    if (s.busy == 0 && s.fetching == 0 && s.held == 0 &&
        (s.taken == 0 || s.taken == s.members.size())) {
      holding.erase(&s);
      std::vector<Slot>().swap(s.slots);
      s.taken = 0;
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

  void hold(Shard& s, std::uint64_t size) {
    s.held += size;
    stats.held_bytes += size;
    stats.peak_held_bytes = std::max(stats.peak_held_bytes, stats.held_bytes);
    holding.insert(&s);
  }

  // Drops the least recently used idle shards' members until the bound holds.
  void bound() {
    while (stats.held_bytes > limits.held_bytes) {
      Shard* oldest = nullptr;
      for (Shard* s : holding) {
        if (s->busy == 0 && (!oldest || s->last_use < oldest->last_use)) oldest = s;
      }
      if (!oldest) return;
      drop(*oldest);
      if (prefetch_ready()) wake();
    }
  }

  // A job is ready: an idle fetcher takes it, else a fetcher more when the bound allows.
  void wake() {
    if (idle == 0 && static_cast<int>(fetchers.size()) < limits.requests &&
        !stopping.stop_requested()) {
      fetchers.emplace_back([this] { work(); });
    }
    work_ready.notify_one();  // a fetcher that takes a job wakes the next (work())
  }

  // The span of `chunk`'s wanted members (and `asked`) that no one holds or receives:
  // [first, last) members, empty when there are none.
  static std::pair<std::size_t, std::size_t> absent_span(const Shard& s, const Chunk& chunk,
                                                         std::size_t asked = std::string::npos) {
    std::size_t first = chunk.last, last = chunk.first;
    for (auto i = chunk.first; i < chunk.last; ++i) {
      if (i != asked && !s.is_wanted(i)) continue;
      if (!s.slots.empty() && s.slots[i].state != Slot::State::absent) continue;
      first = std::min(first, i);
      last = i + 1;
    }
    return {first, std::max(first, last)};
  }

  // The queue's first prefetch that is still wanted: whether the bound lets it start.
  // Drops from the front the ones not wanted any more.
  bool prefetch_ready() {
    while (!ahead.empty()) {
      const auto it = shards.find(ahead.front().url);
      const Shard* s = it == shards.end() ? nullptr : it->second.get();
      if (!s || ahead.front().chunk >= s->chunks.size() ||
          s->chunks[ahead.front().chunk].fetching) {
        ahead.pop_front();
        continue;
      }
      const auto [first, last] = absent_span(*s, s->chunks[ahead.front().chunk]);
      if (first == last) {
        ahead.pop_front();
        continue;
      }
      const auto span =
          s->members[last - 1].offset + s->members[last - 1].size - s->members[first].offset;
      return stats.held_bytes + prefetching + span <= limits.prefetch_bytes ||
             (stats.held_bytes == 0 && prefetching == 0);
    }
    return false;
  }

  // Copies the body's bytes into the slots this fetch claimed (filling), and hands each
  // member over as it completes. Called by the fetcher without the lock.
  struct Cutter {
    Impl& impl;
    Shard& shard;
    std::size_t last;           // the members [member, last) are this fetch's span
    std::uint64_t position;     // the object offset of the next byte
    std::size_t member;         // the first member not yet complete
    std::vector<char> claimed;  // per member from the span's first: this fetch fills it
    std::size_t first;
    bool done = false;  // the span's last member is in: the shard is no longer busy for it

    void operator()(const std::byte* data, std::size_t size) {
      const std::uint64_t end = position + size;
      while (member < last && position < end) {
        const Range m = shard.members[member];
        if (position < m.offset) {  // a tar header or padding: skip to the member
          const auto gap = std::min(m.offset, end) - position;
          data += gap;
          position += gap;
          continue;
        }
        auto& slot = shard.slots[member];
        const bool mine = claimed[member - first] != 0;
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
            impl.hold(shard, m.size);
            if (member + 1 == last) {
              done = true;
              --shard.busy;
            }
            impl.bound();  // as members arrive: others make room (not a busy shard)
            impl.changed.notify_all();
          }
          ++member;
        }
      }
    }
  };

  // A fetcher: takes demands first, then prefetches the bound allows, until stopped.
  void work() {
    std::unique_lock lock(mutex);
    for (;;) {
      ++idle;
      work_ready.wait(
          lock, [&] { return stopping.stop_requested() || !demand.empty() || prefetch_ready(); });
      --idle;
      if (stopping.stop_requested()) return;
      const bool early = demand.empty();
      Job job = std::move(early ? ahead.front() : demand.front());
      (early ? ahead : demand).pop_front();
      if (!demand.empty() || prefetch_ready()) wake();  // the next job: another fetcher
      run(job, early, lock);
    }
  }

  void run(const Job& job, bool early, std::unique_lock<std::mutex>& lock) {
    const auto it = shards.find(job.url);
    if (it == shards.end() || job.chunk >= it->second->chunks.size()) return;
    Shard& s = *it->second;
    Chunk& chunk = s.chunks[job.chunk];
    if (!early) chunk.demanded = false;
    if (chunk.fetching) return;  // a read waiting on it asks again when it ends
    s.open();
    const auto [first, last] = absent_span(s, chunk, job.member);
    if (first == last) {
      changed.notify_all();
      return;
    }
    Cutter cut{*this, s, last, s.members[first].offset, first, std::vector<char>(last - first),
               first};
    for (auto i = first; i < last; ++i) {
      if (s.slots[i].state != Slot::State::absent || (i != job.member && !s.is_wanted(i))) continue;
      s.slots[i].state = Slot::State::filling;
      cut.claimed[i - first] = 1;
    }
    const auto begin = s.members[first].offset;
    const auto span = s.members[last - 1].offset + s.members[last - 1].size - begin;
    chunk.fetching = true;
    ++s.busy;
    ++s.fetching;
    ++stats.fetches;
    if (early) {
      ++stats.prefetches;
      prefetching += span;
      s.last_use = ++clock;  // newer than the shards read so far: the bound keeps it
    }
    std::exception_ptr error;
    lock.unlock();
    try {
      fetch(job.url, begin, span, s.object_size, s.etag, std::ref(cut), stopping.get_token());
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    chunk.fetching = false;
    ++chunk.done;
    chunk.error = error;
    for (auto i = first; i < last; ++i) {
      if (s.slots[i].state == Slot::State::filling) s.slots[i] = {};  // cut short
    }
    if (early) prefetching -= span;
    if (!cut.done) --s.busy;
    --s.fetching;
    release_if_idle(s);
    changed.notify_all();
    bound();
    if (prefetch_ready()) wake();  // less prefetching: room for the next
  }

  std::vector<std::uint8_t> read(const std::string& url, Shard& s, std::size_t member,
                                 std::unique_lock<std::mutex>& lock, const std::stop_token& stop) {
    const std::size_t c = s.chunk_of(member);
    ++stats.reads;
    bool waited = false;
    for (;;) {
      Slot& slot = s.slots[member];
      if (slot.state == Slot::State::taken) {  // read again
        slot.state = Slot::State::absent;
        --s.taken;
      }
      if (slot.state == Slot::State::ready) {
        auto bytes = std::move(slot.bytes);
        slot = {};
        slot.state = Slot::State::taken;
        ++s.taken;
        s.held -= bytes.size();
        stats.held_bytes -= bytes.size();
        if (prefetch_ready()) wake();  // room for a prefetch
        return bytes;
      }
      Chunk& chunk = s.chunks[c];
      if (slot.state == Slot::State::absent && !chunk.demanded) {
        chunk.demanded = true;
        demand.push_back({url, c, member});
        wake();
      }
      if (!waited) ++stats.waits;
      waited = true;
      const auto done = chunk.done;
      changed.wait(lock, stop,
                   [&] { return slot.state == Slot::State::ready || chunk.done != done; });
      if (slot.state == Slot::State::ready) continue;
      if (stop.stop_requested()) {
        const auto& m = s.members[member];
        throw transport::StorageError(
            transport::StorageErrc::cancelled, url,
            fmt::format("shard {} member {} (bytes {}-{}): cancelled (a stop) while its bytes "
                        "were awaited",
                        url, s.name(member), m.offset, m.offset + m.size));
      }
      if (slot.state == Slot::State::absent && chunk.error) fail(chunk.error, url, s, member);
    }
  }
};

MemberStreams::MemberStreams(Fetch fetch, StreamLimits limits) : impl_(std::make_unique<Impl>()) {
  impl_->fetch = std::move(fetch);
  impl_->limits = limits;
  impl_->limits.chunk_bytes = std::max<std::uint64_t>(impl_->limits.chunk_bytes, 1);
  impl_->limits.prefetch_bytes = std::min(impl_->limits.prefetch_bytes, impl_->limits.held_bytes);
  impl_->limits.requests = std::max(impl_->limits.requests, 1);
}

MemberStreams::~MemberStreams() {
  std::vector<std::thread> fetchers;
  {
    std::lock_guard lock(impl_->mutex);
    impl_->stopping.request_stop();
    impl_->changed.notify_all();
    impl_->work_ready.notify_all();
    fetchers.swap(impl_->fetchers);
  }
  for (auto& f : fetchers) f.join();
}

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
  make_chunks(*s, impl_->limits);
  std::lock_guard lock(impl_->mutex);
  auto& slot = impl_->shards[url];
  if (slot && (slot->busy > 0 || slot->fetching > 0)) {
    throw std::invalid_argument(fmt::format("{}: planned again while it is read", url));
  }
  if (slot) impl_->drop(*slot);
  slot = std::move(s);
}

bool MemberStreams::offer(const std::string& url, std::uint64_t offset,
                          std::vector<std::uint8_t>&& bytes) {
  std::lock_guard lock(impl_->mutex);
  const auto it = impl_->shards.find(url);
  if (it == impl_->shards.end()) return false;
  Shard& s = *it->second;
  const auto m = std::lower_bound(s.members.begin(), s.members.end(), offset,
                                  [](const Range& r, std::uint64_t o) { return r.offset < o; });
  if (m == s.members.end() || m->offset != offset || m->size != bytes.size()) return false;
  if (impl_->stats.held_bytes + bytes.size() > impl_->limits.held_bytes) return false;
  s.open();
  auto& slot = s.slots[static_cast<std::size_t>(m - s.members.begin())];
  if (slot.state != Slot::State::absent && slot.state != Slot::State::taken) return false;
  if (slot.state == Slot::State::taken) --s.taken;
  slot.state = Slot::State::ready;
  slot.bytes = std::move(bytes);
  impl_->stats.offered_bytes += m->size;
  impl_->hold(s, m->size);
  s.last_use = ++impl_->clock;
  return true;
}

std::optional<std::vector<std::uint8_t>> MemberStreams::read(const std::string& url,
                                                             std::uint64_t offset,
                                                             std::uint64_t size,
                                                             std::stop_token stop) {
  std::unique_lock lock(impl_->mutex);
  const auto it = impl_->shards.find(url);
  if (it == impl_->shards.end()) return std::nullopt;
  Shard& s = *it->second;
  const auto m = std::lower_bound(s.members.begin(), s.members.end(), offset,
                                  [](const Range& r, std::uint64_t o) { return r.offset < o; });
  if (m == s.members.end() || m->offset != offset || m->size != size) return std::nullopt;
  s.open();
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
  return impl_->read(url, s, static_cast<std::size_t>(m - s.members.begin()), lock, stop);
}

void MemberStreams::prefetch(const std::string& url) {
  std::lock_guard lock(impl_->mutex);
  const auto it = impl_->shards.find(url);
  if (it == impl_->shards.end() || it->second->chunks.empty()) return;
  for (std::size_t c = 0; c < it->second->chunks.size(); ++c) impl_->ahead.push_back({url, c});
  impl_->wake();
}

void MemberStreams::want(const std::string& url, const std::vector<std::uint64_t>& offsets) {
  std::lock_guard lock(impl_->mutex);
  const auto it = impl_->shards.find(url);
  if (it == impl_->shards.end()) return;
  Shard& s = *it->second;
  s.wanted.assign(s.members.size(), 0);
  for (const auto offset : offsets) {
    const auto m = std::lower_bound(s.members.begin(), s.members.end(), offset,
                                    [](const Range& r, std::uint64_t o) { return r.offset < o; });
    if (m != s.members.end() && m->offset == offset)
      s.wanted[static_cast<std::size_t>(m - s.members.begin())] = 1;
  }
  // A new reading: what was taken is read again; what is held and not wanted goes.
  for (std::size_t i = 0; i < s.slots.size(); ++i) {
    auto& slot = s.slots[i];
    if (slot.state == Slot::State::taken) {
      slot.state = Slot::State::absent;
    } else if (slot.state == Slot::State::ready && !s.wanted[i]) {
      impl_->stats.dropped_bytes += slot.bytes.size();
      s.held -= slot.bytes.size();
      impl_->stats.held_bytes -= slot.bytes.size();
      slot = {};
    }
  }
  s.taken = 0;
  const bool demanded =
      std::any_of(s.chunks.begin(), s.chunks.end(), [](const Chunk& c) { return c.demanded; });
  if (s.busy == 0 && s.fetching == 0 && !demanded) make_chunks(s, impl_->limits);
  impl_->release_if_idle(s);
}

void MemberStreams::clear_prefetches() {
  std::lock_guard lock(impl_->mutex);
  impl_->ahead.clear();
  for (auto& [url, s] : impl_->shards) {
    if (s->taken == 0) continue;
    for (auto& slot : s->slots) {
      if (slot.state == Slot::State::taken) slot.state = Slot::State::absent;
    }
    s->taken = 0;
    impl_->release_if_idle(*s);
  }
}

void MemberStreams::set_requests(int requests) {
  std::lock_guard lock(impl_->mutex);
  impl_->limits.requests = std::max(requests, 1);
}

StreamReadStats MemberStreams::stats() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->stats;
}

}  // namespace brigade::launch::detail
