#pragma once

// The trainer pool's rules as a plain state machine (issue 20): the table of calls
// (waiting, outstanding), one link per worker endpoint with its session phase,
// heartbeats, per-task deadlines, loss and the suspect/parole rule, and the one result
// accepted per attempt — everything transport/remote.h promises under DISPATCH, LOSS
// AND RECOVERY. It has no thread, no actor and no clock of its own:
//   - time comes from the one clock, actors/clock.h (production: steady; tests: ManualClock),
//   - what it asks of the network goes through DispatchNetwork (production: the
//     dispatcher actor's CAF sends in remote_pool.cc; tests: a fake that records),
//   - the network's answers come back as calls (connected, welcome, reply, lost, …)
//     naming the session they belong to (SessionRef), so a message of an ended session
//     is told apart from one of the session that replaced it.
// RemotePool is this table plus the actor that feeds it; tests drive it by hand
// (tests/transport/remote/remote_dispatch_test.cc).
//
// SESSIONS. A link's session number grows by one at every hello; a SessionRef names a
// link and a number, and an event for any other number than the link's current one is
// stale (late_dropped for a result, ignored otherwise).
//
// THREADING. Not synchronized by itself: every member function runs with `mutex` held
// (the dispatcher and RemotePool's callers share it); a caller waits on Call::done and
// on `changed` with it. DispatchNetwork's functions are called with `mutex` held.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "transport/remote/detail/remote_clock.h"
#include "transport/remote/remote.h"

namespace brigade::transport::detail {

/// One attempt of one task, from RemotePool::call until it is finished.
struct Call {
  std::uint64_t id = 0;
  std::string op;
  std::vector<char> task;
  std::string avoid;     // a worker to avoid if another is live
  std::size_t link = 0;  // while outstanding
  TimePoint sent{};
  bool started = false;  // the worker said a thread began running it
  bool finished = false;
  CallResult result;
  std::condition_variable_any done;  // its caller waits here (with the table's mutex)
};

/// A hello or a session of one link.
struct SessionRef {
  std::size_t link = 0;
  std::uint64_t number = 0;
  friend bool operator==(const SessionRef&, const SessionRef&) = default;
};

/// One worker endpoint and its session, if any.
struct Link {
  enum class Phase { idle, connecting, hello, live };
  Endpoint at;
  std::string name;  // "host:port"
  Phase phase = Phase::idle;
  bool wanted = true;         // false: left the directory (not reconnected)
  std::uint64_t session = 0;  // the number of the current hello or session
  TimePoint next_attempt{};
  TimePoint hello_sent{}, last_heard{}, last_ping{};
  std::uint32_t window = 0;
  std::uint32_t threads = 1;  // the worker's operation threads (its welcome)
  std::set<std::uint64_t> outstanding;
  // Tasks that passed their deadline after they had started and whose thread has not
  // been freed (a read that never returns): each takes its thread's share of the window
  // (usable_window()); with every thread stuck the worker is suspect — live (it answers
  // heartbeats) but out of the rotation and not counted as live.
  std::set<std::uint64_t> stuck;
  bool suspect = false;
  TimePoint parole{};  // with a thread not stuck: probed then
  // The parole's health probe: the ping sent at parole; the worker is back once its
  // pong came (pings and pongs of a session are counted, and answered in order).
  bool probing = false;
  std::uint64_t pings = 0, pongs = 0, probe = 0;
  bool ever_live = false;
  std::string last_error;
  WorkerFigures figures;
  std::vector<float> latencies_ms;  // the last kLatencies tasks
};

/// What the table asks of the network. Each is a one-way send or the start of an
/// asynchronous connect; nothing is answered by a return value.
class DispatchNetwork {
 public:
  virtual ~DispatchNetwork() = default;
  /// Connects to `at` for `link`; answered by DispatchTable::connected (then the caller
  /// sends the hello for the session it returns) or connect_failed.
  virtual void connect(std::size_t link, const Endpoint& at) = 0;
  virtual void send_task(SessionRef s, std::uint64_t id, const std::string& op,
                         std::vector<char> task) = 0;
  /// Also from a caller's thread (a stopped call), not only from the dispatcher's.
  virtual void send_cancel(SessionRef s, std::uint64_t id) = 0;
  virtual void send_ping(SessionRef s) = 0;
  /// Hello or session `s` ended: no message of it is awaited any more.
  virtual void close(SessionRef s) = 0;
};

class DispatchTable {
 public:
  static constexpr std::size_t kLatencies = 4096;
  static constexpr std::chrono::seconds kHelloTimeout{5};

  /// `options.workers` become links (connected at the first tick); the time is
  /// `options.clock`'s (the steady clock if null). `network` must outlive the table.
  DispatchTable(PoolOptions options, DispatchNetwork& network);

  mutable std::mutex mutex;
  // Notified at every change a caller or a test may wait for: a worker came, went or
  // was suspended, a call was sent or answered, a result was dropped as late.
  mutable std::condition_variable_any changed;

