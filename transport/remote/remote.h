#pragma once

// Remote decode workers: a worker node hosts named, versioned operations; a trainer's
// RemotePool deals tasks to the worker nodes it knows of (given, or told by a
// directory) and accepts exactly one result per task attempt. Operations are C++
// functions registered by name on both sides (never shipped code): the trainer names
// the operation and sends the task's bytes (a Cap'n Proto message of the operation's
// own schema, e.g. launch/loader/remote_ops.h), the worker runs it and returns the result's
// bytes.
//
// NETWORK. Every process has its own CAF actor system with the middleman (BASP over
// TCP; over TLS through CAF's OpenSSL module when Security has certificates), separate
// from any pipeline's. A worker publishes one gate actor; the directory is one actor
// published by rank 0's pool. Messages are CAF tuples of atoms, integers, strings and
// Cap'n Proto bytes (transport/remote/remote.capnp); nothing else is accepted.
//
// SECURITY. CAF's wire protocol has no authentication and guessable actor ids, so:
// - Without TLS no connection becomes a BASP peer before it has passed a
//   challenge-response on the job token (Security::token, from a file or the
//   environment, never argv): HMAC-SHA256 over a fresh nonce from each side, so the
//   token never crosses the network; then the socket is handed to CAF's middleman
//   (detail/remote_auth.h). Connections in that handshake are bounded in number, bytes
//   and time. With TLS, a peer whose certificate is not signed by Security::tls_ca is
//   refused by the TLS handshake.
// - The hello (at the gate) and the join and subscribe (at the directory) carry a
//   digest of the token, compared in constant time; a session then has two random
//   128-bit keys, the worker's (in every trainer → worker message) and the trainer's (in
//   every worker → trainer message), compared in constant time.
// - No actor of a worker's or a pool's system obeys a peer's exit, error or down
//   message (detail/remote_guard.h): they are dropped and counted, and act only on
//   actors it monitors. Anything else — a wrong key, an unknown message — is dropped and
//   counted too; the log gets a summary line at most every 10 s, not a line per message.
// SESSIONS AND FAIRNESS (worker). Each trainer connection is a session with a credit
// window (WorkerOptions::window tasks outstanding; a task beyond it is refused): the
// window, not CAF's unbounded mailbox, bounds the worker's memory. The worker's
// threads take queued tasks from the sessions in turn (round robin), so trainers
// share its cores evenly — unless the directory sent rank weights (REBALANCING): then
// a session is served in proportion to its trainer's rank's weight (stride scheduling,
// detail/worker_table.h TURNS), still never holding more than its window.
// REBALANCING. The pool hosting the directory (rank 0) may set per-rank weights
// (set_rank_weights); the directory sends them to every worker joined, and to each that
// joins later, with the job token's digest (a worker drops, and counts, weights without
// it or not from the directory it joined). A trainer's hello names its rank
// (PoolOptions::rank). A session ends when its trainer's connection goes down or
// when no heartbeat came for heartbeat_timeout (a frozen trainer): its queued tasks
// are dropped, running ones see their stop token, and the worker serves the next.
//
// DISPATCH, LOSS AND RECOVERY (pool). call() queues one attempt of a task; the pool
// sends it to the live worker with the most free credit (FIFO among waiting calls).
// A worker is lost when its connection goes down (a killed process: milliseconds),
// when it missed heartbeats for heartbeat_timeout (a frozen process: SIGSTOP), or for
// one task when that task passed task_timeout (a stuck operation; the worker is told
// to cancel it). Every call outstanding on a lost worker returns CallStatus::lost at
// once, naming the worker and the reason, and whether the worker had started it
// (CallResult::started: the worker says so when a thread takes a task): the caller
// decides whether to try again and whether the loss counts against the task (RemotePool
// never re-runs a task itself, so the caller's attempt count is exact). A started task
// that passed its deadline holds its thread (a read that never returns): the worker's
// window shrinks by that thread's share (window × free threads / threads) until the
// thread is free; with every thread held it is suspect — connected, but it gets no new
// task and does not count as live. A worker whose task passed its deadline before it
// started is suspect for one task_timeout (parole), then back once it answers a health
// probe (a ping sent then), or as soon as a task of it starts.
// A result is accepted only from the session and worker the attempt was sent to and
// only while the attempt is outstanding: a late result of a lost attempt (a frozen
// worker that wakes) and any duplicate is dropped and counted. Lost workers are
// reconnected every reconnect_interval (a new session; they get new work).
//
// TIME. Deadlines, heartbeats, reconnects and parole go by a Clock (the options'
// `clock`; by default std::chrono::steady_clock). The pool's rules and the worker's live
// in plain state machines (detail/remote_dispatch.h, detail/worker_table.h) that tests
// drive step by step with a manual clock; the actors only carry messages to them.
//
// THREADING. WorkerNode and RemotePool are thread-safe: call() is made from many
// threads at once (a pipeline stage's), stats() from any. Destruction stops
// everything; calls still waiting return CallStatus::stopped.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "actors/clock.h"
#include "transport/remote/endpoint.h"

