#include "transport/device/device_pool.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

namespace brigade::transport {
namespace detail {

// One pooled allocation and the events that must complete before it is reused.
struct PooledBlock {
  std::shared_ptr<void> memory;
  std::size_t capacity = 0;
  std::mutex mutex;
  std::vector<std::shared_ptr<Event>> fences;

  // Event::ready is noexcept (a failed event counts as complete), so the filter cannot
  // stop half-way and leave moved-from (null) entries behind; null events never enter.
  void add_fence(std::shared_ptr<Event> event) {
    std::lock_guard lock(mutex);
    drop_complete();
    if (event) fences.push_back(std::move(event));
  }
  bool fences_ready() {
    std::lock_guard lock(mutex);
    drop_complete();
    return fences.empty();
  }
  void drop_complete() noexcept {
    std::erase_if(fences, [](const auto& e) noexcept { return e->ready(); });
  }
  std::vector<std::shared_ptr<Event>> take_fences() {
    std::lock_guard lock(mutex);
    return std::exchange(fences, {});
  }
  // A fence whose work failed has still finished with the memory: the error belongs
  // to whoever waits on the batch, not to the next user of the buffer.
  void wait_fences() {
    for (auto& e : take_fences()) {
      try {
        e->wait();
      } catch (...) {
      }
    }
  }
  ~PooledBlock() { wait_fences(); }
};

struct PoolState {
  std::shared_ptr<Device> device;
  BufferPool::Memory kind;
  std::size_t max_buffers;
  std::size_t min_capacity = 0;
  bool fence_allocations = false;
  mutable std::mutex mutex;
  std::condition_variable_any returned;
  std::vector<std::shared_ptr<PooledBlock>> idle;  // oldest first
  std::size_t buffers = 0;
  std::size_t bytes = 0;
  std::uint64_t waits = 0;

