#pragma once
// What a hostile peer sends to an actor it reached (remote_attack_test.cc in process,
// hostile_peer.cc as a process of the cluster tests): everything that ended actors before
// issue 21 — exits (kill and others), an error as an ordinary message, a down message
// naming the target itself, an unknown message.

#include <caf/all.hpp>
#include <string>

namespace brigade::transport::test {

inline void hit(const caf::actor& target) {
  caf::anon_send_exit(target, caf::exit_reason::kill);
  caf::anon_send_exit(target, caf::exit_reason::user_shutdown);
  caf::anon_send(target, caf::make_error(caf::sec::runtime_error));
  caf::anon_send(target, caf::down_msg{target.address(), caf::exit_reason::kill});
  caf::anon_send(target, std::string("hello?"));
}

}  // namespace brigade::transport::test