namespace caf {
class actor_system_config;
}

namespace brigade::transport {

namespace detail {
struct PoolAccess;    // tests' view of a pool's rules (detail/remote_dispatch.h)
struct WorkerAccess;  // and of a worker's counts (detail/remote_dispatch.h)
}  // namespace detail

/// The version of the messages in transport/remote/remote.capnp and of their sequence.
inline constexpr std::uint32_t kProtocolVersion = 1;
/// Rank weights (REBALANCING): an even share, and the largest weight accepted.
inline constexpr std::uint32_t kNeutralRankWeight = 1000;
inline constexpr std::uint32_t kMaxRankWeight = 1000000;
/// This build: the project version and the source commit, set at configure time. Peers
/// of different builds refuse each other (a batch must decode byte-identically).
std::string_view build_id();

/// Codes of RemoteError, in remote_category() ("brigade.remote"). Each maps to a
/// generic std::errc condition, so code that knows nothing of the network (the engine's
/// retry, actors::is_transient) can tell whether retrying may help:
///   failed           -> protocol_error        a setup or protocol error: a port that
///                                             cannot be bound, unreadable TLS files, a
///                                             malformed or mismatched message
///   refused          -> permission_denied     a peer refused us (token, build, dataset)
///   unreachable      -> connection_refused    cannot connect (transient)
///   timed_out        -> timed_out             a peer did not answer in time (transient)
///   connection_lost  -> connection_aborted    a connection broke midway (transient)
///   lost_on_attempts -> (none)                a task lost on every attempt allowed (a
///                                             poison sample that takes its workers
///                                             down): not transient, never retried
/// The values are stable: they cross processes.
enum class RemoteErrc {
  failed = 1,
  refused = 2,
  unreachable = 3,
  timed_out = 4,
  connection_lost = 5,
  lost_on_attempts = 6,
};

const std::error_category& remote_category() noexcept;
std::error_code make_error_code(RemoteErrc code) noexcept;
/// The code's name: "failed", "refused", …, "lost_on_attempts".
std::string_view remote_code_name(RemoteErrc code);

/// A remote setup or exchange that cannot work (a port that cannot be bound, unreadable
/// TLS files, a refused hello, a malformed message); what() says which and why, code()
/// what kind (RemoteErrc::failed unless said otherwise).
class RemoteError : public std::system_error {
 public:
  explicit RemoteError(const std::string& what, RemoteErrc code = RemoteErrc::failed);
  RemoteError(RemoteErrc code, const std::string& what) : RemoteError(what, code) {}
  const char* what() const noexcept override { return text_.c_str(); }

 private:
  std::string text_;
};

struct Security {
  std::string token{};                          // the job token: must not be empty
  std::string tls_cert{}, tls_key{}, tls_ca{};  // PEM files: all three, or none (no TLS)
  bool tls() const { return !tls_cert.empty(); }
};

/// Where the pool and the worker read the time: Brigade's one clock interface
/// (actors/clock.h). Leave the options' `clock` null for std::chrono::steady_clock;
/// tests pass an actors::ManualClock they advance by hand. With a clock given, a frozen
/// peer is noticed only by the options' heartbeats on that clock (and a closed
/// connection at once); without, also by the connection's own real-time heartbeat.
using actors::Clock;

// -- Operations --------------------------------------------------------------------

struct OperationVersion {
  std::string name{};
  std::uint32_t version = 1;
  friend bool operator==(const OperationVersion&, const OperationVersion&) = default;
};

struct OperationContext {
  std::stop_token stop;  // requested when the task is cancelled or its session ends
};

/// Runs one task: its bytes in, the result's bytes out. May throw: the trainer then
/// gets CallStatus::failed with what() (a task it sent was malformed, say); a sample's
/// own failure belongs in the result, not in a throw. Called from worker threads,
/// concurrently: it must be thread-safe.
using Operation =
    std::function<std::vector<char>(std::span<const char> task, const OperationContext&)>;

/// Operations by name. Register explicitly (no static initializers).
class OperationRegistry {
 public:
  /// Throws std::invalid_argument for an empty name or a name already registered.
  void add(OperationVersion version, Operation operation);
  const Operation* find(std::string_view name) const;
  std::vector<OperationVersion> list() const;

