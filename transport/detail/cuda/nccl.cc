// NCCL behind DeviceGroup. The library is loaded at first use (dlopen), not linked:
// a build with CUDA then runs where NCCL is absent until a group is made, and the
// 200 MB library need not travel with the GPU test binaries. Search order: the file
// named by BRIGADE_NCCL_LIBRARY, "libnccl.so.2" on the loader's path (LD_LIBRARY_PATH),
// then the library CMake found at build time.
//
// Communicators are non-blocking (ncclConfig_t::blocking = 0) so that joining and the
// host-side completion of each call can be waited for while observing a stop request,
// and aborted (ncclCommAbort) instead of hanging on a peer that never comes.
#include <dlfcn.h>
#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "transport/detail/cuda/cuda_device.h"
#include "transport/detail/cuda/error.h"
#include "transport/detail/device_collective.h"
#include "transport/detail/device_cuda.h"

#ifndef BRIGADE_NCCL_BUILD_LIBRARY
#define BRIGADE_NCCL_BUILD_LIBRARY ""
#endif

namespace brigade::transport::detail {
namespace {

struct NcclApi {
  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRankConfig) init_rank_config = nullptr;
  decltype(&ncclCommDestroy) destroy = nullptr;
  decltype(&ncclCommAbort) abort = nullptr;
  decltype(&ncclCommGetAsyncError) async_error = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  decltype(&ncclGetLastError) last_error = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
  decltype(&ncclSend) send = nullptr;
  decltype(&ncclRecv) recv = nullptr;
  std::string failure;  // why loading failed ("" when loaded)
};

template <class F>
void bind(void* handle, const char* name, F& out, std::string& failure) {
  out = reinterpret_cast<F>(::dlsym(handle, name));
  if (out == nullptr && failure.empty()) failure = std::string("no symbol ") + name;
}

NcclApi load_nccl() {
  NcclApi api;
  std::string tried;
  void* handle = nullptr;
  for (const char* name : {static_cast<const char*>(std::getenv("BRIGADE_NCCL_LIBRARY")),
                           "libnccl.so.2", BRIGADE_NCCL_BUILD_LIBRARY}) {
    if (name == nullptr || *name == '\0') continue;
    handle = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) break;
    tried += std::string(tried.empty() ? "" : "; ") + ::dlerror();
  }
  if (handle == nullptr) {
    api.failure = "cannot load NCCL (" + tried +
                  "); set LD_LIBRARY_PATH or BRIGADE_NCCL_LIBRARY to libnccl.so.2";
    return api;
  }
  bind(handle, "ncclGetVersion", api.get_version, api.failure);
  bind(handle, "ncclGetUniqueId", api.get_unique_id, api.failure);
  bind(handle, "ncclCommInitRankConfig", api.init_rank_config, api.failure);
  bind(handle, "ncclCommDestroy", api.destroy, api.failure);
  bind(handle, "ncclCommAbort", api.abort, api.failure);
  bind(handle, "ncclCommGetAsyncError", api.async_error, api.failure);
  bind(handle, "ncclGetErrorString", api.error_string, api.failure);
  bind(handle, "ncclGetLastError", api.last_error, api.failure);
  bind(handle, "ncclBroadcast", api.broadcast, api.failure);
  bind(handle, "ncclSend", api.send, api.failure);
  bind(handle, "ncclRecv", api.recv, api.failure);
  return api;  // the handle stays open for the life of the process
}

const NcclApi& nccl(DeviceSpec device, const char* call) {
  static const NcclApi api = load_nccl();
  if (!api.failure.empty()) throw DeviceError("NCCL", "not-loaded", call, device, api.failure);
  return api;
}

const char* result_name(ncclResult_t r) {
  switch (r) {
    case ncclSuccess:
      return "ncclSuccess";
    case ncclUnhandledCudaError:
      return "ncclUnhandledCudaError";
    case ncclSystemError:
      return "ncclSystemError";
    case ncclInternalError:
      return "ncclInternalError";
    case ncclInvalidArgument:
      return "ncclInvalidArgument";
    case ncclInvalidUsage:
      return "ncclInvalidUsage";
    case ncclRemoteError:
      return "ncclRemoteError";
    case ncclInProgress:
      return "ncclInProgress";
    default:
      return "ncclResult?";
  }
}

// Converts an NCCL result once, where the call is made: the library's short text and
// its last detailed message ("Duplicate GPU detected : ...").
[[noreturn]] void throw_nccl(ncclResult_t r, const char* call, DeviceSpec device,
                             ncclComm_t comm = nullptr) {
  const auto& api = nccl(device, call);
  std::string message = api.error_string(r);
  if (const char* last = api.last_error(comm); last != nullptr && *last != '\0') {
    message += ": ";
    message += last;
  }
  throw DeviceError("NCCL", result_name(r), call, device, message,
                    r == ncclRemoteError || r == ncclSystemError);
}

