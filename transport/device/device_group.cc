#include "transport/device/device_group.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <fcntl.h>
#include <kj/exception.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>
#include <utility>

#include "transport/device/detail/device_collective.h"
#include "transport/device/detail/device_cuda.h"
#include "transport/device/device.capnp.h"
#include "transport/files/files.h"

namespace brigade::transport {
namespace detail {

struct GroupState {
  std::shared_ptr<Device> device;
  int rank = 0;
  int size = 0;
  std::chrono::milliseconds teardown_timeout{0};
  BufferPool header_host;
  BufferPool header_device;
  // Declared after the pools, so destroyed before them: the pools' teardown waits for
  // the fences of their buffers, which transfers stuck behind a dead peer never complete
  // unless the communicator is aborted first (~GroupState).
  std::unique_ptr<Collective> comm;
  std::shared_ptr<Event> last;  // of the last transfer queued
  std::mutex mutex;

  // Outgoing headers are fenced by their transfers, so the host pool's bound is how
  // far a sender may run ahead of its peers; device slots are reused in queue order.
  GroupState(std::shared_ptr<Device> d, std::size_t max_in_flight)
      : device(d),
        header_host(d, BufferPool::Memory::pinned_host, {.max_buffers = max_in_flight}),
        header_device(d, BufferPool::Memory::device, {.max_buffers = max_in_flight}) {}

  // Transfers still queued get teardown_timeout to complete (a live peer's last batch),
  // then the communicator is aborted: a dead peer's never would.
  ~GroupState() {
    if (!comm || !last) return;
    const auto deadline = std::chrono::steady_clock::now() + teardown_timeout;
    auto delay = std::chrono::microseconds(20);
    while (!last->ready()) {
      bool failed = false;
      try {
        comm->check();
      } catch (...) {
        failed = true;
      }
      if (failed || std::chrono::steady_clock::now() >= deadline) {
        comm->abort();
        return;
      }
      std::this_thread::sleep_for(delay);
      delay = std::min(delay * 2, std::chrono::microseconds(1000));
    }
  }

