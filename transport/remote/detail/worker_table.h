#pragma once

// The worker node's rules as a plain state machine (issue 20), as DispatchTable is the
// pool's: the gate's hello checks, the sessions (keys, credit window, duplicates,
// heartbeats, a trainer that is gone), the operation threads' turn among sessions, and
// the directory join — everything transport/remote.h promises under SESSIONS AND
// FAIRNESS. No thread, actor or clock of its own:
//   - time comes from the one clock, actors/clock.h (production: steady; tests: ManualClock),
//   - what it sends goes through WorkerNetwork / JoinNetwork (production: the CAF
//     actors of worker_node.cc; tests: fakes that record),
//   - the network's messages and the operation threads come back as calls (hello,
//     task, ping, take, finish, …), naming the session by its number.
// WorkerNode is this table plus the gate, session and joiner actors that feed it and
// the threads that run take()/finish(); tests drive it by hand
// (tests/transport/remote/worker_table_test.cc).
//
// MEMORY. Nothing is kept for a hello that is refused (a peer without the token, of
// another build…): a counter grows. A session holds at most `window` tasks (queued or
// running); a task beyond it is refused, a task whose id the session already holds is
// dropped, and an ended session holds nothing (its queue is dropped at once, its
// running tasks are stopped and forgotten when their threads return).
//
// THREADING. Not synchronized by itself: every member function runs with `mutex` held
// (the actors and the threads share it). The networks' functions are called with it held.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <vector>

#include "actors/detail/histogram.h"
#include "transport/remote/detail/remote_clock.h"
#include "transport/remote/detail/wire_messages.h"
#include "transport/remote/remote.h"

namespace brigade::transport::detail {

/// What the session table sends to trainers. One-way sends to the trainer of session
/// number `s`; nothing is answered by a return value.
class WorkerNetwork {
 public:
  virtual ~WorkerNetwork() = default;
  virtual void send_refuse_task(std::uint64_t s, std::uint64_t id, const std::string& why) = 0;
  virtual void send_pong(std::uint64_t s) = 0;
  /// A thread began running task `id` (the trainer counts a lost attempt only then).
  virtual void send_started(std::uint64_t s, std::uint64_t id) = 0;
  /// A cancelled task's thread is free again.
  virtual void send_freed(std::uint64_t s, std::uint64_t id) = 0;
  virtual void send_result(std::uint64_t s, std::uint64_t id, std::vector<char> bytes) = 0;
  virtual void send_failed(std::uint64_t s, std::uint64_t id, const std::string& why) = 0;
  /// Session `s` ended: nothing of it is sent or accepted any more.
  virtual void close(std::uint64_t s) = 0;
};

/// What a hello came to.
struct HelloOutcome {
  std::optional<std::uint64_t> session;  // the session opened, if it was accepted
  std::string refusal;                   // why not, naming both sides (empty: accepted)
  std::string trainer_key;               // to put in the answer (welcome or refusal)
  std::vector<char> welcome;             // the Welcome's bytes (accepted)
};

/// A task a thread took: run it, then hand it back to finish().
struct TakenTask {
  std::uint64_t session = 0;
  std::uint64_t id = 0;
  std::string op;
  std::vector<char> payload;
  std::stop_token stop;  // requested by a cancel or the session's end
  TimePoint started{};
};

/// Why a peer's message was dropped (counted in WorkerStats::messages_dropped and
/// logged by the caller with the peer's address), or nullptr: it was taken.
using Dropped = const char*;

class WorkerTable {
 public:
  /// `options.threads` and `window` resolved (> 0). `name` is this worker ("host:port",
  /// for messages). `network` must outlive the table.
  WorkerTable(WorkerOptions options, std::uint32_t window, OperationRegistry operations,
              WorkerNetwork& network);

  mutable std::mutex mutex;
  std::condition_variable_any work;     // a task was queued, or the table is stopping
  std::condition_variable_any changed;  // the counts changed (WorkerAccess::wait)

  void set_name(std::string name) { name_ = std::move(name); }

  // -- the gate -----------------------------------------------------------------------
  /// A hello's bytes; `answerable`: it came with an actor to answer (an anonymous one
  /// is refused). Refused: nothing kept, hellos_refused counted.
  HelloOutcome hello(std::span<const char> bytes, bool answerable);

  // -- a session's messages (key: the worker's session key they carry) -----------------
  /// Queued, or refused to the trainer (the window is full), or dropped (a wrong key, an
  /// ended session, an id the session holds already).
  Dropped task(std::uint64_t s, const std::string& key, std::uint64_t id, std::string op,
               std::vector<char> payload);
  /// A queued task is dropped (counted cancelled); a running one sees its stop token.
  Dropped cancel(std::uint64_t s, const std::string& key, std::uint64_t id);
  Dropped ping(std::uint64_t s, const std::string& key);
  /// The trainer's actor is gone (its connection went down): the session ends.
  void trainer_gone(std::uint64_t s);
  /// A message nobody understands (counted).
  void dropped();
  /// Whether session `s` is open (a session actor quits once it is not).
  bool open(std::uint64_t s) const;
  /// Sessions whose trainer was silent (no task, no ping) for heartbeat_timeout end.
  void tick();

