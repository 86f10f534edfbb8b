#pragma once

// The pieces the worker node, the pool and the directory share: message atoms, the
// network set-up of an actor system (plain or TLS), session keys, and reading Cap'n
// Proto bytes that came from the network (bounded, alignment-safe, never trusting).
//
// MESSAGES (each a CAF tuple; `bytes` is a std::vector<char> holding one message of
// transport/remote/remote.capnp, keys are 16 random bytes in a std::string; a result's
// `payload` is the operation's bytes as a WirePayload, detail/payload.h):
//   trainer → gate       (hello, bytes Hello, actor reply_to)
//                                              → (welcome, tkey, bytes Welcome, actor session)
//                                                 | (refuse, tkey, string reason)
//   trainer → session    (task, key, u64 id, string op, bytes) (cancel, key, u64 id)
//                        (ping, key)
//   worker → trainer     (result, key, u64 id, payload) (tfailed, key, u64 id, string why)
//   (for a session)      (pong, key)                    (refuse, key, u64 id, string why)
//                        (started, key, u64 id): a thread began running the task
//                        (freed, key, u64 id): a cancelled task's thread is free again
//   worker  → directory  (join, bytes Join)               → (joined) | (refuse, string)
//   trainer → directory  (subscribe, bytes Subscribe)     → (workers, bytes WorkerList) …
//                                                           | (refuse, string)
// (tkey: the trainer key of the Hello, so a reply finds its connection; the trainer goes
// by it, not by the sender, which may be the session actor or none.) Replies are
// one-way sends: requests to a dead peer are not failed early, so every side keeps its
// own table of what it waits for, with deadlines.

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "transport/remote/detail/payload.h"
#include "transport/remote/detail/wire.h"
#include "transport/remote/endpoint.h"
#include "transport/remote/remote.h"

namespace brigade::transport::detail {

using hello_atom = caf::atom_constant<caf::atom("hello")>;
using welcome_atom = caf::atom_constant<caf::atom("welcome")>;
using refuse_atom = caf::atom_constant<caf::atom("refuse")>;
using task_atom = caf::atom_constant<caf::atom("task")>;
using cancel_atom = caf::atom_constant<caf::atom("cancel")>;
using result_atom = caf::atom_constant<caf::atom("result")>;
using tfailed_atom = caf::atom_constant<caf::atom("tfailed")>;
using ping_atom = caf::atom_constant<caf::atom("ping")>;
using pong_atom = caf::atom_constant<caf::atom("pong")>;
using join_atom = caf::atom_constant<caf::atom("join")>;
using joined_atom = caf::atom_constant<caf::atom("joined")>;
using subscribe_atom = caf::atom_constant<caf::atom("subscribe")>;
using workers_atom = caf::atom_constant<caf::atom("workers")>;
using weights_atom = caf::atom_constant<caf::atom("weights")>;  // REBALANCING
using tick_atom = caf::atom_constant<caf::atom("tick")>;
using kick_atom = caf::atom_constant<caf::atom("kick")>;
using connected_atom = caf::atom_constant<caf::atom("connected")>;
using done_atom = caf::atom_constant<caf::atom("done")>;
using started_atom = caf::atom_constant<caf::atom("started")>;
using freed_atom = caf::atom_constant<caf::atom("freed")>;

/// Loads the middleman (and OpenSSL's manager with `security.tls()`), sets the
/// middleman's own heartbeat on this side (a connection silent for `heartbeat_timeout`
/// of real time is closed; zero: no such heartbeat), and keeps CAF from reading a
/// caf-application.ini from the working directory. Throws RemoteError for TLS files
/// that cannot be read.
void configure_network(caf::actor_system_config& config, const Security& security,
                       std::chrono::milliseconds heartbeat_timeout);

/// Publishes `actor` at `at` (port 0: any); returns the bound port. Throws RemoteError.
std::uint16_t publish(const caf::actor& actor, const Endpoint& at, const Security& security);

/// The middleman actor to connect through: OpenSSL's with `security.tls()`. An actor
/// connects without blocking by request(network_actor(…), timeout, connect_atom, host,
/// port) → (node_id, strong_actor_ptr, std::set<std::string>).
caf::io::middleman_actor network_actor(caf::actor_system& system, const Security& security);

/// 16 bytes from the system's random source.
std::string random_key();
/// Equality in time that depends only on the lengths.
bool same_secret(std::string_view a, std::string_view b);

/// The network address of a remote node ("host:port"), asynchronously, for a log line
/// naming the peer of a dropped message: `log(address)` runs in `self`'s context.
void with_peer_address(caf::event_based_actor* self, const caf::node_id& node,
                       std::function<void(const std::string&)> log);

}  // namespace brigade::transport::detail
