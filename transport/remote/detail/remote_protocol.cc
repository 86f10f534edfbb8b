#include "transport/remote/detail/remote_protocol.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/random.h>
#include <unistd.h>

#include <caf/openssl/all.hpp>
#include <cerrno>
#include <cstring>

namespace brigade::transport {

std::string_view build_id() { return BRIGADE_BUILD_ID; }

void OperationRegistry::add(OperationVersion version, Operation operation) {
  if (version.name.empty()) throw std::invalid_argument("an operation needs a name");
  if (find(version.name)) {
    throw std::invalid_argument(fmt::format("operation '{}' is already registered", version.name));
  }
  operations_.emplace_back(std::move(version), std::move(operation));
}

const Operation* OperationRegistry::find(std::string_view name) const {
  for (const auto& [v, op] : operations_)
    if (v.name == name) return &op;
  return nullptr;
}

std::vector<OperationVersion> OperationRegistry::list() const {
  std::vector<OperationVersion> out;
  for (const auto& entry : operations_) out.push_back(entry.first);
  return out;
}

}  // namespace brigade::transport

namespace brigade::transport::detail {

namespace {

void check_readable(const std::string& path, const char* what) {
  if (access(path.c_str(), R_OK) != 0) {
    throw RemoteError(fmt::format("{} {}: {}", what, path, std::strerror(errno)));
  }
}

}  // namespace

void configure_network(caf::actor_system_config& config, const Security& security,
                       std::chrono::milliseconds heartbeat_timeout) {
  // spdlog's registry is created on first use; make that happen here, before the
  // system's threads log (ThreadSanitizer cannot see the once-guard inside the
  // uninstrumented libspdlog, and reported the first log line of an actor as a race).
  spdlog::default_logger_raw();
  config.load<caf::io::middleman>();
  if (security.tls()) {
    check_readable(security.tls_cert, "tls_cert");
    check_readable(security.tls_key, "tls_key");
    check_readable(security.tls_ca, "tls_ca");
    config.load<caf::openssl::manager>();
    config.openssl_certificate = security.tls_cert;
    config.openssl_key = security.tls_key;
    config.openssl_cafile = security.tls_ca;
  }
  // BASP's own heartbeat: without it a frozen peer (SIGSTOP) is never noticed by CAF.
  if (heartbeat_timeout.count() > 0) {
    const auto interval = std::max(std::chrono::milliseconds(50), heartbeat_timeout / 10);
    config.set("middleman.heartbeat-interval", caf::timespan{interval});
    config.set("middleman.connection-timeout", caf::timespan{heartbeat_timeout});
  }
  config.set("scheduler.max-threads", 2);
  config.add_message_type<WirePayload>("brigade.payload");
  // The network's actors handle a few messages per task: a shared queue whose threads
  // sleep on a condition variable until a message comes. CAF's default (work stealing)
  // polls when idle, in 50 µs naps for its first 25 ms, which cost a remote run's trainer
  // more CPU than receiving its results (issue 21). (The directory race once blamed on
  // this policy was rank 1 connecting before rank 0 listened: see next_retry.)
  config.set("scheduler.policy", caf::atom("sharing"));
  // BASP reads a message where it arrives, on the multiplexer's thread, rather than
  // copying its payload to a deserializing worker on another thread (one copy and one
  // thread hop less per result).
  config.set("middleman.workers", std::size_t{0});
}

std::uint16_t publish(const caf::actor& actor, const Endpoint& at, const Security& security) {
  auto& system = actor.home_system();
  auto port = security.tls() ? caf::openssl::publish(actor, at.port, at.host.c_str(), true)
                             : caf::io::publish(actor, at.port, at.host.c_str(), true);
  if (!port) {
    throw RemoteError(
        fmt::format("cannot listen on {}: {}", at.to_string(), system.render(port.error())));
  }
  return *port;
}

caf::io::middleman_actor network_actor(caf::actor_system& system, const Security& security) {
  if (security.tls()) return system.openssl_manager().actor_handle();
  return system.middleman().actor_handle();
}

std::string random_key() {
  std::string key(16, '\0');
  std::size_t got = 0;
  while (got < key.size()) {
    const auto n = getrandom(key.data() + got, key.size() - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw RemoteError(fmt::format("getrandom: {}", std::strerror(errno)));
    got += static_cast<std::size_t>(n);
  }
  return key;
}

bool same_secret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  volatile unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff = diff | (a[i] ^ b[i]);
  return diff == 0;
}

void with_peer_address(caf::event_based_actor* self, const caf::node_id& node,
                       std::function<void(const std::string&)> log) {
  if (node == caf::node_id{} || node == self->home_system().node()) {
    log("this process");
    return;
  }
  auto mm = self->home_system().middleman().actor_handle();
  self->request(mm, std::chrono::seconds(1), caf::get_atom::value, node)
      .then([log](const caf::node_id&, const std::string& host,
                  std::uint16_t port) { log(fmt::format("{}:{}", host, port)); },
            [log, node](const caf::error&) { log("node " + caf::to_string(node)); });
}

}  // namespace brigade::transport::detail