  // -- the operation threads ------------------------------------------------------------
  /// The first task of the session whose turn it is; nullopt when none is queued.
  /// TURNS (stride scheduling): each session has a pass; take() serves the session with
  /// queued tasks whose pass is least (among equals, the one waiting longest in the ring)
  /// and adds kStride ÷ its weight to its pass. A session's weight is its rank's
  /// (set_rank_weights; the hello's rank), else kNeutralRankWeight: with equal weights
  /// this is round robin over the sessions with queued tasks, and a session of weight
  /// w·k is served k times as often as one of weight w while both have tasks queued. A
  /// session that gets a task after having none joins at the pass now being served (it
  /// saved no turns up while idle). Its window still bounds what it holds.
  std::optional<TakenTask> take();
  /// The directory's weights by rank (RemotePool::set_rank_weights); a rank past the
  /// list, or a session without a rank, weighs kNeutralRankWeight. Clamped to
  /// 1 .. kMaxRankWeight.
  void set_rank_weights(std::vector<std::uint32_t> weights);
  const std::vector<std::uint32_t>& rank_weights() const { return weights_; }
  /// The task's thread returned: `error` empty → `result` is sent; else a failure. A
  /// task cancelled meanwhile (or of an ended session) sends only `freed` (or nothing).
  void finish(const TakenTask& task, std::vector<char> result, std::string error);
  bool has_work() const { return !ring_.empty(); }
  /// The worker's end: take() returns nothing; threads waiting on `work` wake.
  void shut_down();
  bool stopping() const { return stopping_; }

  // -- reads ----------------------------------------------------------------------------
  WorkerStats stats() const;  // without the counts the guard and the listener keep
  std::size_t sessions() const { return sessions_.size(); }  // open sessions held
  /// Tasks session `s` holds (queued and running); 0 for an ended one.
  std::size_t held(std::uint64_t s) const;
  const std::string& session_key(std::uint64_t s) const;
  std::uint32_t window() const { return window_; }

  // -- statistics (issue 24) ------------------------------------------------------------
  /// What was served since the last call, and the queue now (WorkerNode::take_served).
  WorkerServed take_served();

 private:
  struct Session {
    std::uint64_t number = 0;
    std::string key, trainer_key, name;
    std::deque<TakenTask> queue;
    std::map<std::uint64_t, std::stop_source> running;
    TimePoint last_heard{};
    std::uint64_t results = 0;  // sent
    bool in_ring = false;
    std::optional<std::uint32_t> rank;  // the hello's
    std::uint64_t pass = 0;             // TURNS
  };
  static constexpr std::uint64_t kStride = std::uint64_t{1} << 40;
  std::uint32_t weight_of(const Session& s) const;
  std::string check_hello(const HelloFields& hello) const;
  Session* find(std::uint64_t s, const std::string& key, Dropped& why);
  void end(std::uint64_t s, const std::string& why);
  Dropped drop(Dropped why);
  /// finish()'s hook: a task of `trainer` that ran `seconds` finished (failed or not).
  void note_served(const std::string& trainer, double seconds, bool failed);

  WorkerOptions options_;
  std::uint32_t window_;
  OperationRegistry operations_;
  WorkerNetwork& network_;
  std::shared_ptr<const actors::Clock> clock_;
  std::string name_;
  std::map<std::uint64_t, std::shared_ptr<Session>> sessions_;  // open ones
  std::list<std::shared_ptr<Session>> ring_;  // sessions with queued tasks, in turn
  std::uint64_t next_session_ = 1;
  std::vector<std::uint32_t> weights_;  // by rank
  std::uint64_t now_pass_ = 0;          // the pass of the session served last
  bool stopping_ = false;
  WorkerStats stats_;
  // What take_served() hands out: since its last call.
  std::map<std::string, WorkerServed::Trainer> served_trainers_;
  WorkerServed served_;
  actors::detail::DurationHistogram served_times_;
};

/// What the directory join asks of the network.
class JoinNetwork {
 public:
  virtual ~JoinNetwork() = default;
  /// Connects to the directory; answered by DirectoryJoin::connected or connect_failed.
  virtual void connect() = 0;
  /// Sends the join to the directory just connected (and watches it).
  virtual void send_join() = 0;
  /// Forgets the directory connected (stops watching it).
  virtual void forget() = 0;
};

/// Keeps a worker in the directory: connects, joins, and joins again when the
/// directory goes (rank 0 may start after the workers, or restart) or does not answer
/// (--join pointing at a worker's port). A refusal (a wrong token) is final. Attempts
/// that fail in a row are tried again after next_retry (detail/remote_clock.h: 50 ms,
/// doubling, at most kRetry); a join answered starts the count again. kRetry is short:
/// a worker waiting for rank 0 joins within a quarter second of its listening (a short
/// job may otherwise end before it joins), and a refused connection costs little.
class DirectoryJoin {
 public:
  enum class Phase { idle, connecting, joining, joined, refused };
  static constexpr std::chrono::milliseconds kRetry{250};
  static constexpr std::chrono::seconds kAnswer{5};

  DirectoryJoin(Endpoint at, std::shared_ptr<const actors::Clock> clock, JoinNetwork& network);

  /// Connects when it is time (at once at the first tick); gives up a join not answered
  /// within kAnswer.
  void tick();
  void connected();
  void connect_failed(const std::string& why);
  void joined();
  void refused(const std::string& why);
  /// The directory's actor is gone: joined again (next_retry).
  void directory_gone();

  Phase phase() const { return phase_; }
  std::uint64_t attempts() const { return attempts_; }
  /// When the next connection is due (idle).
  TimePoint next_attempt() const { return next_attempt_; }

 private:
  void retry_later();

  Endpoint at_;
  std::shared_ptr<const actors::Clock> clock_;
  JoinNetwork& network_;
  Phase phase_ = Phase::idle;
  TimePoint next_attempt_{}, answer_by_{};
  std::uint64_t attempts_ = 0;
  std::uint32_t failures_ = 0;  // in a row, since the last join answered
  std::string last_error_;
};

}  // namespace brigade::transport::detail
