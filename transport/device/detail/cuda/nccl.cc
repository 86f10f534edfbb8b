// NCCL behind DeviceGroup. The library is loaded at first use (dlopen), not linked:
// a build with CUDA then runs where NCCL is absent until a group is made, and the
// 200 MB library need not travel with the GPU test binaries. Search order: the file
// named by BRIGADE_NCCL_LIBRARY, "libnccl.so.2" on the loader's path (LD_LIBRARY_PATH),
// then the library CMake found at build time.
//
// Communicators are non-blocking (ncclConfig_t::blocking = 0) so that joining and the
// host-side completion of each call can be waited for while observing a stop request
// and a deadline, and aborted (ncclCommAbort) instead of hanging on a peer that never
// comes. No lock is held across such a wait: abort() from another thread takes the
// communicator between two polls (or, if a call is stuck inside NCCL, aborts without
// the lock, which is how NCCL unblocks a hung call). Teardown finalizes and polls
// (ncclCommFinalize) before destroying, and aborts what does not finish in time.
#include <dlfcn.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "transport/device/detail/cuda/cuda_device.h"
#include "transport/device/detail/cuda/error.h"
#include "transport/device/detail/device_collective.h"
#include "transport/device/detail/device_cuda.h"

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
  decltype(&ncclCommFinalize) finalize = nullptr;  // NCCL ≥ 2.14; optional
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
  api.finalize = reinterpret_cast<decltype(api.finalize)>(::dlsym(handle, "ncclCommFinalize"));
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
        api_(nccl(spec_, "ncclCommInitRankConfig")),
        timeout_(options.timeout),
        teardown_timeout_(options.teardown_timeout) {
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
      {
        std::lock_guard lock(call_mutex_);
        check(api_.init_rank_config(&comm_, id.size, unique, rank, &config),
              "ncclCommInitRankConfig");
      }
      settle("ncclCommInitRankConfig", options.stop,
             std::chrono::steady_clock::now() + options.timeout);
    } catch (...) {
      abort();
      throw;
    }
  }

  // Not aborted: finalize (flushes queued operations), poll until done or the teardown
  // timeout, then destroy; a communicator that does not finish in time, or failed, is
  // aborted instead (a dead peer would hold ncclCommDestroy for ever).
  ~NcclCollective() override {
    if (aborted_.load() || comm_ == nullptr) return;  // abort() released it
    try {
      DeviceScope scope(spec_.index);
    } catch (...) {  // a broken device: NCCL still gets its calls
    }
    const auto deadline = std::chrono::steady_clock::now() + teardown_timeout_;
    bool clean = true;
    if (api_.finalize != nullptr) {
      const ncclResult_t r = api_.finalize(comm_);
      clean = r == ncclSuccess || r == ncclInProgress;
      while (clean) {
        ncclResult_t state = ncclInProgress;
        if (api_.async_error(comm_, &state) != ncclSuccess ||
            (state != ncclSuccess && state != ncclInProgress)) {
          clean = false;
        } else if (state == ncclSuccess) {
          break;
        } else if (std::chrono::steady_clock::now() >= deadline) {
          clean = false;
        } else {
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
      }
    }
    if (clean) {
      api_.destroy(comm_);
    } else {
      api_.abort(comm_);
    }
  }

  void broadcast(void* buffer, std::size_t nbytes, int root, const std::stop_token& stop) override {
    enqueue(
        [&](ncclComm_t comm) {
          return api_.broadcast(buffer, buffer, nbytes, ncclUint8, root, comm, device_->stream());
        },
        "ncclBroadcast", stop);
  }
  void send(const void* buffer, std::size_t nbytes, int peer,
            const std::stop_token& stop) override {
    enqueue(
        [&](ncclComm_t comm) {
          return api_.send(buffer, nbytes, ncclUint8, peer, comm, device_->stream());
        },
        "ncclSend", stop);
  }
  void recv(void* buffer, std::size_t nbytes, int peer, const std::stop_token& stop) override {
    enqueue(
        [&](ncclComm_t comm) {
          return api_.recv(buffer, nbytes, ncclUint8, peer, comm, device_->stream());
        },
        "ncclRecv", stop);
  }

  void check() override {
    ncclResult_t state = ncclSuccess;
    std::lock_guard lock(call_mutex_);
    throw_if_aborted("ncclCommGetAsyncError");
    check(api_.async_error(comm_, &state), "ncclCommGetAsyncError");
    if (state != ncclSuccess && state != ncclInProgress)
      throw_nccl(state, "ncclCommGetAsyncError", spec_, comm_);
  }

  // Takes the communicator between two calls of another thread (each non-blocking, so
  // short); if one is stuck inside NCCL past kAbortWait, aborts without the lock: that
  // thread finds aborted_ set when the call returns and never touches the handle again.
  void abort() override {
    if (aborted_.exchange(true)) return;
    constexpr auto kAbortWait = std::chrono::milliseconds(100);
    std::unique_lock lock(call_mutex_, kAbortWait);
    if (comm_ != nullptr) api_.abort(comm_);
    if (lock.owns_lock()) comm_ = nullptr;
  }

 private:
  void check(ncclResult_t r, const char* call) {
    if (r != ncclSuccess && r != ncclInProgress) throw_nccl(r, call, spec_, comm_);
  }

  void throw_if_aborted(const char* call) const {
    if (aborted_.load()) throw DeviceError("NCCL", "aborted", call, spec_, "the group was aborted");
  }

  // One call (under the lock, in the device's scope), then its host-side completion
  // (the transfer itself runs on the stream), observing stop and the timeout.
  template <class Call>
  void enqueue(Call call, const char* name, const std::stop_token& stop) {
    ncclResult_t r = ncclSuccess;
    {
      DeviceScope scope(spec_.index);
      std::lock_guard lock(call_mutex_);
      throw_if_aborted(name);
      r = call(comm_);
      check(r, name);
    }
    if (r == ncclInProgress) settle(name, stop, std::chrono::steady_clock::now() + timeout_);
  }

  // Waits until a non-blocking call has finished on the host, observing stop and the
  // deadline (both abort). The lock is held for each poll only.
  void settle(const char* call, const std::stop_token& stop,
              std::chrono::steady_clock::time_point deadline) {
    for (;;) {
      ncclResult_t state = ncclInProgress;
      {
        std::lock_guard lock(call_mutex_);
        throw_if_aborted(call);
        check(api_.async_error(comm_, &state), "ncclCommGetAsyncError");
        if (state != ncclSuccess && state != ncclInProgress) throw_nccl(state, call, spec_, comm_);
      }
      if (state == ncclSuccess) return;
      if (stop.stop_requested() || std::chrono::steady_clock::now() >= deadline) {
        const bool stopped = stop.stop_requested();
        abort();
        if (stopped) throw StopRequested(std::string("stopped during ") + call);
        const bool joining = std::string_view(call) == "ncclCommInitRankConfig";
        throw DeviceError("NCCL", "timeout", call, spec_,
                          joining ? "not every rank joined within the timeout"
                                  : "NCCL did not take the call within the timeout");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  std::shared_ptr<CudaDevice> device_;
  DeviceSpec spec_;
  const NcclApi& api_;
  std::chrono::milliseconds timeout_;
  std::chrono::milliseconds teardown_timeout_;
  std::timed_mutex call_mutex_;  // one NCCL call on comm_ at a time; never held while waiting
  ncclComm_t comm_ = nullptr;    // null once aborted under the lock
  std::atomic<bool> aborted_{false};
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