 private:
  std::vector<std::pair<OperationVersion, Operation>> operations_;
};

// -- Worker node -------------------------------------------------------------------

struct WorkerOptions {
  Endpoint listen{"127.0.0.1", 0};      // port 0: a free port (address() tells which)
  std::optional<Endpoint> join{};       // a directory to join (retried until it answers)
  std::optional<Endpoint> advertise{};  // what the directory tells trainers; default:
                                        // the listen host and the bound port
  int threads = 0;                      // operation threads; 0: the machine's cores
  std::uint32_t window = 0;             // tasks outstanding per session; 0: 2 × threads
  Security security{};
  std::uint64_t fingerprint = 0;  // the dataset this worker serves; 0: any
  std::chrono::milliseconds heartbeat_timeout{2000};
  std::shared_ptr<const Clock> clock{};  // null: the steady clock
};

struct WorkerStats {
  std::uint64_t sessions_opened = 0;
  std::uint64_t sessions_open = 0;
  std::uint64_t hellos_refused = 0;
  std::uint64_t messages_dropped = 0;           // unauthenticated or unknown
  std::uint64_t system_messages_dropped = 0;    // exits, downs, errors… not obeyed
  std::uint64_t connections_authenticated = 0;  // passed the token's handshake (no TLS)
  std::uint64_t connections_refused = 0;        // failed it, or too many in it at once
  std::uint64_t drop_log_lines = 0;             // summary lines logged about the drops
  std::uint64_t tasks_outstanding = 0;          // now: received, queued or running
  std::uint64_t tasks_done = 0;
  std::uint64_t tasks_failed = 0;     // the operation threw
  std::uint64_t tasks_cancelled = 0;  // cancelled, or dropped with their session
  double busy_seconds = 0;            // summed over threads
  std::uint64_t weight_updates = 0;   // rank weights taken from the directory
};

/// What a worker served since the last WorkerNode::take_served() (or its start): the
/// interval of its statistics report (`brigade worker --stats`, issue 24).
struct WorkerServed {
  struct Trainer {
    std::string name{};       // the session's trainer, as its hello names it
    std::uint64_t tasks = 0;  // results sent to it
    double busy_s = 0;        // the threads' time on them
  };
  std::vector<Trainer> trainers{};  // served in the interval, by name
  std::uint64_t tasks = 0;          // results sent
  std::uint64_t failed = 0;         // operations that threw
  double busy_s = 0;                // the threads' time on tasks that finished
  double p50_ms = 0, p99_ms = 0;    // the interval's task times (within ±6%; 0: none)
  std::uint64_t queued = 0;         // now: tasks waiting for a thread
  std::uint64_t running = 0;        // now: tasks on a thread
  std::uint32_t threads = 0;
};

class WorkerNode {
 public:
  /// Starts the system, publishes the gate, starts the threads (and the directory
  /// join). Throws RemoteError.
  WorkerNode(WorkerOptions options, OperationRegistry operations);
  ~WorkerNode();
  WorkerNode(const WorkerNode&) = delete;
  WorkerNode& operator=(const WorkerNode&) = delete;

  Endpoint address() const;  // where it listens (the bound port)
  WorkerStats stats() const;
  /// What it served since the last call (one reader: its statistics reporter).
  WorkerServed take_served();

 private:
  friend struct detail::WorkerAccess;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// -- Trainer side ------------------------------------------------------------------

struct PoolOptions {
  std::vector<Endpoint> workers{};      // worker nodes to use
  std::optional<Endpoint> directory{};  // a directory to subscribe to
  bool host_directory = false;          // publish the directory at `directory` (rank 0)
  Security security{};
  std::vector<OperationVersion> operations{};  // what call() will name
  std::uint64_t fingerprint = 0;               // the dataset's
  std::string name{};                          // this trainer, for the workers' logs
  std::optional<std::uint32_t> rank{};         // this trainer's (REBALANCING)
  std::chrono::milliseconds task_timeout{30000};
  std::chrono::milliseconds heartbeat_interval{500};
  std::chrono::milliseconds heartbeat_timeout{2000};
  std::chrono::milliseconds reconnect_interval{1000};
  std::shared_ptr<const Clock> clock{};  // null: the steady clock
};

enum class CallStatus {
  done,        // bytes: the result
  failed,      // the operation threw on the worker (reason)
  lost,        // the worker was lost, or the task passed its deadline (reason)
  no_workers,  // no worker is live (now, or any more while the call waited)
  stopped,     // the stop token, or the pool's end
};

/// Read-only bytes held by shared ownership: a result as it was received (its memory
/// recycled among received results once the last copy is dropped: no fresh pages, no
/// zero fill, no copy; detail/payload.h).
class SharedBytes {
 public:
  SharedBytes() = default;
  SharedBytes(std::vector<char> bytes);  // NOLINT: takes the vector over, no copy
  SharedBytes(std::shared_ptr<const void> owner, const char* data, std::size_t size)
      : owner_(std::move(owner)), data_(data), size_(size) {}

