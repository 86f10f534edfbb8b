#pragma once

// What the remote layer's tests share: the job token, byte helpers and the "upper"
// operation (the task's text in upper case) that stands in for real work.

#include <cctype>
#include <chrono>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "transport/remote/detail/remote_dispatch.h"
#include "transport/remote/remote.h"

namespace brigade::transport::test {

inline const Security kSecurity{.token = "the job's token"};

inline std::vector<char> bytes_of(std::string_view s) { return {s.begin(), s.end()}; }
inline std::string text_of(const std::vector<char>& v) { return {v.begin(), v.end()}; }
inline std::string text_of(const SharedBytes& b) { return {b.begin(), b.end()}; }

// "upper": the task's text in upper case.
inline OperationRegistry upper_ops() {
  OperationRegistry ops;
  ops.add({"upper", 1}, [](std::span<const char> task, const OperationContext&) {
    std::vector<char> out(task.begin(), task.end());
    for (auto& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return out;
  });
  return ops;
}

// Waits for the pool's (or the worker's) state to satisfy `done`, re-checked at each of
// its changes: no polling, no sleep. The timeout only turns a hang into a failure.
inline bool until(const RemotePool& pool,
                  const std::function<bool(const detail::DispatchTable&)>& done) {
  return detail::PoolAccess::wait(pool, done, std::chrono::seconds(60));
}
inline bool until(const WorkerNode& worker, const std::function<bool(const WorkerStats&)>& done) {
  return detail::WorkerAccess::wait(worker, done, std::chrono::seconds(60));
}

inline WorkerOptions worker_options(int threads = 2) {
  WorkerOptions o;
  o.threads = threads;
  o.security = kSecurity;
  return o;
}

/// A trainer's session key as the worker's tests use it.
inline const std::string kTrainerKey(16, 't');

}  // namespace brigade::transport::test
