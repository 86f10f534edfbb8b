#include "transport/remote/detail/worker_actors.h"

#include <fmt/format.h>

#include <optional>

#include "transport/remote/detail/remote_auth.h"
#include "transport/remote/detail/wire_messages.h"

namespace brigade::transport::detail {

void Core::serve() {
  for (;;) {
    std::optional<TakenTask> task;
    {
      std::unique_lock lock(table.mutex);
      table.work.wait(lock, [&] { return table.stopping() || table.has_work(); });
      if (table.stopping()) return;
      task = table.take();
    }
    if (!task) continue;
    std::vector<char> result;
    std::string error;
    try {
      const Operation* op = operations.find(task->op);
      if (!op) throw std::invalid_argument(fmt::format("no operation '{}'", task->op));
      result = (*op)(task->payload, OperationContext{task->stop});
    } catch (const std::exception& e) {
      error = *e.what() ? e.what() : "the operation failed";
    }
    std::lock_guard lock(table.mutex);
    table.finish(*task, std::move(result), std::move(error));
  }
}

namespace {

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
      [self, core, from_directory](weights_atom, const std::vector<char>& bytes) {
        Dropped why = nullptr;
        std::vector<std::uint32_t> weights;
        if (!from_directory()) {
          why = "rank weights not from the directory joined";
        } else {
          try {
            auto w = read_rank_weights(bytes);
            if (!same_secret(w.token, token_digest(core->security.token)))
              throw RemoteError("a wrong job token");
            weights = std::move(w.weights);
          } catch (const RemoteError&) {
            why = "malformed rank weights, or a wrong job token";
          }
        }
        {
          std::lock_guard lock(core->table.mutex);
          if (why) {
            core->table.dropped();
          } else {
            core->table.set_rank_weights(std::move(weights));
          }
        }
        if (why) note(self, *core->guard, why);
      },
  };
}

}  // namespace

caf::actor spawn_gate(caf::actor_system& system, std::shared_ptr<Core> core) {
  auto guard = core->guard;
  return spawn_guarded<GateState>(
      system, guard, [c = std::move(core)](auto* self) { return gate_actor(self, c); });
}

caf::actor spawn_joiner(caf::actor_system& system, std::shared_ptr<Core> core, Endpoint at,
                        std::string advertise) {
  auto guard = core->guard;
  return spawn_guarded<JoinerState>(
      system, guard,
      [c = std::move(core), at = std::move(at), a = std::move(advertise)](auto* self) {
        return joiner_actor(self, c, at, a);
      });
}

}  // namespace brigade::transport::detail
