#include "transport/device/device_copy.h"

#include <cstring>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <utility>

namespace brigade::transport {
namespace detail {

struct DeviceBatchState {
  std::shared_ptr<Device> device;
  std::shared_ptr<void> memory;
  std::shared_ptr<Event> ready;
  std::shared_ptr<Event> copied;  // == ready without a copy queue
  media::DType dtype = media::DType::uint8;
  std::vector<std::int64_t> shape;
  Layout layout = Layout::nhwc;
  mutable std::mutex mutex;
  mutable ExternalStream consumer = nullptr;

  // The memory is free again once the copy is done and the consumer's stream has run
  // what it queued before now. A destructor cannot report (an exception here is
  // std::terminate): a device too broken to record an event (a sticky CUDA error) keeps
  // the copy's event, and the next user's work fails anyway; a fence that cannot be
  // added (out of memory) is skipped for the same reason.
  ~DeviceBatchState() {
    if (!memory) return;
    try {
      BufferPool::fence(memory, ready);
    } catch (...) {
    }
    try {
      BufferPool::fence(memory, device->record_on(consumer));
    } catch (...) {
    }
  }
};

struct CopyState {
  std::shared_ptr<Device> device;  // the outputs' queue: the copy, or normalize
  std::shared_ptr<Device> copies;  // with normalize: the copy queue (OVERLAP)
  CopyOptions options;
  BufferPool outputs;
  BufferPool staging;                // uint8 input of the normalize kernel
  std::optional<BufferPool> pinned;  // PINNED STAGING
  std::mutex mutex;
  std::deque<std::pair<std::shared_ptr<Event>, std::shared_ptr<void>>> foreign;
  std::uint64_t pageable = 0;  // under mutex
  std::uint64_t staged = 0;    // under mutex

  CopyState(std::shared_ptr<Device> d, CopyOptions o, std::size_t in_bytes, std::size_t out_bytes)
      : device(d),
        copies(o.normalize ? d->open_queue() : d),
        options(std::move(o)),
        outputs(d, BufferPool::Memory::device,
                {.max_buffers = options.device_buffers, .min_capacity = out_bytes}),
        staging(d, BufferPool::Memory::device,
                {.max_buffers = kNormalizeStaging,
                 .min_capacity = in_bytes,
                 .fence_allocations = true}) {
    if (options.pinned_staging > 0) {
      pinned.emplace(
          d, BufferPool::Memory::pinned_host,
          BufferPool::Options{.max_buffers = options.pinned_staging, .min_capacity = in_bytes});
    }
    if (out_bytes == 0) return;
    outputs.reserve(options.device_buffers);
    if (options.normalize) staging.reserve(kNormalizeStaging);
    if (pinned) pinned->reserve(options.pinned_staging);
  }

  ~CopyState() {
    for (auto& [event, owner] : foreign) {
      try {
        event->wait();
      } catch (...) {
      }
    }
  }

