// The worker node: the gate, one session actor per trainer and the joiner carry the
// network's messages to the worker's rules (detail/worker_table.h: hellos, sessions,
// windows, heartbeats, the threads' turn, the directory join) and do the sends they ask
// for; a fixed set of operation threads runs the tasks the table hands out.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <map>
#include <thread>

#include "transport/remote/detail/remote_auth.h"
#include "transport/remote/detail/remote_clock.h"
#include "transport/remote/detail/remote_dispatch.h"
#include "transport/remote/detail/remote_guard.h"
#include "transport/remote/detail/remote_protocol.h"
#include "transport/remote/detail/wire_messages.h"
#include "transport/remote/detail/worker_table.h"
#include "transport/remote/remote.h"

namespace brigade::transport {
namespace {

using namespace detail;

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
    send(s, result_atom::value, id, std::move(bytes));
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
  std::shared_ptr<const RemoteClock> clock;
  OperationRegistry operations;  // the threads' own copy (the table checks hellos by it)
  // Every actor of the worker's system is guarded by it (detail/remote_guard.h); what
  // the actors drop themselves (wrong keys, unknown messages) is logged through it too.
  std::shared_ptr<Guard> guard = std::make_shared<Guard>("brigade worker");
  CafWorkerNetwork network;
  WorkerTable table;  // its mutex guards the network's peers too

  // One operation thread: takes the task whose turn it is, runs it, hands it back.
  void serve() {
    for (;;) {
      std::optional<TakenTask> task;
      {
        std::unique_lock lock(table.mutex);
        table.work.wait(lock, [&] { return table.stopping() || table.has_work(); });
        if (table.stopping()) return;
        task = table.take();
      }
      if (!task) continue;
      auto [result, error] = run(*task);
      std::lock_guard lock(table.mutex);
      table.finish(*task, std::move(result), std::move(error));
    }
  }

  std::pair<std::vector<char>, std::string> run(const TakenTask& task) {
    try {
      const Operation* op = operations.find(task.op);
      if (!op) throw std::invalid_argument(fmt::format("no operation '{}'", task.op));
      return {(*op)(task.payload, OperationContext{task.stop}), {}};
    } catch (const std::exception& e) {
      return {{}, *e.what() ? e.what() : "the operation failed"};
    }
  }
};

void note(caf::scheduled_actor* self, Guard& guard, Dropped what) {
  auto sender = self->current_sender();
  guard.log.note(what, sender ? caf::to_string(sender->node()) : "");
}

struct SessionState {
  std::shared_ptr<Core> core;
  std::uint64_t number = 0;
  caf::actor trainer;
  static inline const char* name = "brigade.worker.session";
};

caf::behavior session_actor(caf::stateful_actor<SessionState>* self, std::shared_ptr<Core> core,
                            std::uint64_t number, caf::actor trainer) {
  auto& st = self->state;
  st.core = core;
  st.number = number;
  st.trainer = trainer;
  self->monitor(trainer);
  // Runs `f(table)` with the table's mutex held; logs what it dropped.
  auto with_table = [self](auto f) {
    auto& c = *self->state.core;
    Dropped why = nullptr;
    {
      std::lock_guard lock(c.table.mutex);
      why = f(c.table);
    }
    if (why) note(self, *c.guard, why);
  };
  self->set_down_handler([self, with_table](const caf::down_msg& down) {
    if (down.source == self->state.trainer.address()) {
      with_table([self](WorkerTable& t) -> Dropped {
        t.trainer_gone(self->state.number);
        return nullptr;
      });
      return self->quit();
    }
    with_table([](WorkerTable& t) -> Dropped {
      t.dropped();
      return "a down message about an actor the session does not monitor";
    });
  });
  self->set_default_handler(
      [with_table](caf::scheduled_actor*, caf::message_view&) -> caf::result<caf::message> {
        with_table([](WorkerTable& t) -> Dropped {
          t.dropped();
          return "an unknown message";
        });
        return caf::none;
      });
  return {
      [self, with_table](task_atom, const std::string& k, std::uint64_t id, std::string& op,
                         std::vector<char>& payload) {
        with_table([&](WorkerTable& t) {
          return t.task(self->state.number, k, id, std::move(op), std::move(payload));
        });
      },
      [self, with_table](cancel_atom, const std::string& k, std::uint64_t id) {
        with_table([&](WorkerTable& t) { return t.cancel(self->state.number, k, id); });
      },
      [self, with_table](ping_atom, const std::string& k) {
        with_table([&](WorkerTable& t) { return t.ping(self->state.number, k); });
      },
      [self](tick_atom) {  // the table closed it?
        auto& c = *self->state.core;
        std::lock_guard lock(c.table.mutex);
        if (!c.table.open(self->state.number)) self->quit();
      },
  };
}

struct GateState {
  std::shared_ptr<Core> core;
  static inline const char* name = "brigade.worker.gate";
};

// How often the gate has the table look at the sessions' heartbeats.
constexpr std::chrono::milliseconds kSessionCheck{200};

caf::behavior gate_actor(caf::stateful_actor<GateState>* self, std::shared_ptr<Core> core) {
  self->state.core = core;
  self->set_default_handler(
      [self](caf::scheduled_actor* s, caf::message_view&) -> caf::result<caf::message> {
        auto& c = *self->state.core;
        {
          std::lock_guard lock(c.table.mutex);
          c.table.dropped();
        }
        note(s, *c.guard, "an unknown message at the gate");
        return caf::none;
      });
  self->set_down_handler([self](const caf::down_msg&) {
    self->state.core->guard->log.note("a down message at the gate (it monitors nothing)");
  });
  self->delayed_send(self, kSessionCheck, tick_atom::value);
  return {
      [self](hello_atom, const std::vector<char>& bytes, const caf::actor& reply_to) {
        auto& core = *self->state.core;
        auto sender = caf::actor_cast<caf::actor>(self->current_sender());
        if (!sender) sender = reply_to;  // a second connection of a node: no sender (CAF 0.17)
        std::lock_guard lock(core.table.mutex);
        auto out = core.table.hello(bytes, static_cast<bool>(sender));
        if (!out.session) {
          core.guard->log.note("a hello refused: " + out.refusal,
                               sender ? caf::to_string(sender.node()) : "");
          if (sender) self->send(sender, refuse_atom::value, out.trainer_key, out.refusal);
          return;
        }
        const auto n = *out.session;
        auto actor = spawn_guarded<SessionState>(
            *self, core.guard,
            [c = self->state.core, n, sender](auto* s) { return session_actor(s, c, n, sender); });
        core.network.attach(n, {actor, sender, out.trainer_key});
        self->send(sender, welcome_atom::value, out.trainer_key, out.welcome, actor);
      },
      [self](tick_atom) {
        if (self->current_sender().get() != self->ctrl()) return;
        {
          std::lock_guard lock(self->state.core->table.mutex);
          self->state.core->table.tick();
        }
        self->delayed_send(self, kSessionCheck, tick_atom::value);
      },
  };
}

// The joiner's side of JoinNetwork.
struct JoinerState;
using Joiner = caf::stateful_actor<JoinerState>;

class CafJoinNetwork final : public JoinNetwork {
 public:
  CafJoinNetwork(Joiner* self, std::shared_ptr<Core> core, Endpoint at, std::string advertise)
      : self_(self), core_(std::move(core)), at_(std::move(at)), advertise_(std::move(advertise)) {}
  void connect() override;
  void send_join() override;
  void forget() override;
  caf::actor directory, connecting;

