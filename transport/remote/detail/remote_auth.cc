#include "transport/remote/detail/remote_auth.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <caf/io/basp_broker.hpp>
#include <caf/openssl/all.hpp>
#include <cerrno>
#include <cstring>
#include <set>
#include <vector>

#include "transport/remote/detail/remote_protocol.h"

namespace brigade::transport::detail {

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::string_view kMagic{"BRIGADE-AUTH-v1\n", 16};
constexpr std::size_t kNonce = 16, kMac = 32;
// Sent instead of the server's proof to a client whose proof was wrong, so that it can
// say why (it says nothing about the token).
constexpr std::string_view kRefused{"BRIGADE-AUTH-REFUSED-WRONG-TOKEN", kMac};
constexpr std::size_t kGreeting = kMagic.size() + kNonce;       // server → client
constexpr std::size_t kAnswer = kMagic.size() + kNonce + kMac;  // client → server

std::string sys_error(const char* what) {
  return fmt::format("{}: {}", what, std::strerror(errno));
}

void close_fd(int fd) {
  if (fd >= 0) ::close(fd);
}

void tune(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// Waits for `events` on `fd` until `deadline`, in slices that look at `stopping`.
void wait_for(int fd, short events, Clock::time_point deadline, const Guard* guard,
              const Endpoint& at) {
  for (;;) {
    if (guard && guard->stopping.load()) throw RemoteError("stopping");
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      throw RemoteError(RemoteErrc::timed_out,
                        fmt::format("{} did not complete the authentication within {} ms",
                                    at.to_string(), kHandshakeTimeout.count()));
    }
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 100)));
    if (n < 0 && errno != EINTR) throw RemoteError(sys_error("poll"));
    if (n > 0) return;
  }
}

void read_exactly(int fd, char* out, std::size_t size, Clock::time_point deadline,
                  const Guard* guard, const Endpoint& at) {
  std::size_t got = 0;
  while (got < size) {
    const auto n = ::recv(fd, out + got, size - got, 0);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
    } else if (n == 0) {
      throw RemoteError(
          RemoteErrc::refused,
          fmt::format("{} closed the connection during the authentication (a different job "
                      "token, or not a brigade endpoint)",
                      at.to_string()));
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      wait_for(fd, POLLIN, deadline, guard, at);
    } else if (errno != EINTR) {
      throw RemoteError(RemoteErrc::connection_lost,
                        fmt::format("{}: {}", at.to_string(), sys_error("recv")));
    }
  }
}

void write_all(int fd, std::string_view bytes, Clock::time_point deadline, const Guard* guard,
               const Endpoint& at) {
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    const auto n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n >= 0) {
      sent += static_cast<std::size_t>(n);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      wait_for(fd, POLLOUT, deadline, guard, at);
    } else if (errno != EINTR) {
      throw RemoteError(RemoteErrc::connection_lost,
                        fmt::format("{}: {}", at.to_string(), sys_error("send")));
    }
  }
}