  const char* data() const { return data_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const char* begin() const { return data_; }
  const char* end() const { return data_ + size_; }
  std::span<const char> span() const { return {data_, size_}; }
  /// Keeps the bytes alive.
  const std::shared_ptr<const void>& owner() const { return owner_; }

 private:
  std::shared_ptr<const void> owner_;
  const char* data_ = nullptr;
  std::size_t size_ = 0;
};

struct CallResult {
  CallStatus status = CallStatus::stopped;
  SharedBytes bytes{};
  std::string worker{};  // the worker it ran on ("host:port")
  std::string reason{};
  // lost: whether the worker had begun running the task. An attempt lost before it
  // started (its worker died or froze with it queued, or sent to a worker already
  // dead) says nothing about the task: the caller need not count it.
  bool started = false;
};

struct WorkerFigures {
  std::string name{};
  bool live = false;
  std::uint64_t tasks = 0;        // results accepted from it
  std::uint64_t lost = 0;         // attempts lost on it
  std::uint64_t bytes = 0;        // result bytes accepted
  double p50_ms = 0, p99_ms = 0;  // task latency, sent to result
  double latency_s = 0;           // Σ of the accepted results' latencies
  std::uint64_t sessions = 0;     // sessions opened (1 + reconnections)
};

struct PoolStats {
  std::uint64_t calls = 0;
  std::uint64_t done = 0;
  std::uint64_t failed = 0;
  std::uint64_t lost = 0;
  std::uint64_t late_dropped = 0;         // results of attempts no longer outstanding
  std::uint64_t messages_dropped = 0;     // from peers (unknown, system messages, refusals)
  std::uint64_t connections_refused = 0;  // at the directory: failed the handshake
  std::uint64_t bytes = 0;
  std::size_t live_workers = 0;
  std::vector<WorkerFigures> workers{};
};

/// For actors::BuildOptions::configure_system of a pipeline whose decoding waits on a
/// RemotePool (its CPU stages only carry batches): the engine's idle threads sleep on
/// their condition variable at once rather than poll in 50 µs naps for 25 ms, and wake
/// to steal work every 10 ms rather than every 1 ms (a message sent to a thread wakes it
/// at once either way). Polling and waking took over half the trainer's CPU in a remote
/// run (issue 21). Not for a pipeline that decodes locally: polling threads steal its
/// decode tasks sooner (measured: a third more samples/s).
void quiet_idle_threads(caf::actor_system_config& config);

class RemotePool {
 public:
  /// Starts the system, the directory (host_directory) and the connections; returns
  /// without waiting for any worker. Throws RemoteError.
  explicit RemotePool(PoolOptions options);
  ~RemotePool();
  RemotePool(const RemotePool&) = delete;
  RemotePool& operator=(const RemotePool&) = delete;

  /// One attempt of `task` on one worker (not `avoid`, if another is live). Blocks
  /// until it is done, lost, failed or stopped; returns no_workers at once when no
  /// worker is live. Any thread.
  CallResult call(std::string_view operation, std::vector<char> task, std::stop_token stop,
                  std::string_view avoid = {});
  /// Waits until a worker is live (true), or `timeout` or a stop (false).
  bool wait_for_worker(std::chrono::milliseconds timeout, std::stop_token stop);

  std::size_t live_workers() const;
  /// Workers that were live and are lost now ("host:port (reason)").
  std::vector<std::string> lost_workers() const;
  /// Since when no worker has been live (since the start if none ever was).
  std::optional<std::chrono::steady_clock::time_point> no_worker_since() const;
  PoolStats stats() const;
  /// The directory's bound address (host_directory; its port if `directory` had 0).
  std::optional<Endpoint> directory_address() const;
  /// Rank 0 (host_directory): waits until `count` distinct trainers (this pool's own
  /// included) have subscribed to the directory, at most `timeout`, or until `stop`.
  /// True once they have, and at once without a directory hosted here. So rank 0 can
  /// keep the directory until a rank that started late has found it (its worker list
  /// outlives the directory).
  bool wait_for_subscribers(std::size_t count, std::chrono::milliseconds timeout,
                            std::stop_token stop);
  /// Distinct trainers that have subscribed to the directory hosted here so far.
  std::size_t subscribers() const;
  /// REBALANCING (host_directory): the weight of each rank's sessions on every worker
  /// (index: rank; kNeutralRankWeight: an even share), sent to the workers joined now
  /// and to each that joins later. Returns at once; without a directory hosted here,
  /// does nothing.
  void set_rank_weights(std::vector<std::uint32_t> weights);
  /// Why the directory could not be reached, while it has not been reached (after a
  /// failed attempt); nullopt once reached, before the first attempt, or without one.
  std::optional<std::string> directory_unreachable() const;

 private:
  friend struct detail::PoolAccess;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace brigade::transport

template <>
struct std::is_error_code_enum<brigade::transport::RemoteErrc> : std::true_type {};
