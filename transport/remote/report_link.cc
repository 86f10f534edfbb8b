#include "transport/remote/report_link.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "transport/remote/detail/remote_auth.h"
#include "transport/remote/detail/remote_protocol.h"
#include "transport/remote/remote.h"

namespace brigade::transport {
namespace {

using LinkClock = std::chrono::steady_clock;
constexpr std::string_view kReportMagic{"brigade-stats-1\n", 16};
constexpr std::size_t kNonce = 16, kMac = 32, kHeader = 12;
constexpr std::size_t kHello = kReportMagic.size() + kNonce + 4 + kMac;  // 68
constexpr std::chrono::milliseconds kIoTimeout{2000};

void put_be(std::string& out, std::uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint64_t get_be(const char* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

std::string frame_mac(std::string_view key, std::string_view header,
                      std::span<const char> payload) {
  return detail::token_mac(key, "report", header, {payload.data(), payload.size()});
}

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

// The sender's blocking I/O on a non-blocking socket: poll in slices that look at
// `stopping`; false on a timeout, a closed connection or stopping.
bool wait_io(int fd, short events, LinkClock::time_point deadline,
             const std::atomic<bool>& stopping) {
  for (;;) {
    if (stopping.load()) return false;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - LinkClock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 100)));
    if (n > 0) return (p.revents & (events | POLLHUP | POLLERR)) != 0;
    if (n < 0 && errno != EINTR) return false;
  }
}

bool write_all(int fd, std::string_view data, const std::atomic<bool>& stopping) {
  const auto deadline = LinkClock::now() + kIoTimeout;
  while (!data.empty()) {
    const auto n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_io(fd, POLLOUT, deadline, stopping)) return false;
    } else if (!(n < 0 && errno == EINTR)) {
      return false;
    }
  }
  return true;
}

bool read_all(int fd, char* out, std::size_t size, const std::atomic<bool>& stopping) {
  const auto deadline = LinkClock::now() + kIoTimeout;
  std::size_t got = 0;
  while (got < size) {
    const auto n = ::recv(fd, out + got, size - got, 0);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
    } else if (n == 0) {
      return false;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_io(fd, POLLIN, deadline, stopping)) return false;
    } else if (errno != EINTR) {
      return false;
    }
  }
  return true;
}

// Connects and authenticates; returns the socket and the session key, or -1.
int connect_and_authenticate(const Endpoint& at, const std::string& token, std::uint32_t rank,
                             const std::atomic<bool>& stopping, std::string& key) {
  std::optional<detail::AddrInfo> resolved;
  try {
    resolved.emplace(detail::resolve_endpoint(at, false));
  } catch (const RemoteError&) {
    return -1;
  }
  const auto& addresses = *resolved;
  for (auto* a = addresses.list; a; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    set_nonblocking(fd);
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    bool ok = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0;
    if (!ok && errno == EINPROGRESS &&
        wait_io(fd, POLLOUT, LinkClock::now() + kIoTimeout, stopping)) {
      int error = 0;
      socklen_t size = sizeof error;
      ok = ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) == 0 && error == 0;
    }
    char greeting[kReportMagic.size() + kNonce];
    if (ok) ok = read_all(fd, greeting, sizeof greeting, stopping);
    if (ok) ok = detail::same_secret({greeting, kReportMagic.size()}, kReportMagic);
    if (ok) {
      const std::string cn(greeting + kReportMagic.size(), kNonce);
      std::string sn_rank = detail::random_key();
      put_be(sn_rank, rank, 4);
      std::string hello(kReportMagic);
      hello += sn_rank;
      hello += detail::token_mac(token, "stats-sender", cn, sn_rank);
      char answer[kMac];
      ok = write_all(fd, hello, stopping) && read_all(fd, answer, kMac, stopping) &&
           detail::same_secret({answer, kMac},
                               detail::token_mac(token, "stats-collector", cn, sn_rank));
      if (ok) {
        key = detail::token_mac(token, "stats-session", cn, sn_rank);
        return fd;
      }
    }
    ::close(fd);
  }
  return -1;
}

}  // namespace

// ---- the collector -------------------------------------------------------------------

struct ReportCollector::Connection {
  int fd = -1;
  bool authenticated = false;
  LinkClock::time_point deadline{};
  std::string cn{};  // the collector's nonce
  std::uint32_t rank = 0;
  std::string key{};
  std::string buffer{};                          // the hello, or the frame being read
  std::optional<std::uint64_t> last_sequence{};  // a worker node's, on this connection
};

