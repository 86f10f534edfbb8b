#pragma once
// Devices that batches are copied to: a CUDA GPU, or the CPU device that stands in
// for one where there is no GPU (tests, `brigade run --device cpu`).
//
// A Device is one device plus one ordered work queue on it, its "stream": copies, the
// normalize kernel, collective operations and event records run in submission order,
// asynchronously to the thread that submits them. Submitting never waits for earlier
// work. On CUDA the queue is a dedicated non-blocking stream (cudaStreamNonBlocking:
// it never waits for the legacy default stream); on the CPU device it is a worker
// thread, "device memory" is host memory, and events are futures.
//
// EVENTS. `record()` returns an Event that completes when everything submitted before
// it has run. ready() polls, never blocks and never throws (it runs in destructors: a
// pool's fence list, a dropped batch); an error (a sticky CUDA error: a faulting
// kernel, CUDA unloading at exit) counts as complete and is kept for wait(). wait()
// blocks the calling thread and throws DeviceError if work before the event failed (a
// failed CUDA launch, a failed collective, a bad normalize job on the CPU device). Only a batch's
// consumer waits, and only on its batch's event: nothing in the copy path blocks the host per item.
//
// EXTERNAL STREAMS. A consumer that launches its own GPU work passes its stream as an
// ExternalStream (a cudaStream_t, as void*; nullptr is the legacy default stream).
// The CPU device ignores it: its consumer's work is ordinary synchronous host code.
//
// ERRORS. Every CUDA and NCCL call is checked where it is made; a failure throws
// DeviceError with the library's name for the code, its message, the call and the
// device. CUDA and NCCL types never appear in Brigade's public headers.
//
// THREAD SAFETY. A Device may be used from several threads; submissions from
// different threads interleave in an unspecified order (the copy stage submits from
// one). Events are thread-safe. A Device is shared (std::shared_ptr): memory it
// allocated keeps it alive, so buffers may outlive the pools that handed them out.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

#include "media/normalize.h"
#include "media/tensor.h"

namespace brigade::transport {

enum class DeviceKind : std::uint8_t { cpu, cuda };

/// Which device: the CPU device, or CUDA device `index` (as cudaSetDevice counts them).
struct DeviceSpec {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;
  friend bool operator==(const DeviceSpec&, const DeviceSpec&) = default;
};

/// "cpu", "cuda" (device 0) or "cuda:N". Throws std::invalid_argument naming the text.
DeviceSpec parse_device(std::string_view text);
/// "cpu" or "cuda:N".
std::string to_string(const DeviceSpec& spec);

/// Whether this build has the CUDA device (CMake found the CUDA toolkit and the
/// option BRIGADE_CUDA was on), and whether it has NCCL (nccl.h was found; the library
/// itself, libnccl.so.2, is loaded at the first use of a DeviceGroup on CUDA).
bool built_with_cuda();
bool built_with_nccl();

/// How many GPUs this process can use, and if none, why. Never throws.
struct CudaAvailability {
  int devices = 0;
  std::string reason{};  // "" when devices > 0
};
/// Without a build with CUDA: 0 and "this build has no CUDA". Without a driver:
/// 0 and cudaGetDeviceCount's error ("cudaErrorInsufficientDriver: ...").
CudaAvailability cuda_availability();

/// Codes of DeviceError, in device_category() ("brigade.device"). Each maps to a
/// generic std::errc condition, so that the engine's retry (actors::is_transient)
/// sees a transient DeviceError as it sees any other transient error:
///   failed      -> io_error            a CUDA or library error (CUDA keeps it for
///                                      the rest of the process), a timed-out or
///                                      aborted collective: not transient
///   unsupported -> not_supported       no CUDA or NCCL in this build or on this
///                                      machine, a library of another version
///   peer_lost   -> connection_aborted  a peer of a collective went away, a network
///                                      error (NCCL's remote and system errors):
///                                      transient
/// The values are stable: they cross processes.
enum class DeviceErrc {
  failed = 1,
  unsupported = 2,
  peer_lost = 3,
};

const std::error_category& device_category() noexcept;
std::error_code make_error_code(DeviceErrc code) noexcept;
/// The code's name: "failed", "unsupported", "peer_lost".
std::string_view device_code_name(DeviceErrc code);

/// A failed CUDA or NCCL call, or an unusable device. A std::system_error whose
/// std::error_code (error_code(), or code() through a std::system_error reference) is
/// in device_category().
///   what(): "CUDA error cudaErrorMemoryAllocation (out of memory) in cudaMalloc on cuda:0"
class DeviceError : public std::system_error {
 public:
  DeviceError(std::string library, std::string code, std::string call, DeviceSpec device,
              std::string message, DeviceErrc kind = DeviceErrc::failed);
  /// The same with `transient` for DeviceErrc::peer_lost, else failed (the former
  /// form).
  DeviceError(std::string library, std::string code, std::string call, DeviceSpec device,
              std::string message, bool transient)
      : DeviceError(std::move(library), std::move(code), std::move(call), device,
                    std::move(message), transient ? DeviceErrc::peer_lost : DeviceErrc::failed) {}
  const char* what() const noexcept override { return text_.c_str(); }
  const std::string& library() const { return library_; }  // "CUDA", "NCCL", "device"
  // The library's name for the code ("cudaErrorInvalidValue", ...). (It hides
  // std::system_error::code(); `error_code()` gives the std::error_code.)
  const std::string& code() const { return code_; }
  std::error_code error_code() const noexcept { return std::system_error::code(); }
  const std::string& call() const { return call_; }  // "cudaMemcpyAsync", ...
  DeviceSpec device() const { return device_; }
  const std::string& message() const { return message_; }  // the library's own text
  /// Whether retrying can help (DeviceErrc::peer_lost): a peer that went away or a
  /// network error in a collective (NCCL's remote and system errors). A CUDA error is
  /// never transient: CUDA keeps it for the rest of the process. The same answer as
  /// actors::is_transient(error_code()).
  bool transient() const;

