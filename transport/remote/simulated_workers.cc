#include "transport/remote/simulated_workers.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>

#include "transport/remote/detail/remote_auth.h"
#include "transport/remote/detail/remote_protocol.h"
#include "transport/remote/detail/wire_messages.h"

namespace brigade::transport {
namespace {

using namespace detail;
using Clock = std::chrono::steady_clock;

// One worker's figures (atomics: written in the simulated system's threads).
struct SimFigures {
  std::atomic<std::int64_t> busy_ns{0};
  std::atomic<std::uint64_t> tasks{0};
};

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

struct SimSessionState {
  SimulatedWorkerOptions options;
  std::shared_ptr<SimFigures> figures;
  std::string key, trainer_key;
  caf::actor trainer;
  std::deque<std::pair<std::uint64_t, std::int64_t>> queue;  // id, arrival (ns)
  std::uint32_t free_slots = 0;
  static inline const char* name = "brigade.simulated.session";
};

using SimSession = caf::stateful_actor<SimSessionState>;

void start_queued(SimSession* self) {
  auto& st = self->state;
  while (st.free_slots > 0 && !st.queue.empty()) {
    auto [id, arrived] = st.queue.front();
    st.queue.pop_front();
    --st.free_slots;
    self->delayed_send(self, st.options.delay, done_atom::value, id, arrived, now_ns());
  }
}

caf::behavior sim_session(SimSession* self, SimulatedWorkerOptions options,
                          std::shared_ptr<SimFigures> figures, std::string key,
                          std::string trainer_key, caf::actor trainer) {
  auto& st = self->state;
  st.options = options;
  st.figures = std::move(figures);
  st.key = std::move(key);
  st.trainer_key = std::move(trainer_key);
  st.trainer = std::move(trainer);
  st.free_slots = options.threads;
  return {
      [self](task_atom, const std::string& k, std::uint64_t id, const std::string&,
             const std::vector<char>&) {
        if (!same_secret(k, self->state.key)) return;
        self->state.queue.emplace_back(id, now_ns());
        start_queued(self);
      },
      [self](done_atom, std::uint64_t id, std::int64_t arrived, std::int64_t started) {
        if (self->current_sender().get() != self->ctrl()) return;
        auto& st = self->state;
        const auto now = now_ns();
        st.figures->busy_ns += now - started;
        ++st.figures->tasks;
        std::vector<char> result(std::max<std::size_t>(8, st.options.result_bytes));
        const std::int64_t residence = now - arrived;
        std::memcpy(result.data(), &residence, sizeof residence);
        self->send(st.trainer, result_atom::value, st.trainer_key, id,
                   WirePayload{SharedBytes(std::move(result))});
        ++st.free_slots;
        start_queued(self);
      },
      [self](ping_atom, const std::string& k) {
        if (same_secret(k, self->state.key))
          self->send(self->state.trainer, pong_atom::value, self->state.trainer_key);
      },
      [](cancel_atom, const std::string&, std::uint64_t) {},
  };
}

// The gate: a hello opens a session (no checks but a readable hello).
caf::behavior sim_gate(caf::event_based_actor* self, SimulatedWorkerOptions options,
                       std::shared_ptr<SimFigures> figures) {
  return {
      [=](hello_atom, const std::vector<char>& bytes, const caf::actor& reply_to) {
        auto trainer = caf::actor_cast<caf::actor>(self->current_sender());
        if (!trainer) trainer = reply_to;
        HelloFields hello;
        try {
          hello = read_hello(bytes);
        } catch (const RemoteError&) {
          return;
        }
        const auto key = random_key();
        auto session = self->spawn<caf::linked>(sim_session, options, figures, key,
                                                hello.trainer_key, trainer);
        const auto welcome = write_welcome({.protocol = kProtocolVersion,
                                            .build_id = std::string(build_id()),
                                            .session_key = key,
                                            .name = "simulated",
                                            .window = options.window,
                                            .threads = options.threads});
        self->send(trainer, welcome_atom::value, hello.trainer_key, welcome, session);
      },
  };
}

}  // namespace

struct SimulatedWorkers::Impl {
  caf::actor_system_config config;
  std::unique_ptr<caf::actor_system> system;
  std::shared_ptr<Guard> guard = std::make_shared<Guard>("brigade simulated workers");
  std::vector<caf::actor> gates;
  std::vector<std::unique_ptr<Listener>> listeners;
  std::vector<std::shared_ptr<SimFigures>> figures;
  std::vector<Endpoint> endpoints;

  ~Impl() {
    listeners.clear();
    for (auto& g : gates) caf::anon_send_exit(g, caf::exit_reason::user_shutdown);
  }
};

SimulatedWorkers::SimulatedWorkers(std::size_t n, SimulatedWorkerOptions options)
    : impl_(std::make_unique<Impl>()) {
  if (options.security.token.empty()) throw RemoteError("simulated workers need a job token");
  auto& m = *impl_;
  configure_network(m.config, options.security, std::chrono::milliseconds(2000));
  m.system = std::make_unique<caf::actor_system>(m.config);
  for (std::size_t i = 0; i < n; ++i) {
    m.figures.push_back(std::make_shared<SimFigures>());
    m.gates.push_back(m.system->spawn(sim_gate, options, m.figures.back()));
    m.listeners.push_back(std::make_unique<Listener>(
        *m.system, m.gates.back(), Endpoint{"127.0.0.1", 0}, options.security.token, m.guard));
    m.endpoints.push_back({"127.0.0.1", m.listeners.back()->port()});
  }
}

SimulatedWorkers::~SimulatedWorkers() = default;

const std::vector<Endpoint>& SimulatedWorkers::endpoints() const { return impl_->endpoints; }

std::vector<SimulatedWorkers::Figures> SimulatedWorkers::figures() const {
  std::vector<Figures> out;
  for (const auto& f : impl_->figures) out.push_back({f->busy_ns.load(), f->tasks.load()});
  return out;
}

void SimulatedWorkers::reset_figures() {
  for (auto& f : impl_->figures) {
    f->busy_ns = 0;
    f->tasks = 0;
  }
}

}  // namespace brigade::transport
