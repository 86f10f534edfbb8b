// The worker node: a gate actor that opens sessions, one session actor per trainer,
// and a fixed set of operation threads taking the sessions' queued tasks in turn.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <condition_variable>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <thread>

#include "transport/remote/detail/remote_auth.h"
#include "transport/remote/detail/remote_clock.h"
#include "transport/remote/detail/remote_dispatch.h"
#include "transport/remote/detail/remote_guard.h"
#include "transport/remote/detail/remote_protocol.h"
#include "transport/remote/detail/wire_messages.h"
#include "transport/remote/remote.h"

namespace brigade::transport {
namespace {

using namespace detail;
using Clock = std::chrono::steady_clock;

struct Session;

struct QueuedTask {
  std::uint64_t id = 0;
  std::string op;
  std::vector<char> payload;
};

// A session's work, guarded by Core::mutex.
struct Session {
  std::string key;          // the worker's key: in every message from the trainer
  std::string trainer_key;  // in every message to the trainer
  std::string name;
  caf::actor actor;  // the session actor (results go through it)
  std::deque<QueuedTask> queue;
  std::map<std::uint64_t, std::stop_source> running;
  bool closed = false;
  bool in_ring = false;
};

// What the actors and the operation threads share.
struct Core {
  WorkerOptions options;
  std::shared_ptr<const RemoteClock> clock;  // heartbeats (options.clock, or steady)
  OperationRegistry operations;
  std::string name;  // "host:port"
  std::uint32_t window = 0;
  // Every actor of the worker's system is guarded by it (detail/remote_guard.h); what
  // the actors drop themselves (wrong keys, unknown messages) is logged through it too.
  std::shared_ptr<Guard> guard = std::make_shared<Guard>("brigade worker");

  std::mutex mutex;
  std::condition_variable wake;
  std::condition_variable_any changed;           // `stats` changed (WorkerAccess::wait)
  std::list<std::shared_ptr<Session>> ring;      // sessions with queued tasks, in turn
  std::vector<std::weak_ptr<Session>> sessions;  // every session opened (ended at shutdown)
  bool stopping = false;
  WorkerStats stats;

  void enqueue(const std::shared_ptr<Session>& s, QueuedTask task) {
    {
      std::lock_guard lock(mutex);
      if (s->closed) return;
      s->queue.push_back(std::move(task));
      if (!s->in_ring) {
        s->in_ring = true;
        ring.push_back(s);
      }
      changed.notify_all();
    }
    wake.notify_one();
  }

  std::size_t outstanding(const Session& s) {
    std::lock_guard lock(mutex);
    return s.queue.size() + s.running.size();
  }

  void cancel(Session& s, std::uint64_t id) {
    std::lock_guard lock(mutex);
    for (auto it = s.queue.begin(); it != s.queue.end(); ++it) {
      if (it->id == id) {
        s.queue.erase(it);
        ++stats.tasks_cancelled;
        changed.notify_all();
        return;
      }
    }
    if (auto it = s.running.find(id); it != s.running.end()) it->second.request_stop();
  }

  void close(Session& s) {
    std::lock_guard lock(mutex);
    if (s.closed) return;
    s.closed = true;
    stats.tasks_cancelled += s.queue.size();
    s.queue.clear();
    for (auto& [id, stop] : s.running) stop.request_stop();
    --stats.sessions_open;
    changed.notify_all();
  }

  // One operation thread: takes the first task of the session whose turn it is.
  void serve() {
    for (;;) {
      std::shared_ptr<Session> s;
      QueuedTask task;
      std::stop_source stop;
      caf::actor actor;
      std::string key;
      {
        std::unique_lock lock(mutex);
        wake.wait(lock, [&] { return stopping || !ring.empty(); });
        if (stopping) return;
        s = ring.front();
        ring.pop_front();
        if (s->closed || s->queue.empty()) {  // ended, or its tasks were cancelled
          s->in_ring = false;
          continue;
        }
        task = std::move(s->queue.front());
        s->queue.pop_front();
        if (s->queue.empty()) {
          s->in_ring = false;
        } else {
          ring.push_back(s);  // its next task waits for the other sessions' turns
        }
        s->running.emplace(task.id, stop);
        actor = s->actor;
        key = s->key;
      }
      // The trainer counts a lost attempt against the task only once it has started.
      caf::anon_send(actor, started_atom::value, key, task.id);
      run(*s, std::move(task), stop.get_token());
    }
  }

