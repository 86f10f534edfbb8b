// The worker node: its actors (detail/worker_actors.h) on an actor system of its own,
// published behind the token's handshake (or TLS), and a fixed set of operation threads
// running the tasks the worker's rules (detail/worker_table.h) hand out.
#include <spdlog/spdlog.h>

#include <thread>

#include "transport/remote/detail/remote_auth.h"
#include "transport/remote/detail/remote_dispatch.h"
#include "transport/remote/detail/worker_actors.h"
#include "transport/remote/remote.h"

namespace brigade::transport {

using namespace detail;

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
    // With a clock of the caller's, heartbeats go by that clock alone (not also by the
    // middleman's real-time one, which a test's manual clock cannot hold back).
    configure_network(config, o.security,
                      o.clock ? std::chrono::milliseconds::zero() : o.heartbeat_timeout);
    system = std::make_unique<caf::actor_system>(config);
    gate = spawn_gate(*system, core);
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
      joiner = spawn_joiner(*system, core, *o.join, adv.to_string());
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
WorkerServed WorkerNode::take_served() {
  std::lock_guard lock(impl_->core->table.mutex);
  return impl_->core->table.take_served();
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
