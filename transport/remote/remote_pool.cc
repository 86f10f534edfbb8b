// The trainer's side: one dispatcher actor that carries the network's messages to and
// from the pool's rules (detail/remote_dispatch.h: links, heartbeats, deadlines, loss,
// the calls) and does the sends they ask for, and — on rank 0 — the directory actor.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

#include "transport/remote/detail/remote_auth.h"
#include "transport/remote/detail/remote_dispatch.h"
#include "transport/remote/detail/remote_guard.h"
#include "transport/remote/detail/remote_protocol.h"
#include "transport/remote/detail/wire_messages.h"
#include "transport/remote/remote.h"

namespace brigade::transport {
namespace {

using namespace detail;
using std::chrono::milliseconds;

struct Shared;

struct DispatcherState {
  std::shared_ptr<Shared> shared;
  caf::actor directory;  // subscribed to (ours on rank 0, or a remote one)
  std::string directory_key;
  bool subscribing = false;
  detail::TimePoint next_subscribe{};
  std::uint32_t subscribe_failures = 0;  // in a row (next_retry)
  std::string directory_error;           // why it could not be reached, the last time
  static inline const char* name = "brigade.pool.dispatcher";
};

using Dispatcher = caf::stateful_actor<DispatcherState>;

// The dispatcher's side of DispatchNetwork: the session actors and keys of the links
// (with the table's mutex held, like every DispatchNetwork call).
class CafNetwork final : public DispatchNetwork {
 public:
  CafNetwork(Security security, std::shared_ptr<Guard> guard)
      : security_(std::move(security)), guard_(std::move(guard)) {}

  void start(Dispatcher* self) { self_ = self; }

  void connect(std::size_t link, const Endpoint& at) override;
  void send_task(SessionRef s, std::uint64_t id, const std::string& op,
                 std::vector<char> task) override {
    const auto& p = peers_[s.link];
    self_->send(p.session, task_atom::value, p.worker_key, id, op, std::move(task));
  }
  void send_cancel(SessionRef s, std::uint64_t id) override {
    const auto& p = peers_[s.link];
    if (p.session) caf::anon_send(p.session, cancel_atom::value, p.worker_key, id);
  }
  void send_ping(SessionRef s) override {
    const auto& p = peers_[s.link];
    self_->send(p.session, ping_atom::value, p.worker_key);
  }
  void close(SessionRef s) override {
    if (s.link >= peers_.size() || peers_[s.link].number != s.number) return;
    auto& p = peers_[s.link];
    if (p.session) self_->demonitor(p.session);
    by_key_.erase(p.trainer_key);  // late results of this session no longer match
    p = {};
  }

  /// A hello of `s` is about to be sent with `trainer_key`.
  void open(SessionRef s, const std::string& trainer_key) {
    if (peers_.size() <= s.link) peers_.resize(s.link + 1);
    close({s.link, peers_[s.link].number});
    peers_[s.link] = {s.number, {}, {}, trainer_key};
    by_key_[trainer_key] = s;
  }
  /// The worker welcomed `s`: its session actor and key.
  void attach(SessionRef s, caf::actor session, std::string worker_key) {
    auto& p = peers_[s.link];
    p.session = std::move(session);
    p.worker_key = std::move(worker_key);
  }
  /// The hello or session whose messages carry `trainer_key`; nullopt for none.
  std::optional<SessionRef> find(const std::string& trainer_key) const {
    auto it = by_key_.find(trainer_key);
    if (it == by_key_.end() || !same_secret(peers_[it->second.link].trainer_key, trainer_key))
      return std::nullopt;
    return it->second;
  }
  /// The sessions whose actor is `source`.
  std::vector<SessionRef> sessions_of(const caf::actor_addr& source) const {
    std::vector<SessionRef> out;
    for (std::size_t i = 0; i < peers_.size(); ++i)
      if (peers_[i].session && peers_[i].session.address() == source)
        out.push_back({i, peers_[i].number});
    return out;
  }