  void run(Session& s, QueuedTask task, std::stop_token stop) {
    const auto started = Clock::now();
    std::vector<char> result;
    std::string error;
    try {
      const Operation* op = operations.find(task.op);
      if (!op) throw std::invalid_argument(fmt::format("no operation '{}'", task.op));
      result = (*op)(task.payload, OperationContext{stop});
    } catch (const std::exception& e) {
      error = e.what();
      if (error.empty()) error = "the operation failed";
    }
    const double busy = std::chrono::duration<double>(Clock::now() - started).count();
    bool cancelled = false;
    caf::actor actor;
    std::string key;
    {
      std::lock_guard lock(mutex);
      s.running.erase(task.id);
      cancelled = s.closed || stop.stop_requested();
      stats.busy_seconds += busy;
      if (cancelled) {
        ++stats.tasks_cancelled;
      } else if (error.empty()) {
        ++stats.tasks_done;
      } else {
        ++stats.tasks_failed;
      }
      changed.notify_all();
      actor = s.actor;
      key = s.key;
    }
    if (cancelled) {
      // The thread is free again (a task stuck past its deadline keeps its worker out of
      // the trainer's rotation until then).
      caf::anon_send(actor, freed_atom::value, key, task.id);
      return;
    }
    caf::anon_send(actor, done_atom::value, key, task.id, error.empty(), std::move(result), error);
  }
};

struct SessionState {
  std::shared_ptr<Core> core;
  std::shared_ptr<Session> session;
  caf::actor trainer;
  TimePoint last_heard{};
  static inline const char* name = "brigade.worker.session";
};

void drop(caf::stateful_actor<SessionState>* self, const std::string& what) {
  {
    std::lock_guard lock(self->state.core->mutex);
    ++self->state.core->stats.messages_dropped;
    self->state.core->changed.notify_all();
  }
  auto sender = self->current_sender();
  self->state.core->guard->log.note(what, sender ? caf::to_string(sender->node()) : "");
}

caf::behavior session_actor(caf::stateful_actor<SessionState>* self, std::shared_ptr<Core> core,
                            std::shared_ptr<Session> session, caf::actor trainer) {
  self->state.core = core;
  self->state.session = session;
  self->state.trainer = trainer;
  self->state.last_heard = core->clock->now();
  self->monitor(trainer);
  auto end = [self](const std::string& why) {
    spdlog::info("brigade worker: session of {} ended: {}", self->state.session->name, why);
    self->state.core->close(*self->state.session);
    self->quit();
  };
  self->set_down_handler([self, end](const caf::down_msg& down) {
    if (down.source == self->state.trainer.address()) return end("the trainer is gone");
    drop(self, "a down message about an actor the session does not monitor");
  });
  self->set_default_handler(
      [self](caf::scheduled_actor*, caf::message_view&) -> caf::result<caf::message> {
        drop(self, "an unknown message");
        return caf::none;
      });
  self->delayed_send(self, std::chrono::milliseconds(200), tick_atom::value);
  const auto& key = session->key;
  return {
      [self, key](task_atom, const std::string& k, std::uint64_t id, const std::string& op,
                  std::vector<char>& payload) {
        if (!same_secret(k, key)) return drop(self, "a task with a wrong session key");
        auto& st = self->state;
        st.last_heard = st.core->clock->now();
        if (st.core->outstanding(*st.session) >= st.core->window) {
          self->send(st.trainer, refuse_atom::value, st.session->trainer_key, id,
                     fmt::format("worker {}: the session's window of {} tasks is full",
                                 st.core->name, st.core->window));
          return;
        }
        st.core->enqueue(st.session, {id, op, std::move(payload)});
      },
      [self, key](cancel_atom, const std::string& k, std::uint64_t id) {
        if (!same_secret(k, key)) return drop(self, "a cancel with a wrong session key");
        self->state.core->cancel(*self->state.session, id);
      },
      [self, key](ping_atom, const std::string& k) {
        if (!same_secret(k, key)) return drop(self, "a ping with a wrong session key");
        self->state.last_heard = self->state.core->clock->now();
        self->send(self->state.trainer, pong_atom::value, self->state.session->trainer_key);
      },
      [self, key](started_atom, const std::string& k, std::uint64_t id) {
        if (!same_secret(k, key)) return drop(self, "a start with a wrong session key");
        self->send(self->state.trainer, started_atom::value, self->state.session->trainer_key, id);
      },
      [self, key](freed_atom, const std::string& k, std::uint64_t id) {
        if (!same_secret(k, key)) return drop(self, "a free with a wrong session key");
        self->send(self->state.trainer, freed_atom::value, self->state.session->trainer_key, id);
      },
      [self, key](done_atom, const std::string& k, std::uint64_t id, bool ok,
                  std::vector<char>& result, const std::string& error) {
        if (!same_secret(k, key)) return drop(self, "a result with a wrong session key");
        auto& st = self->state;
        if (ok) {
          self->send(st.trainer, result_atom::value, st.session->trainer_key, id,
                     std::move(result));
        } else {
          self->send(st.trainer, tfailed_atom::value, st.session->trainer_key, id, error);
        }
      },
      [self, end](tick_atom) {
        const auto silent = self->state.core->clock->now() - self->state.last_heard;
        if (silent > self->state.core->options.heartbeat_timeout) {
          return end(
              fmt::format("no heartbeat for {} ms",
                          std::chrono::duration_cast<std::chrono::milliseconds>(silent).count()));
        }
        self->delayed_send(self, std::chrono::milliseconds(200), tick_atom::value);
      },
  };
}

struct GateState {
  std::shared_ptr<Core> core;
  static inline const char* name = "brigade.worker.gate";
};

// Why a hello is refused, naming both sides; empty when it is accepted.
std::string check_hello(const Core& core, const HelloFields& hello) {
  const auto& o = core.options;
  if (hello.protocol != kProtocolVersion) {
    return fmt::format("protocol version {} (trainer) differs from {} (worker {})", hello.protocol,
                       kProtocolVersion, core.name);
  }
  if (!same_secret(hello.token, token_digest(o.security.token))) {
    return fmt::format("the job token differs from worker {}'s", core.name);
  }
  if (hello.build_id != build_id()) {
    return fmt::format("build '{}' (trainer) differs from '{}' (worker {})", hello.build_id,
                       build_id(), core.name);
  }
  for (const auto& op : hello.operations) {
    std::uint32_t have = 0;
    for (const auto& v : core.operations.list())
      if (v.name == op.name) have = v.version;
    if (have == 0) {
      return fmt::format("operation '{}' version {} (trainer) is not on worker {}", op.name,
                         op.version, core.name);
    }
    if (have != op.version) {
      return fmt::format("operation '{}' version {} (trainer) differs from version {} (worker {})",
                         op.name, op.version, have, core.name);
    }
  }
  if (o.fingerprint != 0 && hello.fingerprint != o.fingerprint) {
    return fmt::format("dataset fingerprint {:016x} (trainer) differs from {:016x} (worker {})",
                       hello.fingerprint, o.fingerprint, core.name);
  }
  if (hello.trainer_key.size() != 16) return "a trainer key of 16 bytes is required";
  return {};
}

caf::behavior gate_actor(caf::stateful_actor<GateState>* self, std::shared_ptr<Core> core) {
  self->state.core = core;
  self->set_default_handler(
      [self](caf::scheduled_actor*, caf::message_view&) -> caf::result<caf::message> {
        {
          std::lock_guard lock(self->state.core->mutex);
          ++self->state.core->stats.messages_dropped;
          self->state.core->changed.notify_all();
        }
        auto sender = self->current_sender();
        self->state.core->guard->log.note("an unknown message at the gate",
                                          sender ? caf::to_string(sender->node()) : "");
        return caf::none;
      });
  self->set_down_handler([self](const caf::down_msg&) {
    self->state.core->guard->log.note("a down message at the gate (it monitors nothing)");
  });
  return {
      [self](hello_atom, const std::vector<char>& bytes, const caf::actor& reply_to) {
        auto& core = *self->state.core;
        auto sender = caf::actor_cast<caf::actor>(self->current_sender());
        if (!sender) sender = reply_to;  // a second connection of a node: no sender (CAF 0.17)
        std::string why, trainer_key, name;
        try {
          const auto hello = read_hello(bytes);
          why = check_hello(core, hello);
          trainer_key = hello.trainer_key;
          name = hello.name;
        } catch (const RemoteError& e) {
          why = e.what();
        }
        if (!sender) why = "an anonymous hello";
        if (!why.empty()) {
          {
            std::lock_guard lock(core.mutex);
            ++core.stats.hellos_refused;
            core.changed.notify_all();
          }
          core.guard->log.note("a hello refused: " + why,
                               sender ? caf::to_string(sender.node()) : "");
          if (sender) self->send(sender, refuse_atom::value, trainer_key, why);
          return;
        }
        auto session = std::make_shared<Session>();
        session->key = random_key();
        session->trainer_key = trainer_key;
        session->name = name;
        auto actor = spawn_guarded<SessionState>(*self, core.guard,
                                                 [c = self->state.core, session, sender](auto* s) {
                                                   return session_actor(s, c, session, sender);
                                                 });
        {
          std::lock_guard lock(core.mutex);
          session->actor = actor;
          std::erase_if(core.sessions, [](const auto& w) { return w.expired(); });
          core.sessions.push_back(session);
          ++core.stats.sessions_opened;
          ++core.stats.sessions_open;
          core.changed.notify_all();
        }
        const auto welcome =
            write_welcome({.protocol = kProtocolVersion,
                           .build_id = std::string(build_id()),
                           .session_key = session->key,
                           .name = core.name,
                           .window = core.window,
                           .threads = static_cast<std::uint32_t>(core.options.threads)});
        spdlog::info("brigade worker: session opened for {}", name);
        self->send(sender, welcome_atom::value, trainer_key, welcome, actor);
      },
  };
}

// Keeps this worker in the directory: joins, watches the directory, joins again when it
// comes back (rank 0 may start after the workers, or restart).
struct JoinerState {
  caf::actor directory;
  std::string last_error;
  bool joined = false;
  std::uint64_t attempts = 0;
  TimePoint answer_by{};  // the join's deadline (on the worker's clock)
  static inline const char* name = "brigade.worker.joiner";
};

// How often the joiner looks whether its join has been answered.
constexpr std::chrono::milliseconds kJoinCheck{100};

caf::behavior joiner_actor(caf::stateful_actor<JoinerState>* self, std::shared_ptr<Core> core,
                           Endpoint at, std::string advertise) {
  auto attempt = [self, core, at, advertise] {
    connect(
        self, core->options.security, at, core->guard,
        [self, core, advertise](caf::actor dir) {
          self->state.directory = dir;
          self->monitor(dir);
          // A join nobody answers (--join pointed at a worker's port): say so, try again.
          self->state.joined = false;
          self->state.answer_by = core->clock->now() + std::chrono::seconds(5);
          self->send(dir, join_atom::value,
                     write_join({token_digest(core->options.security.token), advertise}));
          self->delayed_send(self, kJoinCheck, kick_atom::value, ++self->state.attempts);
        },
        [self, at](const std::string& why) {
          if (why != self->state.last_error) {
            spdlog::info(
                "brigade worker: cannot reach the directory at {} (trying again every "
                "second): {}",
                at.to_string(), why);
          }
          self->state.last_error = why;
          self->delayed_send(self, std::chrono::seconds(1), tick_atom::value);
        });
  };
  self->set_default_handler(
      [core](caf::scheduled_actor*, caf::message_view&) -> caf::result<caf::message> {
        core->guard->log.note("an unknown message at the joiner");
        return caf::none;
      });
  self->set_down_handler([self, core](const caf::down_msg& down) {
    if (!self->state.directory || down.source != self->state.directory.address()) {
      return core->guard->log.note("a down message about an actor the joiner does not monitor");
    }
    spdlog::warn("brigade worker: the directory is gone; joining again when it is back");
    self->state.directory = {};
    self->delayed_send(self, std::chrono::seconds(1), tick_atom::value);
  });
  self->send(self, tick_atom::value);
  return {
      [attempt](tick_atom) { attempt(); },
      [self, core, at](kick_atom, std::uint64_t n) {
        auto& st = self->state;
        if (self->current_sender().get() != self->ctrl() || n != st.attempts || st.joined ||
            !st.directory)
          return;
        if (core->clock->now() < st.answer_by) {  // looked at again, on the worker's clock
          self->delayed_send(self, kJoinCheck, kick_atom::value, n);
          return;
        }
        spdlog::error(
            "brigade worker: {} did not answer the join within 5 s (is it a worker's "
            "port rather than the directory's?); trying again",
            at.to_string());
        self->demonitor(st.directory);
        st.directory = {};
        self->delayed_send(self, std::chrono::seconds(1), tick_atom::value);
      },
      [self, at](joined_atom) {
        if (self->current_sender() != caf::actor_cast<caf::strong_actor_ptr>(self->state.directory))
          return;
        self->state.joined = true;
        self->state.last_error.clear();
        spdlog::info("brigade worker: joined the directory at {}", at.to_string());
      },
      [self, at](refuse_atom, const std::string& why) {
        if (self->current_sender() != caf::actor_cast<caf::strong_actor_ptr>(self->state.directory))
          return;
        spdlog::error("brigade worker: the directory at {} refused to list this worker: {}",
                      at.to_string(), why);
        self->state.directory = {};
      },
  };
}

}  // namespace

struct WorkerNode::Impl {
  std::shared_ptr<Core> core = std::make_shared<Core>();
  caf::actor_system_config config;
  std::unique_ptr<caf::actor_system> system;
  caf::actor gate, joiner;
  std::unique_ptr<Listener> listener;  // without TLS: the token's handshake before BASP
  Endpoint bound;
  std::vector<std::thread> threads;

