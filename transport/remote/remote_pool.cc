// The trainer's side: one dispatcher actor owning the links to the workers (connect,
// hello, heartbeats, deadlines, loss), the calls waiting for a worker, and — on rank 0
// — the directory actor.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

#include "transport/remote/detail/remote_auth.h"
#include "transport/remote/detail/remote_guard.h"
#include "transport/remote/detail/remote_protocol.h"
#include "transport/remote/detail/wire_messages.h"
#include "transport/remote/remote.h"

namespace brigade::transport {
namespace {

using namespace detail;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

long long ms(Clock::duration d) { return std::chrono::duration_cast<milliseconds>(d).count(); }

struct Call {
  std::uint64_t id = 0;
  std::string op;
  std::vector<char> task;
  std::string avoid;
  std::size_t link = 0;  // while outstanding
  Clock::time_point sent{};
  bool started = false;  // the worker said a thread began running it
  bool finished = false;
  CallResult result;
  std::condition_variable_any done;  // its caller waits here (with Shared::mutex)
};

// One worker endpoint and its session, if any.
struct Link {
  enum class Phase { idle, connecting, hello, live };
  Endpoint at;
  std::string name;  // "host:port"
  Phase phase = Phase::idle;
  bool wanted = true;  // false: left the directory (not reconnected)
  Clock::time_point next_attempt{};
  Clock::time_point hello_sent{}, last_heard{}, last_ping{};
  caf::actor session;
  std::string worker_key, trainer_key;
  std::uint32_t window = 0;
  std::set<std::uint64_t> outstanding;
  // Tasks that passed their deadline after they had started and whose thread has not
  // been freed (a read that never returns): while any, the worker is suspect — live
  // (it answers heartbeats) but out of the rotation and not counted in Shared::live.
  std::set<std::uint64_t> stuck;
  bool suspect = false;
  Clock::time_point parole{};  // with no stuck task: back in the rotation then
  bool ever_live = false;
  std::string last_error;
  WorkerFigures figures;
  std::vector<float> latencies_ms;  // the last kLatencies tasks
};

constexpr std::size_t kLatencies = 4096;

struct Shared {
  PoolOptions options;
  mutable std::mutex mutex;
  std::condition_variable_any changed;  // a worker came or went
  std::deque<std::shared_ptr<Call>> pending;
  std::map<std::uint64_t, std::shared_ptr<Call>> outstanding;
  std::vector<Link> links;
  std::unordered_map<std::string, std::size_t> by_key;  // trainer key → link (hello, live)
  std::uint64_t next_id = 1;
  bool stopping = false;
  std::size_t live = 0;
  std::optional<Clock::time_point> no_worker_since = Clock::now();
  PoolStats stats;
  caf::actor dispatcher;
  // Every actor of the pool's system is guarded by it (detail/remote_guard.h).
  std::shared_ptr<Guard> guard = std::make_shared<Guard>("brigade");
  std::string dead;  // why the dispatcher ended, if it did while the pool runs
  std::optional<std::string> directory_unreachable;  // why, until it has been reached

  // With `mutex` held.
  void finish(const std::shared_ptr<Call>& call, CallStatus status, std::string reason,
              std::vector<char> bytes = {}) {
    call->finished = true;
    call->result.status = status;
    call->result.reason = std::move(reason);
    call->result.bytes = std::move(bytes);
    call->done.notify_one();
  }

