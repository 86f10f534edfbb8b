#pragma once

// Authentication before BASP (issue 21): without TLS, no TCP connection becomes a peer
// of CAF's middleman before it has proven that it knows the job token, and the token
// itself never crosses the network.
//
// HANDSHAKE (plain TCP; all fields fixed-size):
//   server → client   kMagic (16) · server nonce (16)
//   client → server   kMagic (16) · client nonce (16) · HMAC-SHA256(token, "client" · sn · cn)
//   server → client   HMAC-SHA256(token, "server" · sn · cn)        (mutual: the client
//                                                                     checks it too)
// then both sides hand the socket to their middleman (CAF 0.17's BASP broker adopts a
// connected socket as a scribe: the server side as if its doorman had accepted it, the
// client side as if it had connected) and BASP starts on it. A listener holds at most
// kMaxPending connections in the handshake, each with a buffer of 64 bytes and a
// deadline (kHandshakeTimeout); beyond that a new connection is closed at once. So the
// memory an unauthenticated connection can hold is bounded by construction (a BASP
// header announcing gigabytes never reaches BASP), and a peer without the token never
// addresses an actor.
//
// With TLS (Security::tls()) CAF's OpenSSL module authenticates the peer by its
// certificate instead, and this file's Listener is not used: publish()/network_actor().
//
// THREADING. A Listener runs one thread (accept + handshakes, poll); connect() runs the
// client's handshake on a detached helper actor; both thread-safe.

#include <netdb.h>

#include <atomic>
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "transport/remote/detail/remote_guard.h"
#include "transport/remote/endpoint.h"
#include "transport/remote/remote.h"

namespace brigade::transport::detail {

inline constexpr std::size_t kMaxPending = 64;
inline constexpr std::chrono::milliseconds kHandshakeTimeout{5000};

/// getaddrinfo's list for `at` (TCP; `passive`: for binding), freed with it. Throws
/// RemoteError naming the endpoint when it cannot be resolved.
struct AddrInfo {
  addrinfo* list = nullptr;
  AddrInfo() = default;
  AddrInfo(AddrInfo&& other) noexcept : list(std::exchange(other.list, nullptr)) {}
  AddrInfo& operator=(AddrInfo&&) = delete;
  ~AddrInfo() {
    if (list) freeaddrinfo(list);
  }
};
AddrInfo resolve_endpoint(const Endpoint& at, bool passive);

/// HMAC-SHA256(token, label · a · b), 32 bytes.
std::string token_mac(std::string_view token, std::string_view label, std::string_view a,
                      std::string_view b);
/// What the hello, join and subscribe messages carry instead of the token: a digest
/// from which the token cannot be recovered (compared in constant time).
std::string token_digest(std::string_view token);

/// Listens on `at` and hands every connection that passes the handshake to `system`'s
/// middleman, with `actor` as the actor published there. Throws RemoteError when `at`
/// cannot be bound. `counted` (if any) runs on the listener's thread after accepted()
/// or refused() grew (a test waits on it instead of polling).
class Listener {
 public:
  Listener(caf::actor_system& system, caf::actor actor, const Endpoint& at, std::string token,
           std::shared_ptr<Guard> guard, std::function<void()> counted = {});
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  std::uint16_t port() const { return port_; }
  std::uint64_t accepted() const { return accepted_; }
  std::uint64_t refused() const { return refused_; }

 private:
  void run();

  caf::actor_system& system_;
  caf::actor actor_;
  std::string token_;
  std::shared_ptr<Guard> guard_;
  std::function<void()> counted_;
  int fd_ = -1;
  int wake_[2] = {-1, -1};
  std::uint16_t port_ = 0;
  std::atomic<std::uint64_t> accepted_{0}, refused_{0};
  std::thread thread_;
};

/// Connects `self` to the actor published at `at` (plain: the handshake above, then
/// BASP on that socket; TLS: CAF's OpenSSL middleman), then calls `ok` or `fail` in
/// `self`'s context. `stopping` ends a handshake in progress (checked every 100 ms).
void connect(caf::event_based_actor* self, const Security& security, const Endpoint& at,
             std::shared_ptr<Guard> guard, std::function<void(caf::actor)> ok,
             std::function<void(const std::string&)> fail);

/// The same, blocking the calling thread (tests, tools). Throws RemoteError.
caf::actor connect_blocking(caf::actor_system& system, const Security& security,
                            const Endpoint& at);

}  // namespace brigade::transport::detail