  WorkerStats stats_locked() const;  // with core->mutex held

  Impl(WorkerOptions o, OperationRegistry ops) {
    if (o.security.token.empty()) throw RemoteError("a worker needs a job token");
    if (o.threads <= 0)
      o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    core->window = o.window > 0 ? o.window : static_cast<std::uint32_t>(2 * o.threads);
    core->operations = std::move(ops);
    core->options = o;
    core->clock = clock_or_steady(o.clock);
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
                                                std::lock_guard lock(c->mutex);
                                                c->changed.notify_all();
                                              });
        bound = {o.listen.host, listener->port()};
      }
    } catch (...) {
      core->guard->stopping = true;
      caf::anon_send_exit(gate, caf::exit_reason::user_shutdown);
      throw;
    }
    core->name = bound.to_string();
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
      std::lock_guard lock(core->mutex);
      core->stopping = true;
      for (auto& s : core->ring) s->closed = true;
    }
    core->wake.notify_all();
    caf::anon_send_exit(gate, caf::exit_reason::user_shutdown);
    if (joiner) caf::anon_send_exit(joiner, caf::exit_reason::user_shutdown);
    for (auto& t : threads) t.join();
    std::vector<caf::actor> sessions;
    {
      std::lock_guard lock(core->mutex);
      for (auto& w : core->sessions)
        if (auto s = w.lock()) sessions.push_back(s->actor);
    }
    for (auto& a : sessions) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }
};

WorkerNode::WorkerNode(WorkerOptions options, OperationRegistry operations)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(operations))) {}
WorkerNode::~WorkerNode() = default;
Endpoint WorkerNode::address() const { return impl_->bound; }
WorkerStats WorkerNode::stats() const {
  std::lock_guard lock(impl_->core->mutex);
  return impl_->stats_locked();
}

bool detail::WorkerAccess::wait(const WorkerNode& worker,
                                const std::function<bool(const WorkerStats&)>& done,
                                std::chrono::milliseconds timeout) {
  auto& impl = *worker.impl_;
  std::unique_lock lock(impl.core->mutex);
  return impl.core->changed.wait_for(lock, timeout, [&] { return done(impl.stats_locked()); });
}

WorkerStats WorkerNode::Impl::stats_locked() const {
  auto s = core->stats;
  for (const auto& w : core->sessions)
    if (auto session = w.lock(); session && !session->closed)
      s.tasks_outstanding += session->queue.size() + session->running.size();
  s.system_messages_dropped = core->guard->dropped();
  if (listener) {
    s.connections_authenticated = listener->accepted();
    s.connections_refused = listener->refused();
  }
  s.drop_log_lines = core->guard->log.lines();
  return s;
}

}  // namespace brigade::transport
