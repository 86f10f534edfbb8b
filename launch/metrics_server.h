#pragma once

// A tiny HTTP/1.1 server of the process's metrics (`brigade run --metrics-port`), on a
// thread of its own: GET /metrics answers 200 with `body()` as Prometheus' text format
// (version 0.0.4); any other path 404, any other method 405, a request that is not
// HTTP/1.x 400, a request whose head passes 8 KiB 431. One connection at a time, closed
// after each answer (Connection: close); a client has 2 s to send its head, and an
// answer that cannot be written within 2 s is dropped: a slow or hostile client delays
// a scrape, never the job, and never grows memory.
//
// THREADING. The constructor binds and listens (throws std::system_error: the address
// or port is taken or not local); `body` is called on the server's thread. The
// destructor stops the thread.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace brigade::launch {

class MetricsServer {
 public:
  /// Listens on `address` (an IPv4 address, default loopback) and `port` (0: a free one).
  MetricsServer(std::string address, std::uint16_t port, std::function<std::string()> body);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  std::uint16_t port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace brigade::launch