ReportCollector::ReportCollector(const Endpoint& at, ReportCollectorOptions options,
                                 Deliver deliver, std::function<void()> counted)
    : options_(std::move(options)), deliver_(std::move(deliver)), counted_(std::move(counted)) {
  if (options_.token.empty()) throw RemoteError("the statistics collector needs a job token");
  const auto addresses = detail::resolve_endpoint(at, true);
  int error = 0;
  for (auto* a = addresses.list; a && fd_ < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 64) == 0) {
      fd_ = fd;
    } else {
      error = errno;
      ::close(fd);
    }
  }
  if (fd_ < 0) {
    throw RemoteError(fmt::format("the statistics collector cannot listen on {}: {}",
                                  at.to_string(), std::strerror(error)));
  }
  set_nonblocking(fd_);
  sockaddr_storage bound{};
  socklen_t size = sizeof bound;
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&bound), &size);
  port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    ::close(fd_);
    throw RemoteError("the statistics collector cannot create its pipe");
  }
  thread_ = std::thread([this] { run(); });
}

ReportCollector::~ReportCollector() {
  const char c = 0;
  [[maybe_unused]] const auto n = ::write(wake_[1], &c, 1);
  thread_.join();
  ::close(fd_);
  ::close(wake_[0]);
  ::close(wake_[1]);
}

ReportCollectorCounts ReportCollector::counts() const {
  std::lock_guard lock(counts_mutex_);
  return counts_;
}

void ReportCollector::run() {
  std::vector<std::unique_ptr<Connection>> connections;
  std::vector<std::optional<std::uint64_t>> last_sequence(options_.world_size);
  std::vector<char> chunk(64 * 1024);
  const auto count = [&](auto change) {
    {
      std::lock_guard lock(counts_mutex_);
      change(counts_);
      counts_.pending = static_cast<std::uint64_t>(
          std::count_if(connections.begin(), connections.end(),
                        [](const auto& c) { return c && !c->authenticated; }));
      counts_.buffered_bytes = 0;
      for (const auto& c : connections) {
        if (c) counts_.buffered_bytes += c->buffer.size();
      }
    }
    if (counted_) counted_();
  };
  const auto close_at = [&](std::size_t i) {
    ::close(connections[i]->fd);
    connections[i].reset();
  };
  // Reads what `c` has for the frame or hello in progress; false to close it.
  const auto serve = [&](std::size_t i) -> bool {
    auto& c = *connections[i];
    for (;;) {
      std::size_t want = 0;
      if (!c.authenticated) {
        want = kHello - c.buffer.size();
      } else if (c.buffer.size() < kHeader) {
        want = kHeader - c.buffer.size();
      } else {
        const auto length = get_be(c.buffer.data(), 4);
        if (length > options_.max_report_bytes) {
          count([](auto& n) { ++n.refused_frames; });
          return false;
        }
        want = kHeader + length + kMac - c.buffer.size();
      }
      if (want > 0) {
        const auto n = ::recv(c.fd, chunk.data(), std::min(want, chunk.size()), 0);
        if (n == 0) return false;
        if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
        c.buffer.append(chunk.data(), static_cast<std::size_t>(n));
        if (static_cast<std::size_t>(n) < want) continue;
      }
      if (!c.authenticated) {
        if (c.buffer.size() < kHello) continue;
        const std::string_view hello(c.buffer);
        const auto sn_rank = hello.substr(kReportMagic.size(), kNonce + 4);
        const auto rank = static_cast<std::uint32_t>(get_be(sn_rank.data() + kNonce, 4));
        const bool worker = rank == kWorkerSender;
        const auto workers = std::count_if(
            connections.begin(), connections.end(),
            [](const auto& o) { return o && o->authenticated && o->rank == kWorkerSender; });
        const bool ok =
            detail::same_secret(hello.substr(0, kReportMagic.size()), kReportMagic) &&
            (rank < options_.world_size ||
             (worker && static_cast<std::size_t>(workers) < options_.max_workers)) &&
            detail::same_secret(hello.substr(kReportMagic.size() + kNonce + 4),
                                detail::token_mac(options_.token, "stats-sender", c.cn, sn_rank));
        if (!ok) {
          count([](auto& n) { ++n.refused_handshakes; });
          return false;
        }
        const auto answer = detail::token_mac(options_.token, "stats-collector", c.cn, sn_rank);
        if (::send(c.fd, answer.data(), answer.size(), MSG_NOSIGNAL) !=
            static_cast<ssize_t>(answer.size()))
          return false;
        c.key = detail::token_mac(options_.token, "stats-session", c.cn, sn_rank);
        c.rank = rank;
        c.authenticated = true;
        c.buffer.clear();
        for (std::size_t j = 0; !worker && j < connections.size();
             ++j) {  // a newer one replaces it
          if (j != i && connections[j] && connections[j]->authenticated &&
              connections[j]->rank == rank)
            close_at(j);
        }
        count([](auto& n) { ++n.authenticated; });
        continue;
      }
      const auto length = get_be(c.buffer.data(), 4);
      if (c.buffer.size() < kHeader + length + kMac) continue;
      const std::string_view frame(c.buffer);
      const std::span<const char> payload(c.buffer.data() + kHeader, length);
      if (!detail::same_secret(frame.substr(kHeader + length),
                               frame_mac(c.key, frame.substr(0, kHeader), payload))) {
        count([](auto& n) { ++n.refused_frames; });
        return false;
      }
      const auto sequence = get_be(c.buffer.data() + 4, 8);
      auto& last = c.rank == kWorkerSender ? c.last_sequence : last_sequence[c.rank];
      if (last && sequence <= *last) {
        count([](auto& n) { ++n.refused_frames; });
      } else {
        last = sequence;
        deliver_(c.rank, sequence, payload);
        count([](auto& n) { ++n.delivered; });
      }
      c.buffer.clear();
    }
  };

  std::vector<pollfd> polled;
  for (;;) {
    std::erase_if(connections, [](const auto& c) { return !c; });
    polled.assign({{wake_[0], POLLIN, 0}, {fd_, POLLIN, 0}});
    int timeout = -1;
    const auto now = LinkClock::now();
    for (const auto& c : connections) {
      polled.push_back({c->fd, POLLIN, 0});
      if (!c->authenticated) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(c->deadline - now).count() + 1;
        timeout = timeout < 0 ? int(std::max<long long>(left, 0))
                              : std::min(timeout, int(std::max<long long>(left, 0)));
      }
    }
    const int n = ::poll(polled.data(), polled.size(), timeout);
    if (n < 0 && errno != EINTR) return;
    if (polled[0].revents) return;  // the destructor
    for (std::size_t i = 0; i < connections.size(); ++i) {
      if (!connections[i]) continue;
      if (polled[i + 2].revents) {
        if (!serve(i)) close_at(i);
        count([](auto&) {});  // what it buffered
      } else if (connections[i] && !connections[i]->authenticated &&
                 LinkClock::now() >= connections[i]->deadline) {
        close_at(i);
        count([](auto& c) { ++c.refused_handshakes; });
      }
    }
    if (polled[1].revents & POLLIN) {
      for (;;) {
        const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        const auto pending = std::count_if(connections.begin(), connections.end(),
                                           [](const auto& c) { return c && !c->authenticated; });
        auto c = std::make_unique<Connection>();
        c->fd = fd;
        c->deadline = LinkClock::now() + options_.handshake_timeout;
        c->cn = detail::random_key();
        const std::string greeting = std::string(kReportMagic) + c->cn;
        if (static_cast<std::size_t>(pending) >= options_.max_pending ||
            ::send(fd, greeting.data(), greeting.size(), MSG_NOSIGNAL) !=
                static_cast<ssize_t>(greeting.size())) {
          ::close(fd);
          count([](auto& n) { ++n.refused_handshakes; });
          continue;
        }
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c->buffer.reserve(kHello);
        connections.push_back(std::move(c));
      }
    }
  }
}