 private:
  struct Peer {
    std::uint64_t number = 0;
    caf::actor session;
    std::string worker_key, trainer_key;
  };
  Security security_;
  std::shared_ptr<Guard> guard_;
  Dispatcher* self_ = nullptr;
  std::vector<Peer> peers_;                             // by link
  std::unordered_map<std::string, SessionRef> by_key_;  // trainer key → hello or session
};

// The table and what the dispatcher, the callers and the pool's end share.
struct Shared {
  Shared(PoolOptions options, std::shared_ptr<Guard> g)
      : guard(std::move(g)), network(options.security, guard), table(std::move(options), network) {}
  // Every actor of the pool's system is guarded by it (detail/remote_guard.h).
  std::shared_ptr<Guard> guard;
  CafNetwork network;
  DispatchTable table;  // its mutex guards the network's tables and what follows
  caf::actor dispatcher;
};

void CafNetwork::connect(std::size_t link, const Endpoint& at) {
  auto* self = self_;
  detail::connect(
      self, security_, at, guard_,
      [self, link](caf::actor gate) {
        auto& sh = *self->state.shared;
        std::lock_guard lock(sh.table.mutex);
        if (!gate) return sh.table.connect_failed(link, {});
        const auto s = sh.table.connected(link);
        if (!s) return;
        const auto& o = sh.table.options();
        const auto trainer_key = random_key();
        sh.network.open(*s, trainer_key);
        const auto hello = write_hello({.protocol = kProtocolVersion,
                                        .build_id = std::string(build_id()),
                                        .token = token_digest(o.security.token),
                                        .trainer_key = trainer_key,
                                        .name = o.name,
                                        .operations = o.operations,
                                        .fingerprint = o.fingerprint,
                                        .rank = o.rank});
        // The reply-to handle too: CAF 0.17 delivers a message that came over a second
        // connection to the same node (a worker woken from SIGSTOP with its old one not yet
        // closed) with no sender.
        self->send(gate, hello_atom::value, hello, caf::actor_cast<caf::actor>(self));
      },
      [self, link](const std::string& why) {
        auto& sh = *self->state.shared;
        std::lock_guard lock(sh.table.mutex);
        sh.table.connect_failed(link, why);
      });
}

void subscribe(Dispatcher* self) {
  auto& st = self->state;
  auto& sh = *st.shared;
  st.subscribing = true;
  auto send_subscribe = [self](const caf::actor& dir) {
    auto& st = self->state;
    st.directory = dir;
    self->monitor(dir);
    const auto& o = st.shared->table.options();
    self->send(dir, subscribe_atom::value,
               write_subscribe({token_digest(o.security.token), o.name}));
  };
  const auto at = *sh.table.options().directory;
  connect(
      self, sh.table.options().security, at, sh.guard,
      [self, send_subscribe](caf::actor dir) {
        auto& st = self->state;
        {
          std::lock_guard lock(st.shared->table.mutex);
          st.shared->table.set_directory_unreachable(std::nullopt);
        }
        st.subscribing = false;
        if (!dir) {  // the port answered before the directory was published there
          const auto& t = st.shared->table;
          st.next_subscribe =
              next_retry(t.clock().now(), ++st.subscribe_failures, t.options().reconnect_interval);
          return;
        }
        st.subscribe_failures = 0;
        send_subscribe(dir);
      },
      [self, at](const std::string& why) {
        auto& st = self->state;
        const auto& t = st.shared->table;
        st.subscribing = false;
        // Soon at first (rank 0 may be about to listen), then less often.
        st.next_subscribe =
            next_retry(t.clock().now(), ++st.subscribe_failures, t.options().reconnect_interval);
        {
          std::lock_guard lock(st.shared->table.mutex);
          if (!st.directory) st.shared->table.set_directory_unreachable(why);
        }
        if (why != st.directory_error) {
          spdlog::info("brigade: the directory at {} is not reachable (trying again): {}",
                       at.to_string(), why);
        }
        st.directory_error = why;
      });
}

// With the table's mutex held.
void tick_locked(Dispatcher* self) {
  auto& st = self->state;
  auto& table = st.shared->table;
  if (table.stopping()) return;
  table.tick();
  if (table.options().directory && !st.directory && !st.subscribing &&
      table.clock().now() >= st.next_subscribe) {
    subscribe(self);
  }
}

void drop_unknown(Dispatcher* self, const std::string& what) {
  // Counted by the log (PoolStats::messages_dropped); may run with the table's mutex held.
  auto sender = self->current_sender();
  self->state.shared->guard->log.note(what, sender ? caf::to_string(sender->node()) : "");
}

// A reply from the worker session whose messages carry `tkey`.
void accept_reply(Dispatcher* self, const std::string& tkey, std::uint64_t id, CallStatus status,
                  std::string reason, SharedBytes bytes) {
  auto& sh = *self->state.shared;
  std::lock_guard lock(sh.table.mutex);
  sh.table.reply(sh.network.find(tkey), id, status, std::move(reason), std::move(bytes));
}

caf::behavior dispatcher_actor(Dispatcher* self, std::shared_ptr<Shared> shared) {
  self->state.shared = shared;
  shared->network.start(self);
  self->set_default_handler(
      [self](caf::scheduled_actor*, caf::message_view&) -> caf::result<caf::message> {
        drop_unknown(self, "an unknown message");
        return caf::none;
      });
  self->set_down_handler([self](const caf::down_msg& down) {
    auto& st = self->state;
    if (st.directory && down.source == st.directory.address()) {
      spdlog::warn("brigade: the directory is gone; its workers stay in use");
      st.directory = {};
      st.directory_key.clear();
      const auto& t = st.shared->table;
      st.next_subscribe =
          next_retry(t.clock().now(), ++st.subscribe_failures, t.options().reconnect_interval);
      return;
    }
    auto& sh = *st.shared;
    std::unique_lock lock(sh.table.mutex);
    bool ours = false;
    for (auto s : sh.network.sessions_of(down.source))
      ours = sh.table.lost(s, "its connection went down") || ours;
    lock.unlock();
    if (!ours) drop_unknown(self, "a down message about an actor it does not monitor");
  });
  self->send(self, tick_atom::value);
  return {
      [self](tick_atom) {
        {
          std::lock_guard lock(self->state.shared->table.mutex);
          tick_locked(self);
        }
        self->delayed_send(self, milliseconds(100), tick_atom::value);
      },
      [self](kick_atom) {
        auto& sh = *self->state.shared;
        std::lock_guard lock(sh.table.mutex);
        sh.table.dispatch();
      },
      [self](welcome_atom, const std::string& tkey, const std::vector<char>& bytes,
             caf::actor session) {
        auto& sh = *self->state.shared;
        std::lock_guard lock(sh.table.mutex);
        const auto s = sh.network.find(tkey);
        if (!s || !session || !sh.table.in_hello(*s))
          return drop_unknown(self, "an unexpected welcome");
        WelcomeFields w;
        try {
          w = read_welcome(bytes);
        } catch (const RemoteError& e) {
          return sh.table.bad_welcome(*s, e.what());
        }
        sh.network.attach(*s, session, w.session_key);
        self->monitor(session);
        sh.table.welcome(*s, w.window, w.threads);
      },
      [self](refuse_atom, const std::string& tkey, const std::string& why) {
        auto& sh = *self->state.shared;
        std::lock_guard lock(sh.table.mutex);
        if (auto s = sh.network.find(tkey)) sh.table.refused(*s, why);
      },
      [self](refuse_atom, const std::string& tkey, std::uint64_t id, const std::string& why) {
        accept_reply(self, tkey, id, CallStatus::lost, why, {});
      },
      [self](result_atom, const std::string& tkey, std::uint64_t id, const WirePayload& result) {
        accept_reply(self, tkey, id, CallStatus::done, {}, result.bytes);
      },
      [self](tfailed_atom, const std::string& tkey, std::uint64_t id, const std::string& why) {
        accept_reply(self, tkey, id, CallStatus::failed, why, {});
      },
      [self](started_atom, const std::string& tkey, std::uint64_t id) {
        auto& sh = *self->state.shared;
        std::lock_guard lock(sh.table.mutex);
        if (auto s = sh.network.find(tkey)) sh.table.started(*s, id);
      },
      [self](freed_atom, const std::string& tkey, std::uint64_t id) {
        auto& sh = *self->state.shared;
        std::lock_guard lock(sh.table.mutex);
        if (auto s = sh.network.find(tkey)) sh.table.freed(*s, id);
      },
      [self](pong_atom, const std::string& tkey) {
        auto& sh = *self->state.shared;
        std::lock_guard lock(sh.table.mutex);
        if (auto s = sh.network.find(tkey)) sh.table.heard(*s);
      },
      [self](workers_atom, const std::vector<char>& bytes) {
        auto& st = self->state;
        if (!st.directory ||
            self->current_sender() != caf::actor_cast<caf::strong_actor_ptr>(st.directory)) {
          return drop_unknown(self, "a worker list not from the directory");
        }
        std::vector<Endpoint> endpoints;
        try {
          const auto list = read_worker_list(bytes);
          if (st.directory_key.empty()) st.directory_key = list.directory_key;
          if (!same_secret(list.directory_key, st.directory_key))
            throw RemoteError("a wrong directory key");
          for (const auto& e : list.endpoints) endpoints.push_back(parse_endpoint(e, "directory"));
        } catch (const std::exception& e) {
          return drop_unknown(self, fmt::format("a bad worker list ({})", e.what()));
        }
        std::lock_guard lock(st.shared->table.mutex);
        st.shared->table.set_directory_workers(endpoints);
        spdlog::info("brigade: the directory lists {} worker(s)", endpoints.size());
        tick_locked(self);
      },
  };
}

// -- the directory (rank 0) --------------------------------------------------------

// The trainers that have subscribed to the directory so far (RemotePool::
// wait_for_subscribers): written by the directory actor, waited on by the job's thread.
struct SubscriberCount {
  std::mutex mutex;
  std::condition_variable_any changed;
  std::size_t count = 0;  // distinct subscribers ever, gone ones included
};

struct DirectoryState {
  std::string token;  // its digest (token_digest)
  std::shared_ptr<Guard> guard;
  std::shared_ptr<SubscriberCount> counted;
  std::set<caf::actor_addr> ever;  // every subscriber so far (a resubscription counts once)
  std::string key = random_key();
  std::map<caf::actor_addr, std::string> workers;  // joined worker → its endpoint
  std::map<caf::actor_addr, caf::actor> joiners;   // joined worker → its joiner
  std::vector<char> weights;                       // the last rank weights set (REBALANCING)
  std::map<caf::actor_addr, caf::actor> subscribers;
  static inline const char* name = "brigade.directory";
};

using Directory = caf::stateful_actor<DirectoryState>;

std::vector<char> worker_list(const DirectoryState& st) {
  std::set<std::string> unique;
  for (const auto& [a, e] : st.workers) unique.insert(e);
  return write_worker_list({st.key, {unique.begin(), unique.end()}});
}

void refuse_peer(Directory* self, const std::string& why, bool answer = true) {
  auto sender = caf::actor_cast<caf::actor>(self->current_sender());
  self->state.guard->log.note("at the directory: " + why,
                              sender ? caf::to_string(sender.node()) : "");
  if (sender && answer) self->send(sender, refuse_atom::value, why);
}

caf::behavior directory_actor(Directory* self, std::string token, std::shared_ptr<Guard> guard,
                              std::shared_ptr<SubscriberCount> counted) {
  self->state.token = token_digest(token);
  self->state.guard = std::move(guard);
  self->state.counted = std::move(counted);
  auto broadcast = [self] {
    const auto bytes = worker_list(self->state);
    for (auto& [a, s] : self->state.subscribers) self->send(s, workers_atom::value, bytes);
  };
  self->set_down_handler([self, broadcast](const caf::down_msg& down) {
    auto& st = self->state;
    const bool subscriber = st.subscribers.erase(down.source) > 0;
    auto it = st.workers.find(down.source);
    if (!subscriber && it == st.workers.end()) {
      return st.guard->log.note("a down message about an actor the directory does not monitor");
    }
    if (it != st.workers.end()) {
      spdlog::info("brigade directory: worker {} left", it->second);
      st.joiners.erase(it->first);
      st.workers.erase(it);
      broadcast();
    }
  });
  self->set_default_handler(
      [self](caf::scheduled_actor*, caf::message_view&) -> caf::result<caf::message> {
        refuse_peer(self, "an unknown message", false);
        return caf::none;
      });
  return {
      [self, broadcast](join_atom, const std::vector<char>& bytes) {
        auto sender = caf::actor_cast<caf::actor>(self->current_sender());
        std::string endpoint;
        try {
          const auto join = read_join(bytes);
          if (!same_secret(join.token, self->state.token)) throw RemoteError("a wrong job token");
          endpoint = join.endpoint;
          parse_endpoint(endpoint, "join");
        } catch (const std::exception& e) {
          return refuse_peer(self, fmt::format("a join ({})", e.what()));
        }
        if (!sender) return;
        self->monitor(sender);
        self->state.workers[sender.address()] = endpoint;
        self->state.joiners[sender.address()] = sender;
        spdlog::info("brigade directory: worker {} joined", endpoint);
        self->send(sender, joined_atom::value);
        if (!self->state.weights.empty())
          self->send(sender, weights_atom::value, self->state.weights);
        broadcast();
      },
      [self](weights_atom, const std::vector<char>& bytes) {
        try {
          if (!same_secret(read_rank_weights(bytes).token, self->state.token))
            throw RemoteError("a wrong job token");
        } catch (const std::exception& e) {
          return refuse_peer(self, fmt::format("rank weights ({})", e.what()), false);
        }
        auto& st = self->state;
        if (st.weights == bytes) return;
        st.weights = bytes;
        for (auto& [a, joiner] : st.joiners) self->send(joiner, weights_atom::value, bytes);
      },
      [self](subscribe_atom, const std::vector<char>& bytes) {
        auto sender = caf::actor_cast<caf::actor>(self->current_sender());
        try {
          if (!same_secret(read_subscribe(bytes).token, self->state.token))
            throw RemoteError("a wrong job token");
        } catch (const std::exception& e) {
          return refuse_peer(self, fmt::format("a subscription ({})", e.what()));
        }
        if (!sender) return;
        self->monitor(sender);
        auto& st = self->state;
        st.subscribers[sender.address()] = sender;
        self->send(sender, workers_atom::value, worker_list(st));
        if (st.ever.insert(sender.address()).second) {
          std::lock_guard lock(st.counted->mutex);
          st.counted->count = st.ever.size();
          st.counted->changed.notify_all();
        }
      },
  };
}

}  // namespace

struct RemotePool::Impl {
  std::shared_ptr<Guard> guard = std::make_shared<Guard>("brigade");
  std::shared_ptr<Shared> shared;
  caf::actor_system_config config;
  std::unique_ptr<caf::actor_system> system;
  caf::actor directory;
  std::shared_ptr<SubscriberCount> subscribers = std::make_shared<SubscriberCount>();
  std::unique_ptr<Listener> listener;  // the directory's, without TLS
  std::optional<Endpoint> directory_bound;