  // A stop while a call waits (for room to send, for a header, for a buffer) leaves
  // transfers queued that a gone peer will never match: abort, as a stop in receive's
  // header wait always did, so that the device queue and teardown do not hang.
  template <class F>
  auto stoppable(F call) -> decltype(call()) {
    try {
      return call();
    } catch (const StopRequested&) {
      comm->abort();
      throw;
    }
  }
};

}  // namespace detail

namespace {

namespace fs = std::filesystem;
namespace wire = schema::device;

constexpr std::uint64_t kMagic = 0x4449474447495242ULL;  // "BRIGDGID"
constexpr std::size_t kHeaderBytes = 512;
constexpr std::size_t kMaxDims = 16;

[[noreturn]] void bad_id(std::string_view source, const std::string& why) {
  throw std::invalid_argument("device group id from " + std::string(source) + ": " + why);
}

kj::Array<capnp::word> aligned_copy(const void* data, std::size_t size) {
  auto words = kj::heapArray<capnp::word>(size / sizeof(capnp::word));
  std::memcpy(words.begin(), data, words.size() * sizeof(capnp::word));
  return words;
}

// Header of a batch -> the fixed slot, and back.
void write_header(const DeviceBatch& batch, void* slot) {
  capnp::MallocMessageBuilder message;
  auto h = message.initRoot<wire::DeviceBatchHeader>();
  h.setDtype(static_cast<wire::DType>(batch.dtype()));
  h.setLayout(batch.layout() == Layout::nhwc ? wire::Layout::NHWC : wire::Layout::NCHW);
  const auto& shape = batch.shape();
  if (shape.size() > kMaxDims) {
    throw std::invalid_argument("device group: a batch has " + std::to_string(shape.size()) +
                                " dimensions (at most " + std::to_string(kMaxDims) + ")");
  }
  auto dims = h.initShape(static_cast<unsigned>(shape.size()));
  for (unsigned i = 0; i < shape.size(); ++i) dims.set(i, shape[i]);
  h.setNbytes(batch.nbytes());
  auto words = capnp::messageToFlatArray(message);
  const auto bytes = words.asBytes();
  std::memset(slot, 0, kHeaderBytes);
  const std::uint64_t size = bytes.size();
  std::memcpy(slot, &size, sizeof size);
  std::memcpy(static_cast<char*>(slot) + 8, bytes.begin(), bytes.size());
}

struct Header {
  media::DType dtype;
  Layout layout;
  std::vector<std::int64_t> shape;
  std::size_t nbytes;
};

Header read_header(const void* slot, int from) {
  const std::string who = "the batch header from rank " + std::to_string(from);
  std::uint64_t size = 0;
  std::memcpy(&size, slot, sizeof size);
  if (size == 0 || size > kHeaderBytes - 8 || size % sizeof(capnp::word) != 0) {
    throw std::runtime_error(who + " is malformed (message size " + std::to_string(size) + ")");
  }
  try {
    auto words = aligned_copy(static_cast<const char*>(slot) + 8, size);
    capnp::FlatArrayMessageReader reader(words);
    auto h = reader.getRoot<wire::DeviceBatchHeader>();
    Header out;
    const auto dtype = static_cast<unsigned>(h.getDtype());
    if (dtype > static_cast<unsigned>(wire::DType::FLOAT64)) {
      throw std::runtime_error(who + " has an unknown dtype " + std::to_string(dtype));
    }
    out.dtype = static_cast<media::DType>(dtype);
    out.layout = h.getLayout() == wire::Layout::NCHW ? Layout::nchw : Layout::nhwc;
    std::size_t expected = media::dtype_size(out.dtype);
    if (h.getShape().size() > kMaxDims) throw std::runtime_error(who + " has too many dimensions");
    for (auto d : h.getShape()) {
      if (d < 0) throw std::runtime_error(who + " has a negative dimension");
      out.shape.push_back(d);
      expected *= static_cast<std::size_t>(d);
    }
    out.nbytes = h.getNbytes();
    if (out.nbytes != expected) {
      throw std::runtime_error(who + " says " + std::to_string(out.nbytes) +
                               " bytes for a shape of " + std::to_string(expected));
    }
    return out;
  } catch (const kj::Exception& e) {
    throw std::runtime_error(who + " is malformed: " + e.getDescription().cStr());
  }
}

}  // namespace

DeviceGroupId new_device_group_id(DeviceKind kind, int size) {
  if (size < 1) throw std::invalid_argument("a device group needs at least one rank");
  DeviceGroupId id;
  id.kind = kind;
  id.size = size;
  if (kind == DeviceKind::cuda) {
    id.nccl_version = detail::nccl_version();
    detail::nccl_unique_id(id.unique_id.data());
  } else {
    std::random_device random;
    for (auto& b : id.unique_id) b = static_cast<std::uint8_t>(random());
  }
  return id;
}

std::vector<std::byte> encode_device_group_id(const DeviceGroupId& id) {
  capnp::MallocMessageBuilder message;
  auto m = message.initRoot<wire::DeviceGroupId>();
  m.setMagic(kMagic);
  m.setKind(id.kind == DeviceKind::cuda ? wire::DeviceKind::CUDA : wire::DeviceKind::CPU);
  m.setSize(static_cast<std::uint32_t>(id.size));
  m.setNcclVersion(id.nccl_version);
  m.setUniqueId(kj::arrayPtr(id.unique_id.data(), id.unique_id.size()));
  auto words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  std::vector<std::byte> out(bytes.size());
  std::memcpy(out.data(), bytes.begin(), bytes.size());
  return out;
}

DeviceGroupId decode_device_group_id(std::span<const std::byte> bytes, std::string_view source) {
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0) {
    bad_id(source, "not a Cap'n Proto message (" + std::to_string(bytes.size()) + " bytes)");
  }
  try {
    auto words = aligned_copy(bytes.data(), bytes.size());
    capnp::FlatArrayMessageReader reader(words);
    auto m = reader.getRoot<wire::DeviceGroupId>();
    if (m.getMagic() != kMagic) bad_id(source, "not a device group id (wrong magic number)");
    DeviceGroupId id;
    const auto kind = m.getKind();
    if (kind != wire::DeviceKind::CPU && kind != wire::DeviceKind::CUDA) {
      bad_id(source, "unknown device kind " + std::to_string(static_cast<unsigned>(kind)));
    }
    id.kind = kind == wire::DeviceKind::CUDA ? DeviceKind::cuda : DeviceKind::cpu;
    if (m.getSize() < 1 || m.getSize() > (1u << 20)) {
      bad_id(source, "group size " + std::to_string(m.getSize()));
    }
    id.size = static_cast<int>(m.getSize());
    id.nccl_version = m.getNcclVersion();
    auto unique = m.getUniqueId();
    if (unique.size() != id.unique_id.size()) {
      bad_id(source, "unique id of " + std::to_string(unique.size()) + " bytes (expected 128)");
    }
    std::memcpy(id.unique_id.data(), unique.begin(), unique.size());
    return id;
  } catch (const kj::Exception& e) {
    bad_id(source, std::string("malformed message: ") + e.getDescription().cStr());
  }
}