  // -- the callers' side ------------------------------------------------------------
  /// Queues `call` (giving it an id); or finishes it at once — the pool stopped or its
  /// dispatcher died, or no worker is live — and returns false.
  bool submit(const std::shared_ptr<Call>& call);
  /// Sends waiting calls to the live workers with the most free credit (FIFO).
  void dispatch();
  /// The caller stopped waiting: the attempt is forgotten (cancelled on its worker; a
  /// result that still comes is late).
  void abandon(const std::shared_ptr<Call>& call);
  /// The pool's end: every call returns CallStatus::stopped; nothing new is accepted.
  void shut_down();
  /// The dispatcher ended while the pool runs (it should not): every call, and every
  /// later one, returns CallStatus::no_workers with `why`.
  void dispatcher_died(const std::string& why);

  // -- the network's side -----------------------------------------------------------
  /// Heartbeats, deadlines, hello timeouts, parole and (re)connects, at clock->now().
  void tick();
  std::size_t add_link(const Endpoint& at);
  /// A directory's list: these endpoints (and options.workers) are wanted, others are
  /// not reconnected once lost.
  void set_directory_workers(const std::vector<Endpoint>& endpoints);
  /// The connection of `link` reached its gate: the hello of the session returned is
  /// to be sent. nullopt when the link no longer waits for it.
  std::optional<SessionRef> connected(std::size_t link);
  /// The connect failed (`why`, empty for "no gate yet"): tried again after
  /// reconnect_interval.
  void connect_failed(std::size_t link, const std::string& why);
  /// Whether `s` is the hello being waited for (a welcome or refusal of it is expected).
  bool in_hello(SessionRef s) const;
  /// The worker welcomed hello `s` with a credit window and its thread count: the link
  /// is live.
  void welcome(SessionRef s, std::uint32_t window, std::uint32_t threads = 1);
  /// The welcome to hello `s` was malformed: tried again after reconnect_interval.
  void bad_welcome(SessionRef s, const std::string& why);
  /// The worker refused hello `s` (another build, token, operation…): tried again
  /// after 5 × reconnect_interval.
  void refused(SessionRef s, const std::string& why);
  /// A result, failure or refusal of task `id` from session `s` (nullopt: a session
  /// not known any more). Accepted only from the live session the attempt is
  /// outstanding on; anything else is late_dropped.
  void reply(std::optional<SessionRef> s, std::uint64_t id, CallStatus status, std::string reason,
             SharedBytes bytes);
  void started(SessionRef s, std::uint64_t id);
  void freed(SessionRef s, std::uint64_t id);
  void heard(SessionRef s);  // a pong
  /// Session `s` is gone (its connection went down). false: not a live session.
  bool lost(SessionRef s, const std::string& reason);
  /// The live session of `link`, if it is live.
  std::optional<SessionRef> live_session(std::size_t link) const;

  // -- reads ------------------------------------------------------------------------
  const PoolOptions& options() const { return options_; }
  const actors::Clock& clock() const { return *clock_; }
  bool stopping() const { return stopping_; }
  const std::string& dead() const { return dead_; }
  std::size_t live() const { return live_; }
  const std::vector<Link>& links() const { return links_; }
  std::size_t pending() const { return pending_.size(); }
  std::size_t outstanding() const { return outstanding_.size(); }
  /// Outstanding attempts that a worker's thread has begun.
  std::size_t outstanding_started() const;
  /// Why the directory could not be reached, while it has not been reached.
  const std::optional<std::string>& directory_unreachable() const { return directory_unreachable_; }
  void set_directory_unreachable(std::optional<std::string> why);
  std::optional<TimePoint> no_worker_since() const { return no_worker_since_; }
  std::vector<std::string> lost_workers() const;
  PoolStats stats() const;  // without the counts the pool's guard and listener keep

 private:
  void finish(const std::shared_ptr<Call>& call, CallStatus status, std::string reason,
              SharedBytes bytes = {});
  Link* session_in(SessionRef s, Link::Phase phase);
  void lose(std::size_t index, const std::string& reason);
  void readmit(Link& l, const char* why);
  static std::uint32_t usable_window(const Link& l);
  void suspend(Link& l, bool started, TimePoint now);
  void fail_pending(CallStatus status, const std::string& why);
  void expire(TimePoint now);
  void tick_link(std::size_t index, TimePoint now);
  void end_hello(Link& l, std::string error, std::chrono::milliseconds backoff);
  void record_done(Link& l, const Call& call, std::size_t bytes);

  PoolOptions options_;
  std::shared_ptr<const actors::Clock> clock_;
  DispatchNetwork& network_;
  std::deque<std::shared_ptr<Call>> pending_;
  std::map<std::uint64_t, std::shared_ptr<Call>> outstanding_;
  std::vector<Link> links_;
  std::uint64_t next_id_ = 1;
  bool stopping_ = false;
  std::string dead_;  // why the dispatcher ended, if it did while the pool runs
  std::size_t live_ = 0;
  std::optional<TimePoint> no_worker_since_;
  std::optional<std::string> directory_unreachable_;
  PoolStats stats_;
};

/// Tests' step-by-step view of a running pool: waits (without polling) until
/// `done(table)` holds, re-checked at every change of the table (with its mutex held),
/// or until `timeout`, which only guards against a hang (false).
struct PoolAccess {
  static bool wait(const RemotePool& pool, const std::function<bool(const DispatchTable&)>& done,
                   std::chrono::milliseconds timeout);
};

/// The same for a worker node's counts, re-checked at every change of them.
struct WorkerAccess {
  static bool wait(const WorkerNode& worker, const std::function<bool(const WorkerStats&)>& done,
                   std::chrono::milliseconds timeout);
};

}  // namespace brigade::transport::detail