// The client's side: a connected, authenticated, non-blocking socket. Throws RemoteError.
int client_handshake(const Endpoint& at, std::string_view token, const Guard* guard) {
  const auto deadline = Clock::now() + kHandshakeTimeout;
  const auto addresses = resolve_endpoint(at, false);
  std::string last_error = "no address";
  RemoteErrc last_code = RemoteErrc::unreachable;
  for (auto* a = addresses.list; a; a = a->ai_next) {
    const int fd =
        ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_error = sys_error("socket");
      continue;
    }
    try {
      if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
        if (errno != EINPROGRESS) throw RemoteError(RemoteErrc::unreachable, sys_error("connect"));
        wait_for(fd, POLLOUT, deadline, guard, at);
        int err = 0;
        socklen_t len = sizeof(err);
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0) {
          errno = err;
          throw RemoteError(RemoteErrc::unreachable, sys_error("connect"));
        }
      }
      tune(fd);
      char greeting[kGreeting];
      read_exactly(fd, greeting, sizeof(greeting), deadline, guard, at);
      if (std::string_view(greeting, kMagic.size()) != kMagic) {
        throw RemoteError(
            fmt::format("{} is not a brigade endpoint of this version (plain TCP "
                        "without TLS expected)",
                        at.to_string()));
      }
      const std::string sn(greeting + kMagic.size(), kNonce);
      const std::string cn = random_key();
      std::string answer(kMagic);
      answer += cn;
      answer += token_mac(token, "client", sn, cn);
      write_all(fd, answer, deadline, guard, at);
      char proof[kMac];
      read_exactly(fd, proof, sizeof(proof), deadline, guard, at);
      if (std::string_view(proof, kMac) == kRefused) {
        throw RemoteError(RemoteErrc::refused,
                          fmt::format("{} refused this peer: the job token differs from its own",
                                      at.to_string()));
      }
      if (!same_secret(std::string_view(proof, kMac), token_mac(token, "server", sn, cn))) {
        const auto why =
            fmt::format("{} could not prove that it knows the job token", at.to_string());
        throw RemoteError(RemoteErrc::refused, why);
      }
      return fd;
    } catch (const RemoteError& e) {
      close_fd(fd);
      last_error = e.what();
      last_code = static_cast<RemoteErrc>(e.code().value());
      if (guard && guard->stopping.load()) throw;
      if (std::string_view(e.what()).find("connect:") == std::string_view::npos) throw;
    }
  }
  throw RemoteError(last_code, fmt::format("cannot connect to {}: {}", at.to_string(), last_error));
}

std::string peer_name(const sockaddr_storage& a) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (a.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    ::inet_ntop(AF_INET6, &v6.sin6_addr, host, sizeof host);
    return fmt::format("[{}]:{}", host, ntohs(v6.sin6_port));
  }
  const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
  ::inet_ntop(AF_INET, &v4.sin_addr, host, sizeof host);
  return fmt::format("{}:{}", host, ntohs(v4.sin_port));
}

caf::actor basp_broker(caf::actor_system& system) {
  return system.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
}

caf::behavior connector_actor(caf::event_based_actor* self, std::string token,
                              std::shared_ptr<Guard> guard) {
  return {
      [self, token, guard](caf::connect_atom, const std::string& host, std::uint16_t port) {
        auto rp = self->make_response_promise();
        int fd = -1;
        try {
          fd = client_handshake({host, port}, token, guard.get());
        } catch (const RemoteError& e) {
          rp.deliver(false, caf::actor{}, std::string(e.what()));
          self->quit();
          return;
        }
        auto& mm = self->home_system().middleman();
        auto scribe = mm.backend().new_scribe(fd);
        self->request(basp_broker(self->home_system()), std::chrono::seconds(10),
                      caf::connect_atom::value, std::move(scribe), port)
            .then(
                [self, rp](const caf::node_id&, caf::strong_actor_ptr& p,
                           const std::set<std::string>&) mutable {
                  rp.deliver(true, caf::actor_cast<caf::actor>(p), std::string{});
                  self->quit();
                },
                [self, rp](const caf::error& e) mutable {
                  rp.deliver(false, caf::actor{}, self->home_system().render(e));
                  self->quit();
                });
      },
  };
}

}  // namespace

std::string token_mac(std::string_view token, std::string_view label, std::string_view a,
                      std::string_view b) {
  std::string message;
  message.reserve(label.size() + 1 + a.size() + b.size());
  message.append(label).push_back('\0');
  message.append(a).append(b);
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (!HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()),
            reinterpret_cast<const unsigned char*>(message.data()), message.size(), out, &size)) {
    throw RemoteError("HMAC-SHA256 failed");
  }
  return {reinterpret_cast<const char*>(out), size};
}

AddrInfo resolve_endpoint(const Endpoint& at, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  AddrInfo out;
  const auto port = std::to_string(at.port);
  const int rc =
      getaddrinfo(at.host.empty() ? nullptr : at.host.c_str(), port.c_str(), &hints, &out.list);
  if (rc != 0) {
    throw RemoteError(fmt::format("cannot resolve {}: {}", at.to_string(), gai_strerror(rc)));
  }
  return out;
}