void write_device_group_id(const fs::path& file, const DeviceGroupId& id) {
  const auto bytes = encode_device_group_id(id);
  try {
    publish_file(file, bytes, {.mode = 0600});
  } catch (const FileError& e) {
    throw std::runtime_error("device group id file " + e.path().string() + ": " + e.operation() +
                             ": " + e.code().message());
  }
}

DeviceGroupId read_device_group_id(const fs::path& file, std::chrono::milliseconds timeout,
                                   std::stop_token stop) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::ifstream in(file, std::ios::binary);
    if (in) {
      std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      return decode_device_group_id(std::as_bytes(std::span(raw)), file.string());
    }
    if (stop.stop_requested()) {
      throw StopRequested("stopped while waiting for the device group id file " + file.string());
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      throw std::runtime_error("device group id file " + file.string() + " did not appear within " +
                               std::to_string(timeout.count()) + " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

DeviceGroup::DeviceGroup(std::shared_ptr<Device> device, const DeviceGroupId& id, int rank,
                         JoinOptions options) {
  if (!device) throw std::invalid_argument("DeviceGroup: no device");
  if (device->spec().kind != id.kind) {
    throw std::invalid_argument("DeviceGroup: a " +
                                std::string(id.kind == DeviceKind::cuda ? "CUDA" : "CPU") +
                                " group id for device " + to_string(device->spec()));
  }
  if (id.size < 1 || rank < 0 || rank >= id.size) {
    throw std::invalid_argument("DeviceGroup: rank " + std::to_string(rank) + " of a group of " +
                                std::to_string(id.size));
  }
  if (options.max_in_flight == 0) throw std::invalid_argument("DeviceGroup: max_in_flight is 0");
  state_ = std::make_unique<detail::GroupState>(device, options.max_in_flight);
  state_->rank = rank;
  state_->size = id.size;
  state_->teardown_timeout = options.teardown_timeout;
  state_->comm = id.kind == DeviceKind::cuda
                     ? detail::make_nccl_collective(device, id, rank, options)
                     : detail::make_cpu_collective(device, id, rank, options);
}

DeviceGroup::~DeviceGroup() = default;

int DeviceGroup::rank() const { return state_->rank; }
int DeviceGroup::size() const { return state_->size; }
const std::shared_ptr<Device>& DeviceGroup::device() const { return state_->device; }
void DeviceGroup::abort() { state_->comm->abort(); }

namespace {

void check_peer(int peer, int rank, int size, const char* what) {
  if (peer < 0 || peer >= size) {
    throw std::invalid_argument(std::string("DeviceGroup: ") + what + " rank " +
                                std::to_string(peer) + " in a group of " + std::to_string(size));
  }
  if (peer == rank && std::string_view(what) != "root") {
    throw std::invalid_argument(std::string("DeviceGroup: ") + what + " to itself (rank " +
                                std::to_string(rank) + ")");
  }
}

void check_pool(const BufferPool& pool, const Device& device) {
  if (pool.memory() != BufferPool::Memory::device || pool.device().get() != &device) {
    throw std::invalid_argument(
        "DeviceGroup: the pool must be a device pool of the group's device");
  }
}

// Sending side: queues the header and the payload after the batch's copy; no wait.
std::shared_ptr<Event> queue_outgoing(detail::GroupState& s, const DeviceBatch& batch,
                                      int root_or_peer, bool broadcast,
                                      const std::stop_token& stop) {
  auto& device = *s.device;
  auto host = s.header_host.take(kHeaderBytes, stop);
  write_header(batch, host.memory.get());
  auto slot = s.header_device.take(kHeaderBytes, stop);
  for (auto& f : slot.fences) device.wait_for(f);
  device.copy_to_device(slot.memory.get(), host.memory.get(), kHeaderBytes);
  device.wait_for(batch.event());
  if (broadcast) {
    s.comm->broadcast(slot.memory.get(), kHeaderBytes, root_or_peer, stop);
    if (batch.nbytes() > 0) s.comm->broadcast(batch.data(), batch.nbytes(), root_or_peer, stop);
  } else {
    s.comm->send(slot.memory.get(), kHeaderBytes, root_or_peer, stop);
    if (batch.nbytes() > 0) s.comm->send(batch.data(), batch.nbytes(), root_or_peer, stop);
  }
  auto done = device.record();
  BufferPool::fence(host.memory, done);
  BufferPool::fence(slot.memory, done);
  s.last = done;
  return done;
}

// Receiving side: the header first (a host wait, observing stop), then the payload.
DeviceBatch receive(detail::GroupState& s, int from, bool broadcast, BufferPool& pool,
                    const std::stop_token& stop) {
  auto& device = *s.device;
  auto slot = s.header_device.take(kHeaderBytes, stop);
  for (auto& f : slot.fences) device.wait_for(f);
  if (broadcast) {
    s.comm->broadcast(slot.memory.get(), kHeaderBytes, from, stop);
  } else {
    s.comm->recv(slot.memory.get(), kHeaderBytes, from, stop);
  }
  auto host = s.header_host.take(kHeaderBytes, stop);
  device.copy_to_host(host.memory.get(), slot.memory.get(), kHeaderBytes);
  auto arrived = device.record();
  BufferPool::fence(slot.memory, arrived);
  BufferPool::fence(host.memory, arrived);
  s.last = arrived;
  auto delay = std::chrono::microseconds(20);
  while (!arrived->ready()) {
    if (stop.stop_requested()) {
      s.comm->abort();
      throw StopRequested("stopped while waiting for a batch from rank " + std::to_string(from));
    }
    s.comm->check();
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, std::chrono::microseconds(1000));
  }
  arrived->wait();  // throws the transfer's error
  const Header h = read_header(host.memory.get(), from);
  auto out = pool.take(h.nbytes, stop);
  for (auto& f : out.fences) device.wait_for(f);
  if (h.nbytes > 0) {
    if (broadcast) {
      s.comm->broadcast(out.memory.get(), h.nbytes, from, stop);
    } else {
      s.comm->recv(out.memory.get(), h.nbytes, from, stop);
    }
  }
  auto done = device.record();
  s.last = done;
  return make_device_batch(s.device, std::move(out.memory), std::move(done), h.dtype, h.shape,
                           h.layout);
}

}  // namespace

DeviceBatch DeviceGroup::broadcast(const DeviceBatch& batch, int root, BufferPool& pool,
                                   std::stop_token stop) {
  auto& s = *state_;
  check_peer(root, s.rank, s.size, "root");
  std::lock_guard lock(s.mutex);
  if (s.rank != root) {
    check_pool(pool, *s.device);
    return s.stoppable([&] { return receive(s, root, true, pool, stop); });
  }
  if (!batch.defined())
    throw std::invalid_argument("DeviceGroup::broadcast: the root has no batch");
  auto done = s.stoppable([&] { return queue_outgoing(s, batch, root, true, stop); });
  return make_device_batch(s.device, batch.memory(), std::move(done), batch.dtype(), batch.shape(),
                           batch.layout());
}

void DeviceGroup::send(const DeviceBatch& batch, int peer, std::stop_token stop) {
  auto& s = *state_;
  check_peer(peer, s.rank, s.size, "send");
  if (!batch.defined()) throw std::invalid_argument("DeviceGroup::send: no batch");
  std::lock_guard lock(s.mutex);
  auto done = s.stoppable([&] { return queue_outgoing(s, batch, peer, false, stop); });
  BufferPool::fence(batch.memory(), done);  // the payload is read until `done`
}

DeviceBatch DeviceGroup::recv(int peer, BufferPool& pool, std::stop_token stop) {
  auto& s = *state_;
  check_peer(peer, s.rank, s.size, "recv");
  check_pool(pool, *s.device);
  std::lock_guard lock(s.mutex);
  return s.stoppable([&] { return receive(s, peer, false, pool, stop); });
}

}  // namespace brigade::transport
