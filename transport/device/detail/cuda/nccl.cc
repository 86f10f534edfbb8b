// NCCL behind DeviceGroup. The library is loaded at first use (dlopen), not linked:
// a build with CUDA then runs where NCCL is absent until a group is made, and the
// 200 MB library need not travel with the GPU test binaries. Search order: the file
// named by BRIGADE_NCCL_LIBRARY, "libnccl.so.2" on the loader's path (LD_LIBRARY_PATH),
// then the library CMake found at build time.
//
// Communicators are non-blocking (ncclConfig_t::blocking = 0) so that joining and the
// host-side completion of each call can be waited for while observing a stop request
// and a deadline, and aborted (ncclCommAbort) instead of hanging on a peer that never
// comes. Those rules (no lock across a wait, abort lock-free, finalize and poll before
// destroy) are CollectiveControl's (detail/collective_control.h), tested without NCCL;
// NcclDriver is its one NCCL call per method.
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

#include "transport/device/detail/collective_control.h"
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
  if (!api.failure.empty())
    throw DeviceError("NCCL", "not-loaded", call, device, api.failure, DeviceErrc::unsupported);
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
  throw DeviceError(
      "NCCL", result_name(r), call, device, message,
      r == ncclRemoteError || r == ncclSystemError ? DeviceErrc::peer_lost : DeviceErrc::failed);
}

// One NCCL call per method on one communicator (CollectiveControl's rules drive it).
class NcclDriver final : public CommDriver {
 public:
  NcclDriver(const NcclApi& api, DeviceSpec spec) : api_(api), spec_(spec) {}

  // A call's result: in progress, done, or thrown.
  CommStatus result(ncclResult_t r, const char* call) const {
    if (r == ncclInProgress) return CommStatus::in_progress;
    if (r != ncclSuccess) throw_nccl(r, call, spec_, comm_);
    return CommStatus::done;
  }
  CommStatus status() override {
    ncclResult_t state = ncclInProgress;
    result(api_.async_error(comm_, &state), "ncclCommGetAsyncError");
    return result(state, "ncclCommGetAsyncError");
  }
  bool finalize() override {
    if (api_.finalize == nullptr) return false;
    result(api_.finalize(comm_), "ncclCommFinalize");
    return true;
  }
  void destroy() noexcept override { api_.destroy(comm_); }
  void abort() noexcept override {
    if (comm_ != nullptr) api_.abort(comm_);
  }
  ncclComm_t* handle() { return &comm_; }
  ncclComm_t comm() const { return comm_; }

 private:
  const NcclApi& api_;
  DeviceSpec spec_;
  ncclComm_t comm_ = nullptr;  // set by ncclCommInitRankConfig, under the control's lock
};

class NcclCollective final : public Collective {
 public:
  NcclCollective(std::shared_ptr<CudaDevice> device, const DeviceGroupId& id, int rank,
                 const JoinOptions& options)
      : device_(std::move(device)),
        spec_(device_->spec()),
        api_(nccl(spec_, "ncclCommInitRankConfig")),
        driver_(api_, spec_),
        control_(driver_, {.device = spec_,
                           .timeout = options.timeout,
                           .teardown_timeout = options.teardown_timeout}) {
    int version = 0;
    driver_.result(api_.get_version(&version), "ncclGetVersion");
    if (id.nccl_version != 0 && static_cast<std::uint32_t>(version) != id.nccl_version) {
      throw DeviceError("NCCL", "version-mismatch", "ncclCommInitRankConfig", spec_,
                        "the group was created with NCCL " + std::to_string(id.nccl_version) +
                            ", this process has " + std::to_string(version),
                        DeviceErrc::unsupported);
    }
    ncclUniqueId unique;
    static_assert(sizeof(unique.internal) == sizeof(id.unique_id));
    std::memcpy(unique.internal, id.unique_id.data(), sizeof(unique.internal));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    DeviceScope scope(spec_.index);  // NCCL binds the communicator to the current device
    try {
      control_.run(
          "ncclCommInitRankConfig",
          [&] {
            return driver_.result(
                api_.init_rank_config(driver_.handle(), id.size, unique, rank, &config),
                "ncclCommInitRankConfig");
          },
          options.stop, "not every rank joined within the timeout");
    } catch (...) {
      control_.abort();
      throw;
    }
  }

  // CollectiveControl::close: finalize and poll, then destroy; abort on error or timeout.
  ~NcclCollective() override {
    try {
      DeviceScope scope(spec_.index);
    } catch (...) {  // a broken device: NCCL still gets its calls
    }
    control_.close();
  }

  void broadcast(void* buffer, std::size_t nbytes, int root, const std::stop_token& stop) override {
    enqueue(
        [&] {
          return api_.broadcast(buffer, buffer, nbytes, ncclUint8, root, driver_.comm(),
                                device_->stream());
        },
        "ncclBroadcast", stop);
  }
  void send(const void* buffer, std::size_t nbytes, int peer,
            const std::stop_token& stop) override {
    enqueue(
        [&] {
          return api_.send(buffer, nbytes, ncclUint8, peer, driver_.comm(), device_->stream());
        },
        "ncclSend", stop);
  }
  void recv(void* buffer, std::size_t nbytes, int peer, const std::stop_token& stop) override {
    enqueue(
        [&] {
          return api_.recv(buffer, nbytes, ncclUint8, peer, driver_.comm(), device_->stream());
        },
        "ncclRecv", stop);
  }

  void check() override { control_.check(); }
  void abort() override { control_.abort(); }

 private:
  // One call in the device's scope, then its host-side completion (the transfer itself
  // runs on the stream), observing stop and the timeout (CollectiveControl).
  template <class Call>
  void enqueue(Call call, const char* name, const std::stop_token& stop) {
    DeviceScope scope(spec_.index);
    control_.run(
        name, [&] { return driver_.result(call(), name); }, stop);
  }

  std::shared_ptr<CudaDevice> device_;
  DeviceSpec spec_;
  const NcclApi& api_;
  NcclDriver driver_;
  CollectiveControl control_;
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