 private:
  std::string text_;
  std::string library_;
  std::string code_;
  std::string call_;
  DeviceSpec device_;
  std::string message_;
};

/// Thrown by a wait that saw a stop request (a pool or the copy stage waiting for a
/// buffer, a collective waiting for its peers).
class StopRequested : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A point in a device's queue. See EVENTS above.
class Event {
 public:
  virtual ~Event() = default;
  virtual bool ready() const noexcept = 0;  // true also when the event failed
  virtual void wait() const = 0;
};

using media::Layout;  // media/tensor.h

/// A cudaStream_t, or nullptr for the legacy default stream. See EXTERNAL STREAMS.
using ExternalStream = void*;

using media::NormalizeJob;  // media/normalize.h

/// One device and its queue. Obtain with open_device(); see the header comment.
class Device {
 public:
  virtual ~Device() = default;
  Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  virtual DeviceSpec spec() const = 0;

  /// Host memory the device copies from at full speed (page-locked on CUDA), and
  /// device memory (cudaMalloc; never managed memory). The returned pointer frees the
  /// memory when dropped; the caller guarantees no queued work still uses it. Throws
  /// DeviceError (or std::bad_alloc on the CPU device) when out of memory.
  virtual std::shared_ptr<void> allocate_host(std::size_t nbytes) = 0;
  virtual std::shared_ptr<void> allocate_device(std::size_t nbytes) = 0;

  /// Whether `host` lies in page-locked memory that the device copies from at full
  /// speed, asynchronously (CUDA: cudaPointerGetAttributes says pinned host memory; the
  /// CPU device: memory from its allocate_host). From pageable memory CUDA stages the
  /// copy through a driver buffer: slower, and not overlapped with the host.
  virtual bool page_locked(const void* host) const = 0;

  /// Queued copies. `src` must stay valid and unchanged, and `dst` unused, until an
  /// event recorded after the copy is ready.
  virtual void copy_to_device(void* dst, const void* src, std::size_t nbytes) = 0;
  virtual void copy_to_host(void* dst, const void* src, std::size_t nbytes) = 0;
  /// Queued uint8 -> float normalize (transport/device/device_normalize.h).
  virtual void normalize(const NormalizeJob& job) = 0;

  /// An event that completes when all work submitted so far has run.
  virtual std::shared_ptr<Event> record() = 0;
  /// Work submitted after this call starts only once `event` is complete (a device-
  /// side wait: the calling thread does not block). `event` must come from a device
  /// of the same kind.
  virtual void wait_for(const std::shared_ptr<Event>& event) = 0;

  /// An event on the consumer's stream, recorded now (the CPU device: a ready event).
  virtual std::shared_ptr<Event> record_on(ExternalStream stream) = 0;
  /// The consumer's stream waits, device-side, for `event` (the CPU device: nothing,
  /// as its consumer waits with Event::wait()).
  virtual void wait_on(ExternalStream stream, const std::shared_ptr<Event>& event) = 0;

  /// Blocks until all submitted work has run (teardown and tests; not on hot paths).
  virtual void synchronize() = 0;

  /// Another queue on the same device, for work that overlaps this queue's (the copy
  /// stage's host-to-device copies while its normalize kernel runs): CUDA, a new
  /// non-blocking stream on the same GPU; the CPU device, a second worker sharing its
  /// faults and its pinned ranges. The two are ordered only by events (record on one,
  /// wait_for on the other). Device memory is stream-ordered (cudaMallocFromPoolAsync
  /// on the allocating queue): another queue's first use of it must wait for an event
  /// recorded on the allocating queue after the allocation
  /// (BufferPool::Options::fence_allocations).
  virtual std::shared_ptr<Device> open_queue() = 0;
};

/// Opens the device with a queue of its own (each call: a new CUDA stream, or a new
/// worker thread). Throws DeviceError for CUDA in a build without CUDA ("this build
/// has no CUDA"), without a usable GPU, or with an index out of range.
std::shared_ptr<Device> open_device(const DeviceSpec& spec);

}  // namespace brigade::transport

template <>
struct std::is_error_code_enum<brigade::transport::DeviceErrc> : std::true_type {};