  void give_back(std::shared_ptr<PooledBlock> block) {
    {
      std::lock_guard lock(mutex);
      idle.push_back(std::move(block));
    }
    returned.notify_one();
  }
};

// The deleter of every handed-out buffer: returns the block to its pool (or frees it
// when the pool is gone). BufferPool::fence finds it with std::get_deleter.
struct BufferReturn {
  std::shared_ptr<PooledBlock> block;
  std::weak_ptr<PoolState> pool;
  void operator()(void*) {
    if (auto p = pool.lock()) p->give_back(std::move(block));
    block.reset();  // pool gone: ~PooledBlock waits for its fences, then frees
  }
};

}  // namespace detail

namespace {

using detail::PooledBlock;
using detail::PoolState;

const char* memory_name(BufferPool::Memory m) {
  return m == BufferPool::Memory::pinned_host ? "pinned host" : "device";
}

// The smallest idle block that fits `nbytes` and satisfies `usable`, or idle.end().
template <class Pred>
auto best_fit(std::vector<std::shared_ptr<PooledBlock>>& idle, std::size_t nbytes, Pred usable) {
  auto best = idle.end();
  for (auto it = idle.begin(); it != idle.end(); ++it) {
    if ((*it)->capacity < nbytes || !usable(**it)) continue;
    if (best == idle.end() || (*it)->capacity < (*best)->capacity) best = it;
  }
  return best;
}

}  // namespace

BufferPool::BufferPool(std::shared_ptr<Device> device, Memory memory, Options options)
    : memory_(memory), state_(std::make_shared<PoolState>()) {
  if (!device) throw std::invalid_argument("BufferPool: no device");
  if (options.max_buffers == 0) throw std::invalid_argument("BufferPool: max_buffers must be > 0");
  state_->device = std::move(device);
  state_->kind = memory;
  state_->max_buffers = options.max_buffers;
  state_->min_capacity = options.min_capacity;
  state_->fence_allocations = options.fence_allocations && memory == Memory::device;
}

void BufferPool::reserve(std::size_t buffers) {
  auto& s = *state_;
  const bool host = memory_ == Memory::pinned_host;
  const std::size_t bytes = std::max<std::size_t>(s.min_capacity, 1);
  for (;;) {
    {
      std::lock_guard lock(s.mutex);
      if (s.buffers >= std::min(buffers, s.max_buffers)) return;
      ++s.buffers;
      s.bytes += bytes;
    }
    auto block = std::make_shared<PooledBlock>();
    try {
      block->memory = host ? s.device->allocate_host(bytes) : s.device->allocate_device(bytes);
      if (s.fence_allocations) block->fences.push_back(s.device->record());
    } catch (...) {
      std::lock_guard lock(s.mutex);
      --s.buffers;
      s.bytes -= bytes;
      throw;
    }
    block->capacity = bytes;
    s.give_back(std::move(block));
  }
}

BufferPool::~BufferPool() = default;

namespace {

// Waits for a block's fences. Copies finish on their own, but a fence can also be a
// collective waiting for a peer (device_group.cc), so a stoppable wait polls.
void wait_fences(PooledBlock& block, const std::stop_token& stop) {
  if (!stop.stop_possible()) return block.wait_fences();
  auto delay = std::chrono::microseconds(20);
  while (!block.fences_ready()) {
    if (stop.stop_requested()) return;  // the caller's loop throws StopRequested
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, std::chrono::microseconds(1000));
  }
}

// The smallest free block that fits `nbytes` (the oldest of equals), taken out of the
// idle list; for host memory only one whose fences are complete. Fences are queried
// with the pool's lock released (an event query is a driver call, and a fence may be a
// collective's): the fitting blocks are listed, checked unlocked, and the first ready
// one is taken unless another thread took it meanwhile (then the list is made again).
std::shared_ptr<PooledBlock> take_idle(PoolState& s, std::unique_lock<std::mutex>& lock,
                                       std::size_t nbytes, bool host) {
  if (!host) {
    auto it = best_fit(s.idle, nbytes, [](PooledBlock&) { return true; });
    if (it == s.idle.end()) return nullptr;
    auto block = std::move(*it);
    s.idle.erase(it);
    return block;
  }
  for (;;) {
    std::vector<std::shared_ptr<PooledBlock>> fits;
    for (const auto& b : s.idle) {
      if (b->capacity >= nbytes) fits.push_back(b);
    }
    std::stable_sort(fits.begin(), fits.end(),
                     [](const auto& a, const auto& b) { return a->capacity < b->capacity; });
    lock.unlock();
    std::shared_ptr<PooledBlock> ready;
    for (auto& b : fits) {
      if (b->fences_ready()) {
        ready = std::move(b);
        break;
      }
    }
    fits.clear();
    lock.lock();
    if (!ready) return nullptr;
    auto it = std::find(s.idle.begin(), s.idle.end(), ready);
    if (it != s.idle.end()) {
      s.idle.erase(it);
      return ready;
    }
  }
}

BufferPool::Buffer take_from(const std::shared_ptr<PoolState>& state, std::size_t nbytes,
                             const std::stop_token& stop) {
  nbytes = std::max<std::size_t>(nbytes, 1);
  auto& s = *state;
  const bool host = s.kind == BufferPool::Memory::pinned_host;
  std::shared_ptr<PooledBlock> block;
  bool waited = false;
  std::unique_lock lock(s.mutex);
  while (!block) {
    if (stop.stop_requested()) {
      throw StopRequested("stopped while waiting for a " + std::string(memory_name(s.kind)) +
                          " buffer of " + std::to_string(nbytes) + " bytes (all " +
                          std::to_string(s.max_buffers) + " in use)");
    }
    // A free block that fits; a host block also needs its fences complete.
    block = take_idle(s, lock, nbytes, host);
    if (block) break;
    if (s.buffers < s.max_buffers) {  // room for a new one
      const std::size_t capacity = std::max(nbytes, s.min_capacity);
      ++s.buffers;
      s.bytes += capacity;
      lock.unlock();
      auto fresh = std::make_shared<PooledBlock>();
      try {
        fresh->memory =
            host ? s.device->allocate_host(capacity) : s.device->allocate_device(capacity);
        if (s.fence_allocations) fresh->fences.push_back(s.device->record());
      } catch (...) {
        lock.lock();
        --s.buffers;
        s.bytes -= capacity;
        s.returned.notify_one();
        throw;
      }
      fresh->capacity = capacity;
      block = std::move(fresh);
      lock.lock();
      break;
    }
    waited = true;
    if (host) {  // a fitting free block whose copy is still running: wait for that copy
      auto pending = best_fit(s.idle, nbytes, [](PooledBlock&) { return true; });
      if (pending != s.idle.end()) {
        auto b = *pending;
        lock.unlock();
        wait_fences(*b, stop);
        lock.lock();
        continue;
      }
    }
    if (!s.idle.empty()) {  // free blocks, none big enough: free the oldest to make room
      auto victim = std::move(s.idle.front());
      s.idle.erase(s.idle.begin());
      --s.buffers;
      s.bytes -= victim->capacity;
      lock.unlock();
      victim.reset();  // waits for its fences, then frees
      lock.lock();
      continue;
    }
    s.returned.wait(lock, stop, [&] { return !s.idle.empty() || s.buffers < s.max_buffers; });
  }
  if (waited) ++s.waits;
  lock.unlock();

  BufferPool::Buffer out;
  out.fences = block->take_fences();
  if (host) out.fences.clear();  // complete (checked or waited above)
  void* data = block->memory.get();
  out.memory = std::shared_ptr<void>(data, detail::BufferReturn{std::move(block), state});
  return out;
}

}  // namespace

BufferPool::Buffer BufferPool::take(std::size_t nbytes, std::stop_token stop) {
  return take_from(state_, nbytes, stop);
}

media::Allocator BufferPool::allocator(std::stop_token stop) {
  if (memory_ != Memory::pinned_host) {
    throw std::logic_error("BufferPool::allocator: only host pools can back tensors");
  }
  return
      [state = state_, stop](std::size_t nbytes) { return take_from(state, nbytes, stop).memory; };
}

bool BufferPool::fence(const std::shared_ptr<void>& buffer, std::shared_ptr<Event> event) {
  auto* ret = std::get_deleter<detail::BufferReturn>(buffer);
  if (ret == nullptr || !ret->block) return false;
  ret->block->add_fence(std::move(event));
  return true;
}

BufferPool::Stats BufferPool::stats() const {
  std::lock_guard lock(state_->mutex);
  return {state_->buffers, state_->buffers - state_->idle.size(), state_->bytes, state_->waits};
}

const std::shared_ptr<Device>& BufferPool::device() const { return state_->device; }

}  // namespace brigade::transport