  void reap_foreign() {
    while (!foreign.empty() && foreign.front().first->ready()) foreign.pop_front();
  }
};

}  // namespace detail

namespace {

std::size_t checked_nbytes(const media::Tensor& t) {
  if (!t.defined()) throw std::invalid_argument("copy to device: the tensor has no memory");
  if (!t.is_contiguous()) throw std::invalid_argument("copy to device: the tensor is strided");
  return t.nbytes();
}

}  // namespace

DeviceBatch::DeviceBatch(std::shared_ptr<detail::DeviceBatchState> state)
    : state_(std::move(state)) {}

DeviceSpec DeviceBatch::device() const { return state_->device->spec(); }
void* DeviceBatch::data() const { return state_ ? state_->memory.get() : nullptr; }
media::DType DeviceBatch::dtype() const { return state_->dtype; }
const std::vector<std::int64_t>& DeviceBatch::shape() const { return state_->shape; }
Layout DeviceBatch::layout() const { return state_->layout; }
std::size_t DeviceBatch::nbytes() const {
  if (!state_) return 0;
  std::size_t n = media::dtype_size(state_->dtype);
  for (auto d : state_->shape) n *= static_cast<std::size_t>(d);
  return n;
}
bool DeviceBatch::ready() const { return state_->ready->ready() && state_->copied->ready(); }
void DeviceBatch::wait() const {
  state_->copied->wait();
  state_->ready->wait();
}
void DeviceBatch::use_on(ExternalStream stream) const {
  state_->device->wait_on(stream, state_->ready);
  std::lock_guard lock(state_->mutex);
  state_->consumer = stream;
}
const std::shared_ptr<Event>& DeviceBatch::event() const { return state_->ready; }
const std::shared_ptr<Event>& DeviceBatch::copied() const { return state_->copied; }
const std::shared_ptr<void>& DeviceBatch::memory() const { return state_->memory; }

DeviceBatch make_device_batch(std::shared_ptr<Device> device, std::shared_ptr<void> memory,
                              std::shared_ptr<Event> ready, media::DType dtype,
                              std::vector<std::int64_t> shape, Layout layout) {
  auto s = std::make_shared<detail::DeviceBatchState>();
  s->device = std::move(device);
  s->memory = std::move(memory);
  s->copied = ready;
  s->ready = std::move(ready);
  s->dtype = dtype;
  s->shape = std::move(shape);
  s->layout = layout;
  return DeviceBatch(std::move(s));
}

CopyStage::CopyStage(std::shared_ptr<Device> device, CopyOptions options) {
  if (!device) throw std::invalid_argument("CopyStage: no device");
  std::size_t in_bytes = 0, out_bytes = 0;  // of a full batch, if known
  if (!options.full_batch.empty()) {
    in_bytes = 1;
    for (auto d : options.full_batch) in_bytes *= static_cast<std::size_t>(d);
    out_bytes = in_bytes;
    if (options.normalize) {
      try {
        out_bytes = normalized_bytes(make_normalize_job(*options.normalize, options.full_batch));
      } catch (const std::invalid_argument&) {  // reported by each call, as without a shape
        in_bytes = out_bytes = 0;
      }
    }
  }
  state_ = std::make_shared<detail::CopyState>(std::move(device), std::move(options), in_bytes,
                                               out_bytes);
}

DeviceBatch CopyStage::operator()(const media::Tensor& host, std::stop_token stop) const {
  auto& s = *state_;
  const std::size_t in_bytes = checked_nbytes(host);
  const auto& norm = s.options.normalize;
  NormalizeJob job;
  auto dtype = host.dtype();
  auto shape = host.shape();
  auto layout = s.options.layout;
  std::size_t out_bytes = in_bytes;
  if (norm) {
    if (host.dtype() != media::DType::uint8 || layout != Layout::nhwc) {
      throw std::invalid_argument("copy to device: normalize takes uint8 NHWC batches, got " +
                                  std::string(media::dtype_name(host.dtype())) + " " +
                                  std::string(media::layout_name(layout)));
    }
    job = make_normalize_job(*norm, shape);
    shape = normalized_shape(*norm, shape);
    dtype = norm->dtype;
    layout = norm->layout;
    out_bytes = normalized_bytes(job);
  }

  std::lock_guard lock(s.mutex);
  s.reap_foreign();
  auto out = s.outputs.take(out_bytes, stop);  // the bound: waits while all are in use
  auto& device = *s.device;
  for (auto& f : out.fences) device.wait_for(f);
  // The DMA's source: the host tensor, or the pinned staging buffer it is copied into.
  const void* src = host.data();
  BufferPool::Buffer pinned;
  if (s.pinned && in_bytes > 0 && !device.page_locked(src)) {
    pinned = s.pinned->take(in_bytes, stop);  // waits for the DMA that last read it
    std::memcpy(pinned.memory.get(), src, in_bytes);
    src = pinned.memory.get();
    ++s.staged;
  }
  std::shared_ptr<Event> copied, done;
  if (norm) {
    auto staging = s.staging.take(in_bytes, stop);
    auto& copies = *s.copies;
    // Its allocation on `device` (first use), else the normalize that last read it.
    for (auto& f : staging.fences) copies.wait_for(f);
    copies.copy_to_device(staging.memory.get(), src, in_bytes);
    copied = copies.record();
    device.wait_for(copied);
    job.src = static_cast<const std::uint8_t*>(staging.memory.get());
    job.dst = out.memory.get();
    device.normalize(job);
    done = device.record();
    BufferPool::fence(staging.memory, done);
  } else {
    if (in_bytes > 0) device.copy_to_device(out.memory.get(), src, in_bytes);
    done = copied = device.record();
  }
  if (pinned.memory) {
    BufferPool::fence(pinned.memory, copied);
  } else if (!BufferPool::fence(host.owner(), copied)) {
    s.foreign.emplace_back(copied, host.owner());
    if (in_bytes > 0 && !device.page_locked(host.data())) ++s.pageable;
  }
  auto b = std::make_shared<detail::DeviceBatchState>();
  b->device = s.device;
  b->memory = std::move(out.memory);
  b->ready = std::move(done);
  b->copied = std::move(copied);
  b->dtype = dtype;
  b->shape = std::move(shape);
  b->layout = layout;
  return DeviceBatch(std::move(b));
}

const std::shared_ptr<Device>& CopyStage::device() const { return state_->device; }
std::uint64_t CopyStage::pageable_copies() const {
  std::lock_guard lock(state_->mutex);
  return state_->pageable;
}
std::uint64_t CopyStage::staged_copies() const {
  std::lock_guard lock(state_->mutex);
  return state_->staged;
}
const BufferPool* CopyStage::pinned_staging() const {
  return state_->pinned ? &*state_->pinned : nullptr;
}
BufferPool& CopyStage::pool() const { return state_->outputs; }
std::size_t CopyStage::foreign_in_flight() const {
  std::lock_guard lock(state_->mutex);
  state_->reap_foreign();
  return state_->foreign.size();
}

}  // namespace brigade::transport
