#include "transport/device/detail/cuda/cuda_device.h"

#include <cstdint>
#include <stdexcept>
#include <string>

#include "transport/device/detail/cuda/error.h"
#include "transport/device/detail/cuda/normalize_kernel.h"
#include "transport/device/detail/device_cuda.h"
#include "transport/device/device_normalize.h"

namespace brigade::transport::detail {

CudaEventPool::~CudaEventPool() {
  for (auto e : free) cudaEventDestroy(e);
}

// An event that failed is not reused: its error stays with it.
CudaEvent::~CudaEvent() {
  if (!pool_ || failed_.load() != 0) {
    cudaEventDestroy(event_);
    return;
  }
  try {
    std::lock_guard lock(pool_->mutex);
    pool_->free.push_back(event_);
  } catch (...) {  // out of memory: destroy instead
    cudaEventDestroy(event_);
  }
}

bool CudaEvent::ready() const noexcept {
  const cudaError_t status = cudaEventQuery(event_);
  if (status == cudaErrorNotReady) return false;
  if (status != cudaSuccess) {
    cudaGetLastError();  // a non-sticky error must not reach the next launch's check
    int none = 0;
    failed_.compare_exchange_strong(none, static_cast<int>(status));
  }
  return true;
}

void CudaEvent::wait() const {
  if (const int status = failed_.load(); status != 0) {
    check_cuda(static_cast<cudaError_t>(status), "cudaEventQuery", device_);  // what ready() saw
  }
  BRIGADE_CUDA_CHECK(cudaEventSynchronize(event_), device_);
}

CudaDevice::CudaDevice(int index) : index_(index) {
  DeviceScope scope(index_);
  BRIGADE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), index_);
  // A pool of our own, not the device's default one that others may tune.
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = index_;
  BRIGADE_CUDA_CHECK(cudaMemPoolCreate(&pool_, &props), index_);
  std::uint64_t keep = UINT64_MAX;  // cache freed blocks across synchronizations
  BRIGADE_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep),
                     index_);
}

// The stream's queued work still completes; CUDA releases the stream afterwards.
// The pool is released once its last allocation is freed (its memory holds the device).
CudaDevice::~CudaDevice() {
  cudaStreamDestroy(stream_);
  if (pool_ != nullptr) cudaMemPoolDestroy(pool_);
}

std::shared_ptr<void> CudaDevice::allocate_host(std::size_t nbytes) {
  DeviceScope scope(index_);
  void* p = nullptr;
  BRIGADE_CUDA_CHECK(cudaHostAlloc(&p, nbytes, cudaHostAllocDefault), index_);
  return std::shared_ptr<void>(p, [self = shared_from_this()](void* q) { cudaFreeHost(q); });
}

// Stream-ordered (cudaMallocAsync on the device's stream): unlike cudaFree, the free
// never waits for the device's queued work (a training step on another stream). Memory
// reaches other streams only through events recorded after its first use here (the copy
// stage's, a group's), which also order them after the allocation. The pool keeps what
// is freed cached for the next allocation (the device's own pool, its release threshold
// raised so that a synchronization does not hand it back to the driver).
std::shared_ptr<void> CudaDevice::allocate_device(std::size_t nbytes) {
  DeviceScope scope(index_);
  void* p = nullptr;
  BRIGADE_CUDA_CHECK(cudaMallocFromPoolAsync(&p, nbytes, pool_, stream_), index_);
  // The pool's order guarantees (device_pool.h) hold: nothing queued still uses it. A
  // failure (CUDA unloading at exit) cannot be reported from a deleter.
  return std::shared_ptr<void>(
      p, [self = shared_from_this()](void* q) { cudaFreeAsync(q, self->stream_); });
}

bool CudaDevice::page_locked(const void* host) const {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, host) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attributes.type == cudaMemoryTypeHost;
}

void CudaDevice::copy_to_device(void* dst, const void* src, std::size_t nbytes) {
  DeviceScope scope(index_);
  BRIGADE_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, stream_), index_);
}