 private:
  Joiner* self_;
  std::shared_ptr<Core> core_;
  Endpoint at_;
  std::string advertise_;
};

struct JoinerState {
  std::unique_ptr<CafJoinNetwork> network;
  std::unique_ptr<DirectoryJoin> join;
  static inline const char* name = "brigade.worker.joiner";
};

// How often the joiner has the join look at its deadlines.
constexpr std::chrono::milliseconds kJoinCheck{100};

void CafJoinNetwork::connect() {
  auto* self = self_;
  detail::connect(
      self, core_->security, at_, core_->guard,
      [self](caf::actor dir) {
        auto& st = self->state;
        st.network->connecting = dir;
        if (!dir) return st.join->connect_failed("no actor is published there yet");
        st.join->connected();
      },
      [self](const std::string& why) { self->state.join->connect_failed(why); });
}

void CafJoinNetwork::send_join() {
  directory = connecting;
  connecting = {};
  self_->monitor(directory);
  self_->send(directory, join_atom::value,
              write_join({token_digest(core_->security.token), advertise_}));
}

void CafJoinNetwork::forget() {
  if (directory) self_->demonitor(directory);
  directory = {};
}

caf::behavior joiner_actor(Joiner* self, std::shared_ptr<Core> core, Endpoint at,
                           std::string advertise) {
  auto& st = self->state;
  st.network = std::make_unique<CafJoinNetwork>(self, core, at, std::move(advertise));
  st.join = std::make_unique<DirectoryJoin>(at, core->clock, *st.network);
  self->set_default_handler(
      [core](caf::scheduled_actor*, caf::message_view&) -> caf::result<caf::message> {
        core->guard->log.note("an unknown message at the joiner");
        return caf::none;
      });
  self->set_down_handler([self, core](const caf::down_msg& down) {
    auto& st = self->state;
    if (!st.network->directory || down.source != st.network->directory.address())
      return core->guard->log.note("a down message about an actor the joiner does not monitor");
    st.join->directory_gone();
  });
  auto from_directory = [self] {
    const auto& dir = self->state.network->directory;
    return dir && self->current_sender() == caf::actor_cast<caf::strong_actor_ptr>(dir);
  };
  self->send(self, tick_atom::value);
  return {
      [self](tick_atom) {
        if (self->current_sender().get() != self->ctrl()) return;
        self->state.join->tick();
        self->delayed_send(self, kJoinCheck, tick_atom::value);
      },
      [self, from_directory](joined_atom) {
        if (from_directory()) self->state.join->joined();
      },
      [self, from_directory](refuse_atom, const std::string& why) {
        if (from_directory()) self->state.join->refused(why);
      },
  };
}

}  // namespace