std::string token_digest(std::string_view token) {
  return token_mac(token, "brigade token digest v1", {}, {});
}

// -- Listener -----------------------------------------------------------------------

Listener::Listener(caf::actor_system& system, caf::actor actor, const Endpoint& at,
                   std::string token, std::shared_ptr<Guard> guard, std::function<void()> counted)
    : system_(system),
      actor_(std::move(actor)),
      token_(std::move(token)),
      guard_(std::move(guard)),
      counted_(std::move(counted)) {
  const auto addresses = resolve_endpoint(at, true);
  std::string last_error = "no address";
  for (auto* a = addresses.list; a && fd_ < 0; a = a->ai_next) {
    const int fd =
        ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_error = sys_error("socket");
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 128) != 0) {
      last_error = sys_error("bind");
      ::close(fd);
      continue;
    }
    fd_ = fd;
  }
  if (fd_ < 0)
    throw RemoteError(fmt::format("cannot listen on {}: {}", at.to_string(), last_error));
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&bound), &len);
  port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    ::close(fd_);
    throw RemoteError(sys_error("pipe"));
  }
  basp_broker(system_);  // created by the middleman's start; looked up here, not in run()
  thread_ = std::thread([this] { run(); });
}

Listener::~Listener() {
  const char c = 0;
  [[maybe_unused]] auto n = ::write(wake_[1], &c, 1);
  thread_.join();
  close_fd(fd_);
  close_fd(wake_[0]);
  close_fd(wake_[1]);
}

void Listener::run() {
  struct Pending {
    int fd = -1;
    std::string peer;  // "host:port"
    Clock::time_point deadline;
    std::string nonce;
    char buf[kAnswer];
    std::size_t got = 0;
  };
  std::vector<Pending> pending;
  const auto broker = basp_broker(system_);
  auto refuse = [&](Pending& p, std::string_view why) {
    ++refused_;
    guard_->log.note(fmt::format("a connection that failed the authentication ({})", why), p.peer);
    close_fd(p.fd);
    p.fd = -1;
    if (counted_) counted_();
  };
  for (;;) {
    std::vector<pollfd> fds{{wake_[0], POLLIN, 0}, {fd_, POLLIN, 0}};
    for (const auto& p : pending) fds.push_back({p.fd, POLLIN, 0});
    const int n = ::poll(fds.data(), fds.size(), 100);
    if (n < 0 && errno != EINTR) {
      spdlog::error("brigade: the authenticating listener failed: {}", sys_error("poll"));
      break;
    }
    if (fds[0].revents) break;  // stopping
    const auto now = Clock::now();
    for (std::size_t i = 0; i < pending.size(); ++i) {
      auto& p = pending[i];
      const auto revents = fds[i + 2].revents;
      if (revents) {
        const auto r = ::recv(p.fd, p.buf + p.got, kAnswer - p.got, 0);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
          refuse(p, "closed by the peer");
          continue;
        }
        if (r > 0) p.got += static_cast<std::size_t>(r);
        if (p.got >= kMagic.size() && std::string_view(p.buf, kMagic.size()) != kMagic) {
          refuse(p, "not a brigade handshake");
          continue;
        }
        if (p.got == kAnswer) {
          const std::string cn(p.buf + kMagic.size(), kNonce);
          const std::string_view mac(p.buf + kMagic.size() + kNonce, kMac);
          if (!same_secret(mac, token_mac(token_, "client", p.nonce, cn))) {
            [[maybe_unused]] auto n = ::send(p.fd, kRefused.data(), kRefused.size(), MSG_NOSIGNAL);
            refuse(p, "a wrong job token");
            continue;
          }
          const auto proof = token_mac(token_, "server", p.nonce, cn);
          // 32 bytes into the socket's empty send buffer: sent at once or never.
          if (::send(p.fd, proof.data(), proof.size(), MSG_NOSIGNAL) !=
              static_cast<ssize_t>(proof.size())) {
            refuse(p, "the proof could not be sent");
            continue;
          }
          tune(p.fd);
          auto scribe = system_.middleman().backend().new_scribe(p.fd);
          p.fd = -1;  // the middleman's now
          ++accepted_;
          caf::anon_send(broker, caf::publish_atom::value, std::move(scribe), port_,
                         caf::actor_cast<caf::strong_actor_ptr>(actor_), std::set<std::string>{});
          if (counted_) counted_();
          continue;
        }
      }
      if (now > p.deadline) refuse(p, "no answer within the handshake's deadline");
    }
    std::erase_if(pending, [](const Pending& p) { return p.fd < 0; });
    if (fds[1].revents) {
      for (;;) {
        sockaddr_storage from{};
        socklen_t from_len = sizeof(from);
        const int fd = ::accept4(fd_, reinterpret_cast<sockaddr*>(&from), &from_len,
                                 SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        Pending p;
        p.fd = fd;
        p.peer = peer_name(from);
        if (pending.size() >= kMaxPending) {
          refuse(p, fmt::format("{} connections already in the handshake", kMaxPending));
          continue;
        }
        p.deadline = now + kHandshakeTimeout;
        p.nonce = random_key();
        std::string greeting(kMagic);
        greeting += p.nonce;
        if (::send(fd, greeting.data(), greeting.size(), MSG_NOSIGNAL) !=
            static_cast<ssize_t>(greeting.size())) {
          refuse(p, "the greeting could not be sent");
          continue;
        }
        pending.push_back(std::move(p));
      }
    }
  }
  for (auto& p : pending) close_fd(p.fd);
}

