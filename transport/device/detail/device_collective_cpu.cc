// The in-process collective of CPU devices. Ranks rendezvous in a CpuGroup found by
// the id's key in a process-wide registry. Each transfer is a task on the rank's
// CpuDevice worker that blocks until its peers' matching tasks arrive, as an NCCL
// kernel blocks its stream: broadcasts match by their sequence number in the group,
// sends and receives by (sender, receiver, sequence number on that pair).
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <tuple>

#include "transport/device/detail/device_collective.h"
#include "transport/device/detail/device_cpu.h"

namespace brigade::transport::detail {
namespace {

using Key = std::array<std::uint8_t, 128>;

struct CpuGroup {
  int size = 0;
  std::mutex mutex;
  std::condition_variable_any changed;
  std::vector<bool> joined;
  int members = 0;
  bool aborted = false;

  struct Broadcast {
    int root = -1;
    std::size_t nbytes = 0;
    const void* src = nullptr;
    std::vector<void*> dst;
    int arrived = 0;
    int left = 0;
    bool done = false;
    std::string error;
  };
  std::map<std::uint64_t, Broadcast> broadcasts;

  struct Transfer {
    const void* src = nullptr;
    std::size_t nbytes = 0;
    bool posted = false;
    bool done = false;
    std::string error;
  };
  std::map<std::tuple<int, int, std::uint64_t>, Transfer> transfers;  // (from, to, seq)
};

std::mutex registry_mutex;
std::map<Key, std::weak_ptr<CpuGroup>>& registry() {
  static std::map<Key, std::weak_ptr<CpuGroup>> groups;
  return groups;
}

[[noreturn]] void fail(const char* call, const std::string& why) {
  throw DeviceError("device", "collective", call, {DeviceKind::cpu, 0}, why);
}

class CpuCollective final : public Collective {
 public:
  CpuCollective(std::shared_ptr<CpuDevice> device, std::shared_ptr<CpuGroup> group, int rank)
      : device_(std::move(device)),
        group_(std::move(group)),
        rank_(rank),
        sends_(group_->size),
        recvs_(group_->size) {}

  void broadcast(void* buffer, std::size_t nbytes, int root, const std::stop_token&) override {
    device_->submit([g = group_, rank = rank_, seq = broadcasts_++, buffer, nbytes, root] {
      std::unique_lock lock(g->mutex);
      if (g->aborted) fail("broadcast", "the group was aborted");
      auto& b = g->broadcasts[seq];
      if (b.arrived == 0) {
        b.root = root;
        b.nbytes = nbytes;
      } else if (b.root != root || b.nbytes != nbytes) {
        b.error = "ranks disagree on broadcast " + std::to_string(seq) + ": root " +
                  std::to_string(b.root) + " / " + std::to_string(root) + ", bytes " +
                  std::to_string(b.nbytes) + " / " + std::to_string(nbytes);
      }
      if (rank == root) {
        b.src = buffer;
      } else {
        b.dst.push_back(buffer);
      }
      if (++b.arrived == g->size) {
        if (b.error.empty()) {
          for (void* d : b.dst) std::memcpy(d, b.src, b.nbytes);
        }
        b.done = true;
        g->changed.notify_all();
      }
      g->changed.wait(lock, [&] { return b.done || g->aborted; });
      const bool ok = b.done && b.error.empty();
      const std::string error = b.done ? b.error : "the group was aborted";
      if (++b.left == g->size) g->broadcasts.erase(seq);
      if (!ok) fail("broadcast", error);
    });
  }

  void send(const void* buffer, std::size_t nbytes, int peer, const std::stop_token&) override {
    device_->submit([g = group_, key = std::tuple(rank_, peer, sends_[peer]++), buffer, nbytes] {
      std::unique_lock lock(g->mutex);
      if (g->aborted) fail("send", "the group was aborted");
      auto& t = g->transfers[key];
      t.src = buffer;
      t.nbytes = nbytes;
      t.posted = true;
      g->changed.notify_all();
      g->changed.wait(lock, [&] { return t.done || g->aborted; });
      const bool ok = t.done && t.error.empty();
      const std::string error = t.done ? t.error : "the group was aborted";
      g->transfers.erase(key);
      if (!ok) fail("send", error);
    });
  }

  void recv(void* buffer, std::size_t nbytes, int peer, const std::stop_token&) override {
    device_->submit([g = group_, key = std::tuple(peer, rank_, recvs_[peer]++), buffer, nbytes] {
      std::unique_lock lock(g->mutex);
      if (g->aborted) fail("recv", "the group was aborted");
      auto& t = g->transfers[key];
      g->changed.wait(lock, [&] { return t.posted || g->aborted; });
      if (!t.posted) fail("recv", "the group was aborted");
      if (t.nbytes != nbytes) {
        t.error = "sender has " + std::to_string(t.nbytes) + " bytes, receiver expects " +
                  std::to_string(nbytes);
      } else {
        std::memcpy(buffer, t.src, nbytes);
      }
      t.done = true;
      const std::string error = t.error;
      g->changed.notify_all();
      if (!error.empty()) fail("recv", error);
    });
  }

  void check() override {
    std::lock_guard lock(group_->mutex);
    if (group_->aborted) fail("check", "the group was aborted");
  }

  void abort() override {
    {
      std::lock_guard lock(group_->mutex);
      group_->aborted = true;
    }
    group_->changed.notify_all();
  }

 private:
  std::shared_ptr<CpuDevice> device_;
  std::shared_ptr<CpuGroup> group_;
  int rank_;
  std::uint64_t broadcasts_ = 0;
  std::vector<std::uint64_t> sends_;
  std::vector<std::uint64_t> recvs_;
};

}  // namespace

std::unique_ptr<Collective> make_cpu_collective(std::shared_ptr<Device> device,
                                                const DeviceGroupId& id, int rank,
                                                const JoinOptions& options) {
  auto cpu = std::dynamic_pointer_cast<CpuDevice>(device);
  if (!cpu) throw std::invalid_argument("a CPU device group needs a CPU device");
  std::shared_ptr<CpuGroup> group;
  {
    std::lock_guard lock(registry_mutex);
    auto& slot = registry()[id.unique_id];
    group = slot.lock();
    if (!group) {
      group = std::make_shared<CpuGroup>();
      group->size = id.size;
      group->joined.assign(static_cast<std::size_t>(id.size), false);
      slot = group;
    }
    std::erase_if(registry(), [](const auto& entry) { return entry.second.expired(); });
  }
  std::unique_lock lock(group->mutex);
  if (group->size != id.size) {
    fail("join", "ranks disagree on the group's size: " + std::to_string(group->size) + " / " +
                     std::to_string(id.size));
  }
  if (group->joined[rank]) fail("join", "rank " + std::to_string(rank) + " joined twice");
  group->joined[rank] = true;
  ++group->members;
  group->changed.notify_all();
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  const bool all = group->changed.wait_until(lock, options.stop, deadline, [&] {
    return group->members >= group->size || group->aborted;
  });
  if (!all || group->aborted) {
    const int joined = group->members--;
    group->joined[rank] = false;
    if (options.stop.stop_requested()) throw StopRequested("stopped while joining a device group");
    fail("join", std::to_string(joined) + " of " + std::to_string(group->size) +
                     " ranks joined within the timeout");
  }
  lock.unlock();
  return std::make_unique<CpuCollective>(std::move(cpu), std::move(group), rank);
}

}  // namespace brigade::transport::detail