  explicit Impl(PoolOptions o)
      : guard(std::make_shared<Guard>("brigade", clock_or_steady(o.clock))) {
    if (o.security.token.empty()) throw RemoteError("remote workers need a job token");
    // With a clock of the caller's, heartbeats go by that clock alone (not also by the
    // middleman's real-time one, which a test's manual clock cannot hold back).
    configure_network(config, o.security,
                      o.clock ? std::chrono::milliseconds::zero() : o.heartbeat_timeout);
    system = std::make_unique<caf::actor_system>(config);
    if (o.host_directory && o.directory) {
      directory = spawn_guarded<DirectoryState>(
          *system, guard, [token = o.security.token, g = guard, c = subscribers](auto* self) {
            return directory_actor(self, token, g, c);
          });
      try {
        if (o.security.tls()) {
          directory_bound =
              Endpoint{o.directory->host, publish(directory, *o.directory, o.security)};
        } else {
          listener =
              std::make_unique<Listener>(*system, directory, *o.directory, o.security.token, guard);
          directory_bound = Endpoint{o.directory->host, listener->port()};
        }
      } catch (...) {
        guard->stopping = true;
        caf::anon_send_exit(directory, caf::exit_reason::user_shutdown);
        throw;
      }
      // Nothing a peer sends can end it (Guarded); if it ends anyway, say so: workers
      // can no longer join, and trainers of other ranks no longer learn of new ones.
      directory->attach_functor([g = guard](const caf::error& reason) {
        if (!g->stopping.load()) {
          spdlog::error("brigade: the directory ended ({}); new workers cannot join",
                        caf::to_string(reason));
        }
      });
      // Subscribe to our own directory at its bound address (port 0 resolved).
      o.directory = directory_bound;
      spdlog::info("brigade: the directory listens on {}", directory_bound->to_string());
    }
    shared = std::make_shared<Shared>(std::move(o), guard);
    shared->dispatcher = spawn_guarded<DispatcherState>(
        *system, guard, [s = shared](auto* self) { return dispatcher_actor(self, s); });
    // If the dispatcher ends while the pool runs (it should not: nothing a peer sends
    // can end it), every call fails at once with the reason instead of waiting forever.
    shared->dispatcher->attach_functor([w = std::weak_ptr<Shared>(shared)](const caf::error& e) {
      auto sh = w.lock();
      if (!sh) return;
      std::lock_guard lock(sh->table.mutex);
      sh->table.dispatcher_died(
          fmt::format("the remote pool's dispatcher ended ({})", caf::to_string(e)));
    });
  }