  // The link whose session (or hello) `key` names, in `phase`; null for none.
  Link* find(const std::string& key, Link::Phase phase) {
    auto it = by_key.find(key);
    if (it == by_key.end()) return nullptr;
    auto& l = links[it->second];
    return l.phase == phase && same_secret(l.trainer_key, key) ? &l : nullptr;
  }
  void forget_key(Link& l) {
    by_key.erase(l.trainer_key);
    l.trainer_key.clear();  // late results of this session no longer match
  }
};

struct DispatcherState {
  std::shared_ptr<Shared> shared;
  caf::actor directory;  // subscribed to (ours on rank 0, or a remote one)
  std::string directory_key;
  bool subscribing = false;
  Clock::time_point next_subscribe{};
  std::string directory_error;  // why it could not be reached, the last time
  static inline const char* name = "brigade.pool.dispatcher";
};

using Dispatcher = caf::stateful_actor<DispatcherState>;

// -- the dispatcher's work, with Shared::mutex held --------------------------------

void lose(Dispatcher* self, Shared& sh, std::size_t index, const std::string& reason) {
  auto& l = sh.links[index];
  if (l.phase == Link::Phase::live) {
    if (!l.suspect) --sh.live;
    spdlog::warn("brigade: lost worker {}: {} ({} tasks outstanding, sent again)", l.name, reason,
                 l.outstanding.size());
    l.last_error = reason;
    if (sh.live == 0) sh.no_worker_since = Clock::now();
  }
  if (l.session) self->demonitor(l.session);
  l.session = {};
  l.phase = Link::Phase::idle;
  l.suspect = false;
  l.stuck.clear();
  l.next_attempt = Clock::now() + sh.options.reconnect_interval;
  sh.forget_key(l);
  for (auto id : l.outstanding) {
    auto it = sh.outstanding.find(id);
    if (it == sh.outstanding.end()) continue;
    ++l.figures.lost;
    ++sh.stats.lost;
    it->second->result.started = it->second->started;
    sh.finish(it->second, CallStatus::lost, fmt::format("worker {}: {}", l.name, reason));
    it->second->result.worker = l.name;
    sh.outstanding.erase(it);
  }
  l.outstanding.clear();
  if (sh.live == 0) {
    for (auto& c : sh.pending) sh.finish(c, CallStatus::no_workers, "no worker is live");
    sh.pending.clear();
  }
  sh.changed.notify_all();
}

void dispatch(Shared& sh, caf::event_based_actor* self);

// A suspect worker back in the rotation (with Shared::mutex held).
void readmit(caf::event_based_actor* self, Shared& sh, Link& l, const char* why) {
  if (!l.suspect) return;
  l.suspect = false;
  ++sh.live;
  sh.no_worker_since.reset();
  spdlog::info("brigade: worker {} is back in the rotation ({})", l.name, why);
  sh.changed.notify_all();
  dispatch(sh, self);
}

void dispatch(Shared& sh, caf::event_based_actor* self) {
  while (!sh.pending.empty()) {
    auto& call = sh.pending.front();
    std::optional<std::size_t> best;
    std::int64_t best_free = 0;
    for (std::size_t i = 0; i < sh.links.size(); ++i) {
      const auto& l = sh.links[i];
      if (l.phase != Link::Phase::live || l.suspect) continue;
      std::int64_t free = std::int64_t(l.window) - std::int64_t(l.outstanding.size());
      if (free <= 0) continue;
      if (!call->avoid.empty() && l.name == call->avoid && sh.live > 1) free -= 1'000'000;
      if (!best || free > best_free) {
        best = i;
        best_free = free;
      }
    }
    if (!best) return;  // every worker's window is full: the call waits its turn
    auto& l = sh.links[*best];
    call->link = *best;
    call->sent = Clock::now();
    call->result.worker = l.name;
    l.outstanding.insert(call->id);
    sh.outstanding.emplace(call->id, call);
    self->send(l.session, task_atom::value, l.worker_key, call->id, call->op,
               std::move(call->task));
    sh.pending.pop_front();
  }
}

void accept_reply(Dispatcher* self, const std::string& tkey, std::uint64_t id, CallStatus status,
                  std::string reason, std::vector<char> bytes) {
  auto& sh = *self->state.shared;
  std::lock_guard lock(sh.mutex);
  auto* link = sh.find(tkey, Link::Phase::live);
  if (!link || !link->outstanding.count(id)) {
    ++sh.stats.late_dropped;  // a lost attempt's late result, or a forgery
    // A task stuck past its deadline that finished after all: its thread is free.
    if (link && link->stuck.erase(id) && link->stuck.empty())
      readmit(self, sh, *link, "its stuck task ended");
    return;
  }
  link->outstanding.erase(id);
  link->last_heard = Clock::now();
  auto it = sh.outstanding.find(id);
  auto call = it->second;
  sh.outstanding.erase(it);
  if (status == CallStatus::done) {
    const double latency =
        std::chrono::duration<double, std::milli>(Clock::now() - call->sent).count();
    if (link->latencies_ms.size() >= kLatencies)
      link->latencies_ms.erase(link->latencies_ms.begin(),
                               link->latencies_ms.begin() + kLatencies / 2);
    link->latencies_ms.push_back(static_cast<float>(latency));
    ++link->figures.tasks;
    link->figures.bytes += bytes.size();
    ++sh.stats.done;
    sh.stats.bytes += bytes.size();
  } else if (status == CallStatus::failed) {
    ++sh.stats.failed;
  } else {
    ++link->figures.lost;
    ++sh.stats.lost;
  }
  sh.finish(call, status, std::move(reason), std::move(bytes));
  dispatch(sh, self);
}

void connect_link(Dispatcher* self, std::size_t index) {
  auto& sh = *self->state.shared;
  auto& l = sh.links[index];
  l.phase = Link::Phase::connecting;
  const auto at = l.at;
  connect(
      self, sh.options.security, at, sh.guard,
      [self, index](caf::actor gate) {
        auto& sh = *self->state.shared;
        std::lock_guard lock(sh.mutex);
        auto& l = sh.links[index];
        if (l.phase != Link::Phase::connecting || !gate) {
          l.phase = Link::Phase::idle;
          l.next_attempt = Clock::now() + sh.options.reconnect_interval;
          return;
        }
        l.trainer_key = random_key();
        sh.by_key[l.trainer_key] = index;
        const auto hello = write_hello({.protocol = kProtocolVersion,
                                        .build_id = std::string(build_id()),
                                        .token = token_digest(sh.options.security.token),
                                        .trainer_key = l.trainer_key,
                                        .name = sh.options.name,
                                        .operations = sh.options.operations,
                                        .fingerprint = sh.options.fingerprint});
        l.phase = Link::Phase::hello;
        l.hello_sent = Clock::now();
        // The reply-to handle too: CAF 0.17 delivers a message that came over a second
        // connection to the same node (a worker woken from SIGSTOP with its old one not yet
        // closed) with no sender.
        self->send(gate, hello_atom::value, hello, caf::actor_cast<caf::actor>(self));
      },
      [self, index](const std::string& why) {
        auto& sh = *self->state.shared;
        std::lock_guard lock(sh.mutex);
        auto& l = sh.links[index];
        l.phase = Link::Phase::idle;
        l.next_attempt = Clock::now() + sh.options.reconnect_interval;
        if (why != l.last_error) spdlog::info("brigade: cannot reach worker {}: {}", l.name, why);
        l.last_error = why;
      });
}

std::size_t add_link(Shared& sh, const Endpoint& at) {
  for (std::size_t i = 0; i < sh.links.size(); ++i) {
    if (sh.links[i].at == at) {
      sh.links[i].wanted = true;
      return i;
    }
  }
  Link l;
  l.at = at;
  l.name = at.to_string();
  l.figures.name = l.name;
  sh.links.push_back(std::move(l));
  return sh.links.size() - 1;
}

void subscribe(Dispatcher* self) {
  auto& st = self->state;
  auto& sh = *st.shared;
  st.subscribing = true;
  auto send_subscribe = [self](const caf::actor& dir) {
    auto& st = self->state;
    st.directory = dir;
    self->monitor(dir);
    self->send(dir, subscribe_atom::value,
               write_subscribe(
                   {token_digest(st.shared->options.security.token), st.shared->options.name}));
  };
  const auto at = *sh.options.directory;
  connect(
      self, sh.options.security, at, sh.guard,
      [self, send_subscribe](caf::actor dir) {
        auto& st = self->state;
        {
          std::lock_guard lock(st.shared->mutex);
          st.shared->directory_unreachable.reset();
        }
        st.subscribing = false;
        if (!dir) {  // the port answered before the directory was published there
          st.next_subscribe = Clock::now() + st.shared->options.reconnect_interval;
          return;
        }
        send_subscribe(dir);
      },
      [self, at](const std::string& why) {
        auto& st = self->state;
        st.subscribing = false;
        st.next_subscribe = Clock::now() + st.shared->options.reconnect_interval;
        {
          std::lock_guard lock(st.shared->mutex);
          if (!st.directory) st.shared->directory_unreachable = why;
        }
        if (why != st.directory_error) {
          spdlog::info("brigade: the directory at {} is not reachable (trying again): {}",
                       at.to_string(), why);
        }
        st.directory_error = why;
      });
}

// With Shared::mutex held.
void tick_locked(Dispatcher* self) {
  auto& st = self->state;
  auto& sh = *st.shared;
  const auto now = Clock::now();
  if (sh.stopping) return;
  for (std::size_t i = 0; i < sh.links.size(); ++i) {
    auto& l = sh.links[i];
    switch (l.phase) {
      case Link::Phase::idle:
        if (l.wanted && now >= l.next_attempt) connect_link(self, i);
        break;
      case Link::Phase::connecting:
        break;  // the request has its own timeout
      case Link::Phase::hello:
        if (now - l.hello_sent > std::chrono::seconds(5)) {
          l.phase = Link::Phase::idle;
          l.last_error = "no answer to the hello within 5 s";
          l.next_attempt = now + sh.options.reconnect_interval;
          sh.forget_key(l);
        }
        break;
      case Link::Phase::live:
        if (now - l.last_heard > sh.options.heartbeat_timeout) {
          lose(self, sh, i, fmt::format("no heartbeat for {} ms", ms(now - l.last_heard)));
          break;
        }
        if (now - l.last_ping >= sh.options.heartbeat_interval) {
          l.last_ping = now;
          self->send(l.session, ping_atom::value, l.worker_key);
        }
        if (l.suspect && l.stuck.empty() && now >= l.parole) readmit(self, sh, l, "on parole");
        break;
    }
  }
  // Deadlines: a task past task_timeout is lost on its worker (which is told to cancel).
  std::vector<std::uint64_t> expired;
  for (auto& [id, call] : sh.outstanding)
    if (now - call->sent > sh.options.task_timeout) expired.push_back(id);
  for (auto id : expired) {
    auto call = sh.outstanding[id];
    sh.outstanding.erase(id);
    auto& l = sh.links[call->link];
    l.outstanding.erase(id);
    if (l.session) self->send(l.session, cancel_atom::value, l.worker_key, id);
    ++l.figures.lost;
    ++sh.stats.lost;
    call->result.started = call->started;
    if (l.phase == Link::Phase::live) {
      // Started: out until that thread is free. Never started (every thread of the worker
      // busy or stuck): out for one task_timeout, then given one more chance (parole).
      if (call->started) l.stuck.insert(id);
      l.parole = now + sh.options.task_timeout;
      if (!l.suspect) {
        l.suspect = true;
        --sh.live;
        spdlog::warn(
            "brigade: worker {} is suspect: a task passed its deadline of {} ms {}; no new "
            "task until {}",
            l.name, ms(sh.options.task_timeout),
            call->started ? "while running" : "before it started",
            call->started ? "its thread is free" : "a task of it starts, or for a deadline's time");
        if (sh.live == 0) {
          sh.no_worker_since = now;
          for (auto& c : sh.pending) sh.finish(c, CallStatus::no_workers, "no worker is live");
          sh.pending.clear();
        }
        sh.changed.notify_all();
      }
    }
    sh.finish(call, CallStatus::lost,
              fmt::format("worker {}: the task passed its deadline of {} ms", l.name,
                          ms(sh.options.task_timeout)));
  }
  if (!expired.empty()) dispatch(sh, self);
  if (sh.options.directory && !st.directory && !st.subscribing && now >= st.next_subscribe) {
    subscribe(self);
  }
}

void tick(Dispatcher* self) {
  std::lock_guard lock(self->state.shared->mutex);
  tick_locked(self);
}

void drop_unknown(Dispatcher* self, const std::string& what) {
  // Counted by the log (PoolStats::messages_dropped); may run with Shared::mutex held.
  auto sender = self->current_sender();
  self->state.shared->guard->log.note(what, sender ? caf::to_string(sender->node()) : "");
}

caf::behavior dispatcher_actor(Dispatcher* self, std::shared_ptr<Shared> shared) {
  self->state.shared = shared;
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
      st.next_subscribe = Clock::now() + st.shared->options.reconnect_interval;
      return;
    }
    auto& sh = *st.shared;
    std::unique_lock lock(sh.mutex);
    bool ours = false;
    for (std::size_t i = 0; i < sh.links.size(); ++i) {
      if (sh.links[i].session && sh.links[i].session.address() == down.source) {
        ours = true;
        lose(self, sh, i, "its connection went down");
      }
    }
    lock.unlock();
    if (!ours) drop_unknown(self, "a down message about an actor it does not monitor");
  });
  self->send(self, tick_atom::value);
  return {
      [self](tick_atom) {
        tick(self);
        self->delayed_send(self, milliseconds(100), tick_atom::value);
      },
      [self](kick_atom) {
        auto& sh = *self->state.shared;
        std::lock_guard lock(sh.mutex);
        dispatch(sh, self);
      },
      [self](welcome_atom, const std::string& tkey, const std::vector<char>& bytes,
             caf::actor session) {
        auto& sh = *self->state.shared;
        std::lock_guard lock(sh.mutex);
        auto* l = sh.find(tkey, Link::Phase::hello);
        if (!l || !session) return drop_unknown(self, "an unexpected welcome");
        try {
          const auto w = read_welcome(bytes);
          l->worker_key = w.session_key;
          l->window = std::max<std::uint32_t>(1, w.window);
        } catch (const RemoteError& e) {
          l->phase = Link::Phase::idle;
          l->last_error = e.what();
          l->next_attempt = Clock::now() + sh.options.reconnect_interval;
          sh.forget_key(*l);
          return;
        }
        l->session = session;
        self->monitor(session);
        l->phase = Link::Phase::live;
        l->last_heard = l->last_ping = Clock::now();
        l->ever_live = true;
        ++l->figures.sessions;
        ++sh.live;
        sh.no_worker_since.reset();
        spdlog::info("brigade: worker {} is live (window {})", l->name, l->window);
        sh.changed.notify_all();
        dispatch(sh, self);
      },
      [self](refuse_atom, const std::string& tkey, const std::string& why) {
        auto& sh = *self->state.shared;
        std::lock_guard lock(sh.mutex);
        if (auto* l = sh.find(tkey, Link::Phase::hello)) {
          const auto error = "refused: " + why;
          if (l->last_error != error)
            spdlog::error("brigade: worker {} refused this trainer: {}", l->name, why);
          l->last_error = error;
          l->phase = Link::Phase::idle;
          l->next_attempt = Clock::now() + 5 * sh.options.reconnect_interval;
          sh.forget_key(*l);
        }
      },
      [self](refuse_atom, const std::string& tkey, std::uint64_t id, const std::string& why) {
        accept_reply(self, tkey, id, CallStatus::lost, why, {});
      },
      [self](result_atom, const std::string& tkey, std::uint64_t id, std::vector<char>& bytes) {
        accept_reply(self, tkey, id, CallStatus::done, {}, std::move(bytes));
      },
      [self](tfailed_atom, const std::string& tkey, std::uint64_t id, const std::string& why) {
        accept_reply(self, tkey, id, CallStatus::failed, why, {});
      },
      [self](started_atom, const std::string& tkey, std::uint64_t id) {
        auto& sh = *self->state.shared;
        std::lock_guard lock(sh.mutex);
        auto* l = sh.find(tkey, Link::Phase::live);
        if (!l || !l->outstanding.count(id)) return;
        l->last_heard = Clock::now();
        if (auto it = sh.outstanding.find(id); it != sh.outstanding.end())
          it->second->started = true;
        // A thread took a task: only a stuck one keeps it out.
        if (l->stuck.empty()) readmit(self, sh, *l, "a task started");
      },
      [self](freed_atom, const std::string& tkey, std::uint64_t id) {
        auto& sh = *self->state.shared;
        std::lock_guard lock(sh.mutex);
        auto* l = sh.find(tkey, Link::Phase::live);
        if (!l || !l->stuck.erase(id) || !l->stuck.empty()) return;
        readmit(self, sh, *l, "its stuck task ended");
      },
      [self](pong_atom, const std::string& tkey) {
        auto& sh = *self->state.shared;
        std::lock_guard lock(sh.mutex);
        if (auto* l = sh.find(tkey, Link::Phase::live)) l->last_heard = Clock::now();
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
        auto& sh = *st.shared;
        std::lock_guard lock(sh.mutex);
        for (auto& l : sh.links)
          l.wanted = std::find(sh.options.workers.begin(), sh.options.workers.end(), l.at) !=
                     sh.options.workers.end();
        for (const auto& e : endpoints) add_link(sh, e);
        spdlog::info("brigade: the directory lists {} worker(s)", endpoints.size());
        tick_locked(self);
      },
  };
}

