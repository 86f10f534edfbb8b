#include "launch/detail/batch.h"

#include <algorithm>
#include <cstring>

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

Slot SlotAssigner::assign(const actors::SampleId& sample) {
  if (!current_ || next_ == batch_size_) {
    auto shape = shape_;
    shape.insert(shape.begin(), static_cast<std::int64_t>(batch_size_));
    current_ = std::make_shared<BatchBuffer>();
    current_->data = media::Tensor::empty(media::DType::uint8, shape, allocator_);
    next_ = 0;
  }
  return {current_, next_++, batch_size_, sample.id};
}

std::optional<Batch> GatherSlots::accumulate(Slot s) {
  slots.push_back(std::move(s));
  if (slots.size() < slots.front().count) return std::nullopt;
  return finish();
}

std::optional<Batch> GatherSlots::flush() {
  if (slots.empty()) return std::nullopt;
  return finish();
}

Batch GatherSlots::finish() {
  Batch b;
  const auto& full = slots.front().batch->data;
  const std::size_t stride = full[0].nbytes();
  auto* base = static_cast<std::uint8_t*>(full.data());
  for (auto& slot : slots) {
    if (!slot.error.empty()) {
      b.failures.push_back(std::move(slot.error));
      b.failed_stages.push_back(std::move(slot.error_stage));
      continue;
    }
    if (slot.index != b.ids.size()) {
      std::memmove(base + b.ids.size() * stride, base + slot.index * stride, stride);
    }
    b.ids.push_back(slot.id);
  }
  auto shape = full.shape();
  shape[0] = static_cast<std::int64_t>(b.ids.size());
  b.data = media::Tensor(full.dtype(), shape, full.owner(), full.data());
  slots.clear();
  return b;
}

void hwc_to_chw(const std::uint8_t* in, std::uint8_t* out, std::int64_t h, std::int64_t w,
                std::int64_t c) {
  const std::int64_t plane = h * w;
  for (std::int64_t p = 0; p < plane; ++p) {
    for (std::int64_t k = 0; k < c; ++k) out[k * plane + p] = in[p * c + k];
  }
}

Batch collate(std::vector<Decoded> items, Layout layout, const media::Allocator& allocator) {
  Batch b;
  const auto& shape = items.front().data.shape();
  std::vector<std::int64_t> out_shape{static_cast<std::int64_t>(items.size())};
  out_shape.insert(out_shape.end(), shape.begin(), shape.end());
  const std::size_t n = out_shape.size();
  if (layout == Layout::nchw) {
    std::rotate(out_shape.begin() + n - 3, out_shape.begin() + n - 1, out_shape.end());
  }
  b.data = media::Tensor::empty(media::DType::uint8, out_shape, allocator);
  const std::size_t stride = items.front().data.nbytes();
  const std::int64_t h = shape[shape.size() - 3], w = shape[shape.size() - 2], c = shape.back();
  const auto image = static_cast<std::size_t>(h * w * c);
  auto* out = static_cast<std::uint8_t*>(b.data.data());
  b.ids.reserve(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto* in = static_cast<const std::uint8_t*>(items[i].data.data());
    if (layout == Layout::nhwc) {
      std::memcpy(out + i * stride, in, stride);
    } else {
      for (std::size_t off = 0; off < stride; off += image) {
        hwc_to_chw(in + off, out + i * stride + off, h, w, c);
      }
    }
    b.ids.push_back(items[i].id);
  }
  return b;
}

}  // namespace brigade::launch::detail