struct WorkerNode::Impl {
  std::shared_ptr<Core> core;
  caf::actor_system_config config;
  std::unique_ptr<caf::actor_system> system;
  caf::actor gate, joiner;
  std::unique_ptr<Listener> listener;  // without TLS: the token's handshake before BASP
  Endpoint bound;
  std::vector<std::thread> threads;

  WorkerStats stats_locked() const;  // with the table's mutex held

  Impl(WorkerOptions o, OperationRegistry ops) {
    if (o.security.token.empty()) throw RemoteError("a worker needs a job token");
    if (o.threads <= 0)
      o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const auto window = o.window > 0 ? o.window : static_cast<std::uint32_t>(2 * o.threads);
    core = std::make_shared<Core>(o, window, std::move(ops));
    configure_network(config, o.security, o.heartbeat_timeout);
    system = std::make_unique<caf::actor_system>(config);
    gate = spawn_guarded<GateState>(*system, core->guard,
                                    [c = core](auto* self) { return gate_actor(self, c); });
    try {
      if (o.security.tls()) {
        bound = {o.listen.host, publish(gate, o.listen, o.security)};
      } else {
        listener = std::make_unique<Listener>(*system, gate, o.listen, o.security.token,
                                              core->guard, [c = core.get()] {
                                                std::lock_guard lock(c->table.mutex);
                                                c->table.changed.notify_all();
                                              });
        bound = {o.listen.host, listener->port()};
      }
    } catch (...) {
      core->guard->stopping = true;
      caf::anon_send_exit(gate, caf::exit_reason::user_shutdown);
      throw;
    }
    {
      std::lock_guard lock(core->table.mutex);
      core->table.set_name(bound.to_string());
    }
    for (int i = 0; i < o.threads; ++i) threads.emplace_back([c = core] { c->serve(); });
    if (o.join) {
      Endpoint adv = o.advertise.value_or(Endpoint{bound.host, bound.port});
      if (adv.port == 0) adv.port = bound.port;
      joiner = spawn_guarded<JoinerState>(
          *system, core->guard, [c = core, at = *o.join, a = adv.to_string()](auto* self) {
            return joiner_actor(self, c, at, a);
          });
    }
  }

  ~Impl() {
    listener.reset();              // no new connection
    core->guard->stopping = true;  // our own exits from here on
    {
      std::lock_guard lock(core->table.mutex);
      core->table.shut_down();
    }
    caf::anon_send_exit(gate, caf::exit_reason::user_shutdown);
    if (joiner) caf::anon_send_exit(joiner, caf::exit_reason::user_shutdown);
    for (auto& t : threads) t.join();
    std::vector<caf::actor> sessions;
    {
      std::lock_guard lock(core->table.mutex);
      sessions = core->network.sessions();
    }
    for (auto& a : sessions) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }
};

WorkerNode::WorkerNode(WorkerOptions options, OperationRegistry operations)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(operations))) {}
WorkerNode::~WorkerNode() = default;
Endpoint WorkerNode::address() const { return impl_->bound; }
WorkerStats WorkerNode::stats() const {
  std::lock_guard lock(impl_->core->table.mutex);
  return impl_->stats_locked();
}

bool detail::WorkerAccess::wait(const WorkerNode& worker,
                                const std::function<bool(const WorkerStats&)>& done,
                                std::chrono::milliseconds timeout) {
  auto& impl = *worker.impl_;
  std::unique_lock lock(impl.core->table.mutex);
  return impl.core->table.changed.wait_for(lock, timeout,
                                           [&] { return done(impl.stats_locked()); });
}

WorkerStats WorkerNode::Impl::stats_locked() const {
  auto s = core->table.stats();
  s.system_messages_dropped = core->guard->dropped();
  if (listener) {
    s.connections_authenticated = listener->accepted();
    s.connections_refused = listener->refused();
  }
  s.drop_log_lines = core->guard->log.lines();
  return s;
}

}  // namespace brigade::transport