class NcclCollective final : public Collective {
 public:
  NcclCollective(std::shared_ptr<CudaDevice> device, const DeviceGroupId& id, int rank,
                 const JoinOptions& options)
      : device_(std::move(device)),
        spec_(device_->spec()),
        api_(nccl(spec_, "ncclCommInitRankConfig")) {
    int version = 0;
    check(api_.get_version(&version), "ncclGetVersion");
    if (id.nccl_version != 0 && static_cast<std::uint32_t>(version) != id.nccl_version) {
      throw DeviceError("NCCL", "version-mismatch", "ncclCommInitRankConfig", spec_,
                        "the group was created with NCCL " + std::to_string(id.nccl_version) +
                            ", this process has " + std::to_string(version));
    }
    ncclUniqueId unique;
    static_assert(sizeof(unique.internal) == sizeof(id.unique_id));
    std::memcpy(unique.internal, id.unique_id.data(), sizeof(unique.internal));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    DeviceScope scope(spec_.index);  // NCCL binds the communicator to the current device
    try {
      check(api_.init_rank_config(&comm_, id.size, unique, rank, &config),
            "ncclCommInitRankConfig");
      settle("ncclCommInitRankConfig", options.stop,
             std::chrono::steady_clock::now() + options.timeout);
    } catch (...) {
      if (comm_ != nullptr) api_.abort(comm_);
      throw;
    }
  }

  ~NcclCollective() override {
    if (comm_ == nullptr) return;
    if (aborted_) {
      api_.abort(comm_);
    } else {
      api_.destroy(comm_);
    }
  }

  void broadcast(void* buffer, std::size_t nbytes, int root) override {
    std::lock_guard lock(mutex_);
    enqueue(api_.broadcast(buffer, buffer, nbytes, ncclUint8, root, comm_, device_->stream()),
            "ncclBroadcast");
  }
  void send(const void* buffer, std::size_t nbytes, int peer) override {
    std::lock_guard lock(mutex_);
    enqueue(api_.send(buffer, nbytes, ncclUint8, peer, comm_, device_->stream()), "ncclSend");
  }
  void recv(void* buffer, std::size_t nbytes, int peer) override {
    std::lock_guard lock(mutex_);
    enqueue(api_.recv(buffer, nbytes, ncclUint8, peer, comm_, device_->stream()), "ncclRecv");
  }

  void check() override {
    std::lock_guard lock(mutex_);
    if (aborted_)
      throw DeviceError("NCCL", "aborted", "ncclCommGetAsyncError", spec_, "the group was aborted");
    ncclResult_t state = ncclSuccess;
    check(api_.async_error(comm_, &state), "ncclCommGetAsyncError");
    if (state != ncclSuccess && state != ncclInProgress)
      throw_nccl(state, "ncclCommGetAsyncError", spec_, comm_);
  }

  void abort() override {
    std::lock_guard lock(mutex_);
    if (aborted_ || comm_ == nullptr) return;
    aborted_ = true;
    api_.abort(comm_);
    comm_ = nullptr;
  }

 private:
  void check(ncclResult_t r, const char* call) {
    if (r != ncclSuccess && r != ncclInProgress) throw_nccl(r, call, spec_, comm_);
  }

  void enqueue(ncclResult_t r, const char* call) {
    if (aborted_) throw DeviceError("NCCL", "aborted", call, spec_, "the group was aborted");
    check(r, call);
    // Host-side completion of the call only (the transfer itself runs on the stream).
    if (r == ncclInProgress) settle(call, {}, std::chrono::steady_clock::time_point::max());
  }

  // Waits until a non-blocking call has finished on the host, observing stop.
  void settle(const char* call, const std::stop_token& stop,
              std::chrono::steady_clock::time_point deadline) {
    for (;;) {
      ncclResult_t state = ncclInProgress;
      check(api_.async_error(comm_, &state), "ncclCommGetAsyncError");
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) throw_nccl(state, call, spec_, comm_);
      if (stop.stop_requested() || std::chrono::steady_clock::now() >= deadline) {
        const bool stopped = stop.stop_requested();
        api_.abort(comm_);
        comm_ = nullptr;
        if (stopped) throw StopRequested(std::string("stopped during ") + call);
        throw DeviceError("NCCL", "timeout", call, spec_,
                          "not every rank joined within the timeout");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  std::shared_ptr<CudaDevice> device_;
  DeviceSpec spec_;
  const NcclApi& api_;
  std::mutex mutex_;
  ncclComm_t comm_ = nullptr;
  bool aborted_ = false;
};

}  // namespace

bool nccl_compiled() { return true; }

std::uint32_t nccl_version() {
  const DeviceSpec any{DeviceKind::cuda, 0};
  int version = 0;
  const auto r = nccl(any, "ncclGetVersion").get_version(&version);
  if (r != ncclSuccess) throw_nccl(r, "ncclGetVersion", any);
  return static_cast<std::uint32_t>(version);
}

void nccl_unique_id(std::uint8_t* out) {
  const DeviceSpec any{DeviceKind::cuda, 0};
  ncclUniqueId unique;
  const auto r = nccl(any, "ncclGetUniqueId").get_unique_id(&unique);
  if (r != ncclSuccess) throw_nccl(r, "ncclGetUniqueId", any);
  std::memcpy(out, unique.internal, sizeof(unique.internal));
}

std::unique_ptr<Collective> make_nccl_collective(std::shared_ptr<Device> device,
                                                 const DeviceGroupId& id, int rank,
                                                 const JoinOptions& options) {
  auto cuda = std::dynamic_pointer_cast<CudaDevice>(device);
  if (!cuda) throw std::invalid_argument("an NCCL group needs a CUDA device");
  return std::make_unique<NcclCollective>(std::move(cuda), id, rank, options);
}

}  // namespace brigade::transport::detail
