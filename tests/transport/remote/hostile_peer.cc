// remote_hostile_peer ENDPOINT...: the hostile CAF peer that tests/launch/cluster_test.cc
// turns on real `brigade worker` and `brigade run` processes mid-run (issue 21, the red
// team's items 1–3); here, beside the protocol it speaks, so that the cluster test needs
// none of the remote layer's internals.
//
// For each ENDPOINT ("host:port": a worker's gate or rank 0's directory), with the job
// token from BRIGADE_TOKEN:
//   1. a plain CAF client without the token must get no actor there;
//   2. with the token (the handshake of detail/remote_auth.h) it gets the published
//      actor, and sends it and every guessed actor id 1..400 of that node exit(kill),
//      exit(user_shutdown), an error, a forged down message and an unknown message;
//   3. a round trip: an unreadable hello and an unreadable subscription, one of which
//      the published actor answers with a refusal. One BASP connection delivers in
//      order, so once it is answered everything sent before has been delivered.
// Exit status 0 when all three held, 1 otherwise (why on stderr), 2 for bad usage.
#include <caf/all.hpp>
#include <caf/forwarding_actor_proxy.hpp>
#include <caf/io/all.hpp>
#include <caf/io/basp_broker.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/transport/remote/hostile_messages.h"
#include "transport/remote/detail/remote_auth.h"
#include "transport/remote/detail/remote_protocol.h"

namespace {

using namespace brigade::transport;
using namespace brigade::transport::detail;

using brigade::transport::test::hit;

// Steps 1–3 at `at`; an empty string when they held, else why not.
std::string attack(caf::actor_system& system, const Security& security, const Endpoint& at,
                   std::vector<caf::actor>& guessed) {
  if (caf::io::remote_actor(system, at.host, at.port))
    return at.to_string() + " gave an actor to a peer without the token";
  caf::actor published;
  try {
    published = connect_blocking(system, security, at);
  } catch (const RemoteError& e) {
    return at.to_string() + ": " + e.what();
  }
  hit(published);
  auto broker = system.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
  for (caf::actor_id id = 1; id <= 400; ++id) {
    if (id == published.id()) continue;
    caf::actor_config cfg;
    // Kept until the end: a proxy's end drops the broker's own one.
    guessed.push_back(caf::actor_cast<caf::actor>(
        caf::make_actor<caf::forwarding_actor_proxy, caf::strong_actor_ptr>(id, published.node(),
                                                                            &system, cfg, broker)));
    hit(guessed.back());
  }
  caf::scoped_actor self{system};
  const std::vector<char> unreadable{'n', 'o', 'p', 'e'};
  self->send(published, hello_atom::value, unreadable, caf::actor(self));
  self->send(published, subscribe_atom::value, unreadable);
  std::string why = at.to_string() + " did not refuse an unreadable hello or subscription";
  self->receive([&](refuse_atom, const std::string&, const std::string&) { why.clear(); },
                [&](refuse_atom, const std::string&) { why.clear(); },
                caf::after(std::chrono::seconds(30)) >> [] {});
  return why;
}

}  // namespace

int main(int argc, char** argv) {
  const char* token = std::getenv("BRIGADE_TOKEN");
  if (argc < 2 || !token) {
    std::fprintf(stderr, "usage: BRIGADE_TOKEN=… remote_hostile_peer HOST:PORT...\n");
    return 2;
  }
  caf::actor_system_config config;
  config.load<caf::io::middleman>();
  config.set("scheduler.max-threads", 2);
  caf::actor_system system(config);
  const Security security{.token = token};
  std::vector<caf::actor> guessed;
  int status = 0;
  for (int i = 1; i < argc; ++i) {
    const auto why = attack(system, security, parse_endpoint(argv[i], "endpoint"), guessed);
    if (!why.empty()) {
      std::fprintf(stderr, "remote_hostile_peer: %s\n", why.c_str());
      status = 1;
    }
  }
  return status;
}