void CudaDevice::copy_to_host(void* dst, const void* src, std::size_t nbytes) {
  DeviceScope scope(index_);
  BRIGADE_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, stream_), index_);
}

void CudaDevice::normalize(const NormalizeJob& job) {
  NormalizeKernelArgs args{};
  args.src = job.src;
  args.dst = job.dst;
  args.images = job.images;
  args.pixels = job.height * job.width;
  args.channels = static_cast<int>(job.channels);
  args.half = job.half;
  args.nchw = job.layout == Layout::nchw;
  for (int c = 0; c < kKernelMaxChannels; ++c) {
    args.a[c] = job.a[c];
    args.b[c] = job.b[c];
  }
  DeviceScope scope(index_);
  cudaGetLastError();  // launch_normalize reports cudaGetLastError: not someone else's
  BRIGADE_CUDA_CHECK(static_cast<cudaError_t>(launch_normalize(args, stream_)), index_);
}

std::shared_ptr<Event> CudaDevice::record_event(cudaStream_t stream) {
  DeviceScope scope(index_);
  cudaEvent_t event = nullptr;
  {
    std::lock_guard lock(events_->mutex);
    if (!events_->free.empty()) {
      event = events_->free.back();
      events_->free.pop_back();
    }
  }
  if (event == nullptr) {
    BRIGADE_CUDA_CHECK(
        cudaEventCreateWithFlags(&event, cudaEventDisableTiming | cudaEventBlockingSync), index_);
  }
  auto owned = std::make_shared<CudaEvent>(event, index_, events_);
  BRIGADE_CUDA_CHECK(cudaEventRecord(event, stream), index_);
  return owned;
}

const CudaEvent& CudaDevice::cuda_event(const std::shared_ptr<Event>& event) const {
  auto* e = dynamic_cast<const CudaEvent*>(event.get());
  if (e == nullptr) throw std::invalid_argument("CudaDevice: not an event of a CUDA device");
  return *e;
}

std::shared_ptr<Event> CudaDevice::record() { return record_event(stream_); }

void CudaDevice::wait_for(const std::shared_ptr<Event>& event) {
  const auto& e = cuda_event(event);
  DeviceScope scope(index_);
  BRIGADE_CUDA_CHECK(cudaStreamWaitEvent(stream_, e.get(), 0), index_);
}

std::shared_ptr<Event> CudaDevice::record_on(ExternalStream stream) {
  return record_event(static_cast<cudaStream_t>(stream));
}

void CudaDevice::wait_on(ExternalStream stream, const std::shared_ptr<Event>& event) {
  const auto& e = cuda_event(event);
  DeviceScope scope(index_);
  BRIGADE_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), e.get(), 0), index_);
}

void CudaDevice::synchronize() {
  DeviceScope scope(index_);
  BRIGADE_CUDA_CHECK(cudaStreamSynchronize(stream_), index_);
}

std::shared_ptr<Device> CudaDevice::open_queue() { return std::make_shared<CudaDevice>(index_); }

bool cuda_compiled() { return true; }

CudaAvailability cuda_probe() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return {0, std::string("cudaGetDeviceCount: ") + cudaGetErrorName(status) + " (" +
                   cudaGetErrorString(status) + ")"};
  }
  if (count == 0) return {0, "cudaGetDeviceCount: no CUDA device"};
  return {count, ""};
}

std::shared_ptr<Device> open_cuda_device(int index) {
  const auto available = cuda_probe();
  if (available.devices == 0) {
    throw DeviceError("CUDA", "no-device", "cudaGetDeviceCount", {DeviceKind::cuda, index},
                      available.reason, DeviceErrc::unsupported);
  }
  if (index >= available.devices) {
    throw DeviceError("CUDA", "cudaErrorInvalidDevice", "open_device", {DeviceKind::cuda, index},
                      std::to_string(available.devices) + " device(s) visible");
  }
  return std::make_shared<CudaDevice>(index);
}

}  // namespace brigade::transport::detail