// -- the directory (rank 0) --------------------------------------------------------

struct DirectoryState {
  std::string token;  // its digest (token_digest)
  std::shared_ptr<Guard> guard;
  std::string key = random_key();
  std::map<caf::actor_addr, std::string> workers;  // joined worker → its endpoint
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

caf::behavior directory_actor(Directory* self, std::string token, std::shared_ptr<Guard> guard) {
  self->state.token = token_digest(token);
  self->state.guard = std::move(guard);
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
        spdlog::info("brigade directory: worker {} joined", endpoint);
        self->send(sender, joined_atom::value);
        broadcast();
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
        self->state.subscribers[sender.address()] = sender;
        self->send(sender, workers_atom::value, worker_list(self->state));
      },
  };
}

}  // namespace

struct RemotePool::Impl {
  std::shared_ptr<Shared> shared = std::make_shared<Shared>();
  caf::actor_system_config config;
  std::unique_ptr<caf::actor_system> system;
  caf::actor directory;
  std::unique_ptr<Listener> listener;  // the directory's, without TLS
  std::optional<Endpoint> directory_bound;

  explicit Impl(PoolOptions o) {
    if (o.security.token.empty()) throw RemoteError("remote workers need a job token");
    configure_network(config, o.security, o.heartbeat_timeout);
    system = std::make_unique<caf::actor_system>(config);
    if (o.host_directory && o.directory) {
      directory = spawn_guarded<DirectoryState>(
          *system, shared->guard, [token = o.security.token, g = shared->guard](auto* self) {
            return directory_actor(self, token, g);
          });
      try {
        if (o.security.tls()) {
          directory_bound =
              Endpoint{o.directory->host, publish(directory, *o.directory, o.security)};
        } else {
          listener = std::make_unique<Listener>(*system, directory, *o.directory, o.security.token,
                                                shared->guard);
          directory_bound = Endpoint{o.directory->host, listener->port()};
        }
      } catch (...) {
        shared->guard->stopping = true;
        caf::anon_send_exit(directory, caf::exit_reason::user_shutdown);
        throw;
      }
      // Nothing a peer sends can end it (Guarded); if it ends anyway, say so: workers
      // can no longer join, and trainers of other ranks no longer learn of new ones.
      directory->attach_functor([g = shared->guard](const caf::error& reason) {
        if (!g->stopping.load()) {
          spdlog::error("brigade: the directory ended ({}); new workers cannot join",
                        caf::to_string(reason));
        }
      });
      // Subscribe to our own directory at its bound address (port 0 resolved).
      o.directory = directory_bound;
      spdlog::info("brigade: the directory listens on {}", directory_bound->to_string());
    }
    for (const auto& w : o.workers) add_link(*shared, w);
    shared->options = std::move(o);
    shared->dispatcher = spawn_guarded<DispatcherState>(
        *system, shared->guard, [s = shared](auto* self) { return dispatcher_actor(self, s); });
    // If the dispatcher ends while the pool runs (it should not: nothing a peer sends
    // can end it), every call fails at once with the reason instead of waiting forever.
    shared->dispatcher->attach_functor([w = std::weak_ptr<Shared>(shared)](const caf::error& e) {
      auto sh = w.lock();
      if (!sh) return;
      std::lock_guard lock(sh->mutex);
      if (sh->stopping) return;
      sh->dead = fmt::format("the remote pool's dispatcher ended ({})", caf::to_string(e));
      spdlog::error("brigade: {}", sh->dead);
      for (auto& c : sh->pending) sh->finish(c, CallStatus::no_workers, sh->dead);
      for (auto& [id, c] : sh->outstanding) sh->finish(c, CallStatus::no_workers, sh->dead);
      sh->pending.clear();
      sh->outstanding.clear();
      if (sh->live > 0) sh->no_worker_since = Clock::now();
      sh->live = 0;
      sh->changed.notify_all();
    });
  }