// -- connecting ---------------------------------------------------------------------

void connect(caf::event_based_actor* self, const Security& security, const Endpoint& at,
             std::shared_ptr<Guard> guard, std::function<void(caf::actor)> ok,
             std::function<void(const std::string&)> fail) {
  auto& system = self->home_system();
  if (security.tls()) {
    self->request(network_actor(system, security), std::chrono::seconds(5),
                  caf::connect_atom::value, at.host, at.port)
        .then(
            [ok, fail](const caf::node_id&, caf::strong_actor_ptr& p,
                       const std::set<std::string>&) {
              auto actor = caf::actor_cast<caf::actor>(p);
              if (actor) return ok(actor);
              fail("no actor is published there yet");
            },
            [self, fail](const caf::error& e) { fail(self->home_system().render(e)); });
    return;
  }
  auto helper = system.spawn<caf::detached>(connector_actor, security.token, guard);
  self->request(helper, std::chrono::seconds(20), caf::connect_atom::value, at.host, at.port)
      .then(
          [ok, fail](bool good, caf::actor& actor, std::string& why) {
            if (good && actor) return ok(actor);
            fail(why.empty() ? "no actor is published there yet" : why);
          },
          [self, fail](const caf::error& e) { fail(self->home_system().render(e)); });
}

caf::actor connect_blocking(caf::actor_system& system, const Security& security,
                            const Endpoint& at) {
  if (security.tls()) {
    auto a = caf::openssl::remote_actor(system, at.host, at.port);
    if (!a) throw RemoteError(system.render(a.error()));
    return *a;
  }
  auto guard = std::make_shared<Guard>("brigade");
  auto helper = system.spawn<caf::detached>(connector_actor, security.token, guard);
  caf::scoped_actor self{system};
  caf::actor out;
  std::string error;
  self->request(helper, std::chrono::seconds(20), caf::connect_atom::value, at.host, at.port)
      .receive(
          [&](bool good, caf::actor& actor, std::string& why) {
            if (good && actor) {
              out = actor;
            } else {
              error = why.empty() ? "no actor is published there" : why;
            }
          },
          [&](caf::error& e) { error = system.render(e); });
  if (!out) throw RemoteError(error);
  return out;
}

}  // namespace brigade::transport::detail
