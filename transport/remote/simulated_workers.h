#pragma once

// Worker nodes that speak the remote protocol but run nothing, for load tests of a
// RemotePool (bench/bench_dispatch.cc): N workers in ONE actor system of this process,
// each listening on a port of its own on 127.0.0.1 behind the token's handshake. A
// worker's gate answers every hello with a welcome (no checks: any trainer, any
// operation); its session holds each task for `delay` on one of `threads` slots (a
// timer, no CPU) and answers with a result of `result_bytes` (at least 8) whose first 8
// bytes are the task's residence on the worker (arrival to result sent, ns, native
// byte order); it answers pings, ignores cancels, and counts its busy time.
//
// THREADING. Thread-safe; figures() may be read while a pool drives the workers.

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "transport/remote/endpoint.h"
#include "transport/remote/remote.h"

namespace brigade::transport {

struct SimulatedWorkerOptions {
  std::chrono::microseconds delay{2000};
  std::uint32_t threads = 1;  // slots per worker
  std::uint32_t window = 2;   // announced in the welcome
  std::size_t result_bytes = 64;
  Security security{};  // the job token (TLS is not simulated)
};

class SimulatedWorkers {
 public:
  struct Figures {
    std::int64_t busy_ns = 0;  // summed over the worker's slots
    std::uint64_t tasks = 0;   // results sent
  };

  /// Starts `n` workers; throws RemoteError (a port that cannot be bound).
  SimulatedWorkers(std::size_t n, SimulatedWorkerOptions options);
  ~SimulatedWorkers();
  SimulatedWorkers(const SimulatedWorkers&) = delete;
  SimulatedWorkers& operator=(const SimulatedWorkers&) = delete;

  const std::vector<Endpoint>& endpoints() const;
  std::vector<Figures> figures() const;  // by worker, in the order of endpoints()
  void reset_figures();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace brigade::transport
