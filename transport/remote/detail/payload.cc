#include "transport/remote/detail/payload.h"

#include <algorithm>
#include <mutex>
#include <vector>

namespace brigade::transport {

SharedBytes::SharedBytes(std::vector<char> bytes) {
  auto owner = std::make_shared<std::vector<char>>(std::move(bytes));
  data_ = owner->data();
  size_ = owner->size();
  owner_ = std::move(owner);
}

}  // namespace brigade::transport

namespace brigade::transport::detail {
namespace {

struct Block {
  std::unique_ptr<char[]> memory;
  std::size_t capacity = 0;
};

class Pool {
 public:
  Block take(std::size_t size) {
    {
      std::lock_guard lock(mutex_);
      auto best = free_.end();
      for (auto it = free_.begin(); it != free_.end(); ++it) {
        if (it->capacity >= size && it->capacity <= 2 * std::max<std::size_t>(size, 4096) &&
            (best == free_.end() || it->capacity < best->capacity))
          best = it;
      }
      if (best != free_.end()) {
        Block b = std::move(*best);
        free_.erase(best);
        return b;
      }
    }
    return {std::unique_ptr<char[]>(new char[std::max<std::size_t>(size, 1)]), size};
  }

  void give_back(Block b) {
    std::lock_guard lock(mutex_);
    free_.push_back(std::move(b));
    std::size_t bytes = 0;
    for (const auto& f : free_) bytes += f.capacity;
    while (free_.size() > kMaxFreePayloads || bytes > kMaxFreePayloadBytes) {
      bytes -= free_.front().capacity;  // the oldest goes
      free_.erase(free_.begin());
    }
  }

  std::size_t free() {
    std::lock_guard lock(mutex_);
    return free_.size();
  }

 private:
  std::mutex mutex_;
  std::vector<Block> free_;
};

// Never destroyed: a result may be dropped after static destruction began.
Pool& pool() {
  static auto* p = new Pool;
  return *p;
}

}  // namespace

SharedBytes recycled_bytes(std::size_t size, char** data) {
  std::shared_ptr<Block> block(new Block(pool().take(size)), [](Block* b) {
    pool().give_back(std::move(*b));
    delete b;
  });
  *data = block->memory.get();
  return {std::move(block), *data, size};
}

std::size_t free_payloads() { return pool().free(); }

}  // namespace brigade::transport::detail
