#pragma once

// The worker node's actors: the gate, one session actor per trainer and the joiner
// carry the network's messages to the worker's rules (detail/worker_table.h) and do
// the sends they ask for (CafWorkerNetwork); Core is what they and the operation
// threads share. WorkerNode (worker_node.cc) adds the actor system, the listener and
// the threads; tests run the actors on CAF's test_coordinator, step by step
// (tests/transport/remote/worker_actors_test.cc).
//
// THREADING. Core::table's mutex guards the table and the network's peers; the actors
// and the threads take it for each call.

#include <caf/all.hpp>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "transport/remote/detail/remote_clock.h"
#include "transport/remote/detail/remote_guard.h"
#include "transport/remote/detail/remote_protocol.h"
#include "transport/remote/detail/worker_table.h"
#include "transport/remote/endpoint.h"
#include "transport/remote/remote.h"

namespace brigade::transport::detail {

// The worker's side of WorkerNetwork (with the table's mutex held: the sends of a
// session are made in the table's order). Messages to a trainer carry its key.
class CafWorkerNetwork final : public WorkerNetwork {
 public:
  struct Peer {
    caf::actor session, trainer;
    std::string trainer_key;
  };

  void attach(std::uint64_t s, Peer peer) { peers_[s] = std::move(peer); }
  std::vector<caf::actor> sessions() const {
    std::vector<caf::actor> out;
    for (const auto& [s, p] : peers_) out.push_back(p.session);
    return out;
  }

  void send_refuse_task(std::uint64_t s, std::uint64_t id, const std::string& why) override {
    send(s, refuse_atom::value, id, why);
  }
  void send_pong(std::uint64_t s) override { send(s, pong_atom::value); }
  void send_started(std::uint64_t s, std::uint64_t id) override {
    send(s, started_atom::value, id);
  }
  void send_freed(std::uint64_t s, std::uint64_t id) override { send(s, freed_atom::value, id); }
  void send_result(std::uint64_t s, std::uint64_t id, std::vector<char> bytes) override {
    send(s, result_atom::value, id, WirePayload{SharedBytes(std::move(bytes))});
  }
  void send_failed(std::uint64_t s, std::uint64_t id, const std::string& why) override {
    send(s, tfailed_atom::value, id, why);
  }
  void close(std::uint64_t s) override {
    auto it = peers_.find(s);
    if (it == peers_.end()) return;
    caf::anon_send(it->second.session, tick_atom::value);  // it sees that it ended, and quits
    peers_.erase(it);
  }

 private:
  template <class Atom, class... Ts>
  void send(std::uint64_t s, Atom atom, Ts&&... xs) {
    auto it = peers_.find(s);
    if (it != peers_.end())
      caf::anon_send(it->second.trainer, atom, it->second.trainer_key, std::forward<Ts>(xs)...);
  }

  std::map<std::uint64_t, Peer> peers_;
};

// What the actors and the operation threads share.
struct Core {
  Core(const WorkerOptions& o, std::uint32_t window, OperationRegistry ops)
      : security(o.security),
        clock(clock_or_steady(o.clock)),
        operations(ops),
        table(o, window, std::move(ops), network) {}
  Security security;
  std::shared_ptr<const actors::Clock> clock;
  OperationRegistry operations;  // the threads' own copy (the table checks hellos by it)
  // Every actor of the worker's system is guarded by it (detail/remote_guard.h); what
  // the actors drop themselves (wrong keys, unknown messages) is logged through it too.
  std::shared_ptr<Guard> guard = std::make_shared<Guard>("brigade worker", clock);
  CafWorkerNetwork network;
  WorkerTable table;  // its mutex guards the network's peers too

  /// One operation thread: takes the task whose turn it is, runs it, hands it back;
  /// returns once the table is shut down.
  void serve();
};

/// The gate (what the worker publishes): opens sessions. It has the table look at the
/// sessions' heartbeats every kSessionCheck.
inline constexpr std::chrono::milliseconds kSessionCheck{200};
caf::actor spawn_gate(caf::actor_system& system, std::shared_ptr<Core> core);

/// The joiner: keeps the worker in the directory at `at` (DirectoryJoin), advertising
/// `advertise` ("host:port"); it has the join look at its deadlines every kJoinCheck.
inline constexpr std::chrono::milliseconds kJoinCheck{100};
caf::actor spawn_joiner(caf::actor_system& system, std::shared_ptr<Core> core, Endpoint at,
                        std::string advertise);

}  // namespace brigade::transport::detail
