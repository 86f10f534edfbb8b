#include "launch/loader/detail/batch.h"

#include <algorithm>

namespace brigade::launch::detail {

media::Allocator BatchPool::allocator() {
  return [self = shared_from_this()](std::size_t nbytes) { return self->take(nbytes); };
}

std::shared_ptr<void> BatchPool::take(std::size_t nbytes) {
  std::shared_ptr<void> block;
  {
    std::lock_guard lock(mutex_);
    auto it = std::find_if(free_.begin(), free_.end(), [&](auto& b) { return b.first == nbytes; });
    if (it != free_.end()) {
      block = std::move(it->second);
      free_.erase(it);
    }
  }
  if (!block) block = media::default_allocate(nbytes);
  void* data = block.get();
  std::weak_ptr<BatchPool> pool = weak_from_this();
  return std::shared_ptr<void>(data, [pool, nbytes, block = std::move(block)](void*) mutable {
    if (auto p = pool.lock()) p->give_back(nbytes, std::move(block));
  });
}

void BatchPool::give_back(std::size_t nbytes, std::shared_ptr<void> block) {
  std::lock_guard lock(mutex_);
  if (free_.size() < kMaxFree) free_.emplace_back(nbytes, std::move(block));
}

void hwc_to_chw(const std::uint8_t* in, std::uint8_t* out, std::int64_t h, std::int64_t w,
                std::int64_t c) {
  const std::int64_t plane = h * w;
  for (std::int64_t p = 0; p < plane; ++p) {
    for (std::int64_t k = 0; k < c; ++k) out[k * plane + p] = in[p * c + k];
  }
}

}  // namespace brigade::launch::detail