  ~Impl() {
    listener.reset();
    shared->guard->stopping = true;  // our own exits from here on
    {
      std::lock_guard lock(shared->mutex);
      shared->stopping = true;
      for (auto& c : shared->pending) shared->finish(c, CallStatus::stopped, "the pool stopped");
      for (auto& [id, c] : shared->outstanding)
        shared->finish(c, CallStatus::stopped, "the pool stopped");
      shared->pending.clear();
      shared->outstanding.clear();
    }
    caf::anon_send_exit(shared->dispatcher, caf::exit_reason::user_shutdown);
    if (directory) caf::anon_send_exit(directory, caf::exit_reason::user_shutdown);
  }
};

RemotePool::RemotePool(PoolOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
RemotePool::~RemotePool() = default;

CallResult RemotePool::call(std::string_view operation, std::vector<char> task,
                            std::stop_token stop, std::string_view avoid) {
  auto& sh = *impl_->shared;
  auto call = std::make_shared<Call>();
  call->op = std::string(operation);
  call->task = std::move(task);
  call->avoid = std::string(avoid);
  std::unique_lock lock(sh.mutex);
  if (sh.stopping) return {CallStatus::stopped, {}, {}, "the pool stopped"};
  if (!sh.dead.empty()) return {CallStatus::no_workers, {}, {}, sh.dead};
  if (sh.live == 0) return {CallStatus::no_workers, {}, {}, "no worker is live"};
  call->id = sh.next_id++;
  ++sh.stats.calls;
  sh.pending.push_back(call);
  caf::anon_send(sh.dispatcher, kick_atom::value);
  call->done.wait(lock, stop, [&] { return call->finished; });
  if (!call->finished) {
    // Stopped: forget the attempt (a result that still comes is dropped as late).
    std::erase(sh.pending, call);
    if (sh.outstanding.erase(call->id)) {
      auto& l = sh.links[call->link];
      l.outstanding.erase(call->id);
      if (l.session) caf::anon_send(l.session, cancel_atom::value, l.worker_key, call->id);
    }
    return {CallStatus::stopped, {}, call->result.worker, "stopped"};
  }
  return std::move(call->result);
}

bool RemotePool::wait_for_worker(std::chrono::milliseconds timeout, std::stop_token stop) {
  auto& sh = *impl_->shared;
  std::unique_lock lock(sh.mutex);
  return sh.changed.wait_for(lock, stop, timeout, [&] { return sh.live > 0; });
}

std::size_t RemotePool::live_workers() const {
  std::lock_guard lock(impl_->shared->mutex);
  return impl_->shared->live;
}

std::vector<std::string> RemotePool::lost_workers() const {
  std::lock_guard lock(impl_->shared->mutex);
  std::vector<std::string> out;
  for (const auto& l : impl_->shared->links) {
    if (l.phase == Link::Phase::live && l.suspect) {
      out.push_back(fmt::format("{} (suspect: a task stuck past its deadline)", l.name));
      continue;
    }
    if (l.phase == Link::Phase::live) continue;
    if (l.ever_live || !l.last_error.empty())
      out.push_back(
          fmt::format("{} ({})", l.name, l.last_error.empty() ? "not reached" : l.last_error));
  }
  return out;
}

std::optional<std::chrono::steady_clock::time_point> RemotePool::no_worker_since() const {
  std::lock_guard lock(impl_->shared->mutex);
  return impl_->shared->no_worker_since;
}

PoolStats RemotePool::stats() const {
  std::lock_guard lock(impl_->shared->mutex);
  auto s = impl_->shared->stats;
  s.live_workers = impl_->shared->live;
  s.messages_dropped = impl_->shared->guard->log.total();
  if (impl_->listener) s.connections_refused = impl_->listener->refused();
  for (const auto& l : impl_->shared->links) {
    auto f = l.figures;
    f.live = l.phase == Link::Phase::live && !l.suspect;
    auto lat = l.latencies_ms;
    if (!lat.empty()) {
      std::sort(lat.begin(), lat.end());
      f.p50_ms = lat[lat.size() / 2];
      f.p99_ms = lat[std::min(lat.size() - 1, lat.size() * 99 / 100)];
    }
    s.workers.push_back(std::move(f));
  }
  return s;
}

std::optional<Endpoint> RemotePool::directory_address() const { return impl_->directory_bound; }

std::optional<std::string> RemotePool::directory_unreachable() const {
  std::lock_guard lock(impl_->shared->mutex);
  return impl_->shared->directory_unreachable;
}

}  // namespace brigade::transport
