#pragma once

// The statistics link (issue 24): each rank's reports to a collector on rank 0, over a
// TCP connection of its own (not the workers' CAF links: a job that decodes locally has
// none), authenticated with the job token as the cluster's links are
// (detail/remote_auth.h), the token never on the wire.
//
// HANDSHAKE (all fields fixed-size, integers big-endian):
//   collector → sender   kReportMagic (16) · collector nonce cn (16)
//   sender → collector   kReportMagic (16) · sender nonce sn (16) · rank (4)
//                        · HMAC-SHA256(token, "stats-sender" · cn · sn·rank)
//   collector → sender   HMAC-SHA256(token, "stats-collector" · cn · sn·rank)
// (mutual: the sender checks it too). `rank` is the sender's id: a rank of the world, or
// kWorkerSender for a worker node (`brigade worker --stats`; it names itself in its
// reports). Both then hold the session key
// HMAC-SHA256(token, "stats-session" · cn · sn·rank): fresh per connection, bound to
// the rank.
// FRAMES, sender → collector only: length (4) · sequence (8) · payload (length bytes)
// · HMAC-SHA256(session key, "report" · length·sequence · payload).
//
// REFUSED AND COUNTED, never a crash or a stall of the collector (its one thread polls
// every connection, non-blocking):
//   - a handshake with a wrong MAC (a foreign token), a bad magic, a rank outside the
//     world, or not complete within handshake_timeout: refused_handshakes, closed;
//   - a frame longer than max_report_bytes (oversized: closed before reading it), or
//     with a wrong MAC (forged, or replayed from another session: the key differs):
//     refused_frames, closed (the stream cannot be resynchronized);
//   - a frame whose sequence is not above the last delivered for that rank (replayed or
//     out of order, across connections too): refused_frames, skipped, the connection kept.
// MEMORY. At most max_pending connections are in the handshake (each holds a buffer of
// 68 bytes and a deadline); beyond that a new connection is closed at once. An
// authenticated connection buffers at most one frame (≤ max_report_bytes + 44 bytes);
// a rank's newer connection replaces its older one, so at most world_size rank
// connections and max_workers worker connections are held.
//
// NEVER BLOCKS THE SENDER'S CALLER. ReportSender::send() queues the bytes (at most
// kSendQueue; beyond that the oldest is dropped and counted) and returns; its thread
// connects, authenticates and writes, reconnecting with a backoff (100 ms doubling to
// 2 s) when the collector is not there yet or the connection breaks.
//
// THREADING. Both classes run one thread each; every public member is thread-safe.
// The collector's `deliver` runs on its thread, one call at a time.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "transport/remote/endpoint.h"

namespace brigade::transport {

inline constexpr std::size_t kSendQueue = 4;
/// The sender id of a worker node (not a rank; HANDSHAKE).
inline constexpr std::uint32_t kWorkerSender = 0xffffffff;

struct ReportCollectorOptions {
  std::string token{};  // the job token; not empty
  std::uint32_t world_size = 1;
  std::size_t max_report_bytes = std::size_t{1} << 20;
  std::size_t max_pending = 64;   // connections in the handshake at once
  std::size_t max_workers = 256;  // worker nodes' connections at once
  std::chrono::milliseconds handshake_timeout{5000};
};

struct ReportCollectorCounts {
  std::uint64_t authenticated = 0;       // handshakes passed
  std::uint64_t refused_handshakes = 0;  // foreign token, bad magic or rank, timeout, excess
  std::uint64_t delivered = 0;           // frames handed to `deliver`
  std::uint64_t refused_frames = 0;      // oversized, bad MAC, replayed, out of order
  std::uint64_t pending = 0;             // connections in the handshake now
  std::uint64_t buffered_bytes = 0;      // held by all connections now
};

class ReportCollector {
 public:
  /// `rank`: the sender's authenticated id (a rank, or kWorkerSender).
  using Deliver =
      std::function<void(std::uint32_t rank, std::uint64_t sequence, std::span<const char>)>;

  /// Listens on `at` (port 0: any free port). Throws RemoteError when it cannot bind.
  /// `counted` (if any) runs on the collector's thread whenever a count grew (a test
  /// waits on it instead of sleeping).
  ReportCollector(const Endpoint& at, ReportCollectorOptions options, Deliver deliver,
                  std::function<void()> counted = {});
  ~ReportCollector();
  ReportCollector(const ReportCollector&) = delete;
  ReportCollector& operator=(const ReportCollector&) = delete;

  std::uint16_t port() const { return port_; }
  ReportCollectorCounts counts() const;

 private:
  struct Connection;
  void run();

  ReportCollectorOptions options_;
  Deliver deliver_;
  std::function<void()> counted_;
  int fd_ = -1;
  int wake_[2] = {-1, -1};
  std::uint16_t port_ = 0;
  mutable std::mutex counts_mutex_;
  ReportCollectorCounts counts_{};
  std::thread thread_;
};

struct ReportSenderCounts {
  std::uint64_t sent = 0;       // frames written to a connection
  std::uint64_t dropped = 0;    // oldest dropped from a full queue
  std::uint64_t connected = 0;  // handshakes passed
  std::uint64_t failed = 0;     // connections that failed or broke
};

class ReportSender {
 public:
  /// Starts the thread; connects on the first send(). `rank` < the collector's world, or
  /// kWorkerSender.
  ReportSender(Endpoint collector, std::string token, std::uint32_t rank);
  ~ReportSender();  // ends the thread; what is still queued is lost
  ReportSender(const ReportSender&) = delete;
  ReportSender& operator=(const ReportSender&) = delete;

  /// Queues one report (never blocks on the network).
  void send(std::vector<char> payload);
  /// Waits until the queue is empty (sent or dropped) or `timeout` passed; true if it
  /// emptied. For a rank's last report before it exits.
  bool drain(std::chrono::milliseconds timeout);
  ReportSenderCounts counts() const;

 private:
  void run();

  Endpoint collector_;
  std::string token_;
  std::uint32_t rank_;
  mutable std::mutex mutex_;
  std::condition_variable wake_, drained_;
  std::deque<std::vector<char>> queue_;
  bool stopping_ = false, writing_ = false;
  std::atomic<bool> stopped_{false};  // stopping_, for the I/O between locks
  ReportSenderCounts counts_{};
  std::uint64_t sequence_ = 0;
  std::thread thread_;
};

}  // namespace brigade::transport