// ---- the sender ----------------------------------------------------------------------

ReportSender::ReportSender(Endpoint collector, std::string token, std::uint32_t rank)
    : collector_(std::move(collector)), token_(std::move(token)), rank_(rank) {
  thread_ = std::thread([this] { run(); });
}

ReportSender::~ReportSender() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  stopped_.store(true);
  wake_.notify_all();
  thread_.join();
}

void ReportSender::send(std::vector<char> payload) {
  {
    std::lock_guard lock(mutex_);
    if (queue_.size() >= kSendQueue) {
      queue_.pop_front();
      ++counts_.dropped;
    }
    queue_.push_back(std::move(payload));
  }
  wake_.notify_all();
}

bool ReportSender::drain(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return drained_.wait_for(lock, timeout, [&] { return queue_.empty() && !writing_; });
}

ReportSenderCounts ReportSender::counts() const {
  std::lock_guard lock(mutex_);
  return counts_;
}

void ReportSender::run() {
  int fd = -1;
  std::string key;
  auto backoff = std::chrono::milliseconds(100);
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) break;
    if (fd < 0) {
      lock.unlock();
      fd = connect_and_authenticate(collector_, token_, rank_, stopped_, key);
      lock.lock();
      if (fd < 0) {
        ++counts_.failed;
        wake_.wait_for(lock, backoff, [&] { return stopping_; });
        backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
        continue;
      }
      ++counts_.connected;
      backoff = std::chrono::milliseconds(100);
    }
    auto payload = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    const std::uint64_t sequence = ++sequence_;
    lock.unlock();
    std::string frame;
    put_be(frame, payload.size(), 4);
    put_be(frame, sequence, 8);
    const auto mac = frame_mac(key, frame, payload);
    frame.append(payload.data(), payload.size());
    frame += mac;
    const bool ok = write_all(fd, frame, stopped_);
    lock.lock();
    writing_ = false;
    if (ok) {
      ++counts_.sent;
    } else {
      ++counts_.failed;
      ::close(fd);
      fd = -1;
    }
    drained_.notify_all();
  }
  if (fd >= 0) ::close(fd);
  drained_.notify_all();
}

}  // namespace brigade::transport