  ~Impl() {
    listener.reset();
    guard->stopping = true;  // our own exits from here on
    {
      std::lock_guard lock(shared->table.mutex);
      shared->table.shut_down();
    }
    caf::anon_send_exit(shared->dispatcher, caf::exit_reason::user_shutdown);
    if (directory) caf::anon_send_exit(directory, caf::exit_reason::user_shutdown);
  }
};

void quiet_idle_threads(caf::actor_system_config& config) {
  config.set("work-stealing.moderate-poll-attempts", std::size_t{0});
  config.set("work-stealing.relaxed-sleep-duration", caf::timespan{milliseconds(10)});
}

RemotePool::RemotePool(PoolOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
RemotePool::~RemotePool() = default;

CallResult RemotePool::call(std::string_view operation, std::vector<char> task,
                            std::stop_token stop, std::string_view avoid) {
  auto& sh = *impl_->shared;
  auto call = std::make_shared<Call>();
  call->op = std::string(operation);
  call->task = std::move(task);
  call->avoid = std::string(avoid);
  std::unique_lock lock(sh.table.mutex);
  if (!sh.table.submit(call)) return std::move(call->result);
  caf::anon_send(sh.dispatcher, kick_atom::value);
  call->done.wait(lock, stop, [&] { return call->finished; });
  if (!call->finished) {
    // Stopped: forget the attempt (a result that still comes is dropped as late).
    sh.table.abandon(call);
    return {CallStatus::stopped, {}, call->result.worker, "stopped"};
  }
  return std::move(call->result);
}

bool RemotePool::wait_for_worker(std::chrono::milliseconds timeout, std::stop_token stop) {
  auto& t = impl_->shared->table;
  std::unique_lock lock(t.mutex);
  return t.changed.wait_for(lock, stop, timeout, [&] { return t.live() > 0; });
}

std::size_t RemotePool::live_workers() const {
  std::lock_guard lock(impl_->shared->table.mutex);
  return impl_->shared->table.live();
}

std::vector<std::string> RemotePool::lost_workers() const {
  std::lock_guard lock(impl_->shared->table.mutex);
  return impl_->shared->table.lost_workers();
}

std::optional<std::chrono::steady_clock::time_point> RemotePool::no_worker_since() const {
  std::lock_guard lock(impl_->shared->table.mutex);
  return impl_->shared->table.no_worker_since();
}

PoolStats RemotePool::stats() const {
  std::lock_guard lock(impl_->shared->table.mutex);
  auto s = impl_->shared->table.stats();
  s.messages_dropped = impl_->guard->log.total();
  if (impl_->listener) s.connections_refused = impl_->listener->refused();
  return s;
}

bool detail::PoolAccess::wait(const RemotePool& pool,
                              const std::function<bool(const DispatchTable&)>& done,
                              std::chrono::milliseconds timeout) {
  auto& t = pool.impl_->shared->table;
  std::unique_lock lock(t.mutex);
  return t.changed.wait_for(lock, timeout, [&] { return done(t); });
}

std::optional<Endpoint> RemotePool::directory_address() const { return impl_->directory_bound; }

bool RemotePool::wait_for_subscribers(std::size_t count, std::chrono::milliseconds timeout,
                                      std::stop_token stop) {
  if (!impl_->directory) return true;
  auto& c = *impl_->subscribers;
  std::unique_lock lock(c.mutex);
  return c.changed.wait_for(lock, stop, timeout, [&] { return c.count >= count; });
}

std::size_t RemotePool::subscribers() const {
  if (!impl_->directory) return 0;
  std::lock_guard lock(impl_->subscribers->mutex);
  return impl_->subscribers->count;
}

void RemotePool::set_rank_weights(std::vector<std::uint32_t> weights) {
  if (!impl_->directory) return;
  const auto& token = impl_->shared->table.options().security.token;  // fixed at the start
  caf::anon_send(impl_->directory, weights_atom::value,
                 write_rank_weights({token_digest(token), std::move(weights)}));
}

std::optional<std::string> RemotePool::directory_unreachable() const {
  std::lock_guard lock(impl_->shared->table.mutex);
  return impl_->shared->table.directory_unreachable();
}

}  // namespace brigade::transport
