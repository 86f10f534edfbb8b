#include "launch/metrics_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string_view>
#include <system_error>
#include <thread>

namespace brigade::launch {
namespace {

constexpr std::size_t kMaxHead = 8192;
constexpr int kClientMs = 2000;

std::system_error sys_error(const std::string& what) {
  return {errno, std::generic_category(), what};
}

std::string answer(int status, std::string_view reason, std::string_view type,
                   std::string_view body) {
  return fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
      status, reason, type, body.size(), body);
}

// Polls `fd` for `events` until the deadline; false on timeout, error or stop.
bool wait_for(int fd, short events, int stop_fd, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) return false;
    pollfd fds[2] = {{fd, events, 0}, {stop_fd, POLLIN, 0}};
    const int n = ::poll(fds, 2, static_cast<int>(left));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || fds[1].revents) return false;
    return (fds[0].revents & (events | POLLHUP | POLLERR)) != 0;
  }
}

}  // namespace

struct MetricsServer::Impl {
  int listen_fd = -1;
  int stop_pipe[2] = {-1, -1};
  std::uint16_t port = 0;
  std::function<std::string()> body;
  std::thread thread;

  std::string respond(std::string_view head) {
    const auto line_end = head.find("\r\n");
    const auto line = head.substr(0, line_end);
    const auto sp1 = line.find(' ');
    const auto sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos || !line.substr(sp2 + 1).starts_with("HTTP/1.")) {
      return answer(400, "Bad Request", "text/plain", "bad request\n");
    }
    const auto method = line.substr(0, sp1);
    auto target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    target = target.substr(0, target.find('?'));
    if (method != "GET" && method != "HEAD") {
      return answer(405, "Method Not Allowed", "text/plain", "GET only\n");
    }
    if (target != "/metrics") return answer(404, "Not Found", "text/plain", "try /metrics\n");
    auto out = answer(200, "OK", "text/plain; version=0.0.4; charset=utf-8", body());
    if (method == "HEAD") out.resize(out.find("\r\n\r\n") + 4);
    return out;
  }

  void serve(int fd) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kClientMs);
    std::string head;
    char buffer[2048];
    std::string out;
    for (;;) {
      if (!wait_for(fd, POLLIN, stop_pipe[0], deadline)) return;
      const auto n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) return;
      head.append(buffer, static_cast<std::size_t>(n));
      if (head.find("\r\n\r\n") != std::string::npos || head.find("\n\n") != std::string::npos)
        break;
      if (head.size() > kMaxHead) {
        out = answer(431, "Request Header Fields Too Large", "text/plain", "too large\n");
        break;
      }
    }
    if (out.empty()) out = respond(head);
    std::string_view rest = out;
    while (!rest.empty()) {
      if (!wait_for(fd, POLLOUT, stop_pipe[0], deadline)) return;
      const auto n = ::send(fd, rest.data(), rest.size(), MSG_NOSIGNAL);
      if (n <= 0) return;
      rest.remove_prefix(static_cast<std::size_t>(n));
    }
    ::shutdown(fd, SHUT_WR);
  }

  void run() {
    for (;;) {
      pollfd fds[2] = {{listen_fd, POLLIN, 0}, {stop_pipe[0], POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[1].revents) return;
      const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) continue;
      serve(fd);
      ::close(fd);
    }
  }
};

MetricsServer::MetricsServer(std::string address, std::uint16_t port,
                             std::function<std::string()> body)
    : impl_(std::make_unique<Impl>()) {
  impl_->body = std::move(body);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_port = htons(port);
  if (::inet_pton(AF_INET, address.c_str(), &at.sin_addr) != 1) {
    throw std::system_error(std::make_error_code(std::errc::invalid_argument),
                            fmt::format("metrics address {}: not an IPv4 address", address));
  }
  impl_->listen_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (impl_->listen_fd < 0) throw sys_error("metrics socket");
  const int one = 1;
  ::setsockopt(impl_->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(impl_->listen_fd, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0 ||
      ::listen(impl_->listen_fd, 16) != 0) {
    auto e = sys_error(fmt::format("metrics endpoint {}:{}", address, port));
    ::close(impl_->listen_fd);
    throw e;
  }
  socklen_t size = sizeof at;
  ::getsockname(impl_->listen_fd, reinterpret_cast<sockaddr*>(&at), &size);
  impl_->port = ntohs(at.sin_port);
  if (::pipe2(impl_->stop_pipe, O_CLOEXEC) != 0) {
    ::close(impl_->listen_fd);
    throw sys_error("metrics pipe");
  }
  impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
}

MetricsServer::~MetricsServer() {
  const char c = 0;
  (void)!::write(impl_->stop_pipe[1], &c, 1);
  impl_->thread.join();
  ::close(impl_->listen_fd);
  ::close(impl_->stop_pipe[0]);
  ::close(impl_->stop_pipe[1]);
}

std::uint16_t MetricsServer::port() const { return impl_->port; }

}  // namespace brigade::launch
