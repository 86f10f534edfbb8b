// Worker nodes and the trainer's pool in one process: two (or more) CAF actor systems
// talking over real TCP sockets on 127.0.0.1.
#include "transport/remote/remote.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

#include "tests/transport/remote/remote_test_util.h"
#include "transport/remote/detail/remote_dispatch.h"

namespace brigade::transport {
namespace {

using namespace std::chrono_literals;

using test::bytes_of;
using test::kSecurity;
using test::text_of;
using test::until;
using test::upper_ops;
using test::worker_options;

PoolOptions pool_for(const WorkerNode& worker, std::vector<OperationVersion> ops = {{"upper", 1}}) {
  PoolOptions o;
  o.workers = {worker.address()};
  o.security = kSecurity;
  o.operations = std::move(ops);
  o.name = "test trainer";
  o.reconnect_interval = 200ms;
  return o;
}

TEST(Remote, CallsRunOnTheWorkerOverTheNetwork) {
  WorkerNode worker(worker_options(), upper_ops());
  EXPECT_EQ(worker.address().host, "127.0.0.1");
  EXPECT_NE(worker.address().port, 0);
  RemotePool pool(pool_for(worker));
  ASSERT_TRUE(pool.wait_for_worker(5s, {}));
  for (int i = 0; i < 20; ++i) {
    auto r = pool.call("upper", bytes_of("batch " + std::to_string(i)), {});
    ASSERT_EQ(r.status, CallStatus::done) << r.reason;
    EXPECT_EQ(text_of(r.bytes), "BATCH " + std::to_string(i));
    EXPECT_EQ(r.worker, worker.address().to_string());
  }
  const auto s = pool.stats();
  EXPECT_EQ(s.done, 20u);
  ASSERT_EQ(s.workers.size(), 1u);
  EXPECT_EQ(s.workers[0].tasks, 20u);
  EXPECT_TRUE(s.workers[0].live);
  EXPECT_EQ(worker.stats().tasks_done, 20u);
  EXPECT_EQ(worker.stats().sessions_opened, 1u);
}

TEST(Remote, WithoutALiveWorkerACallSaysSoAtOnce) {
  PoolOptions o;
  o.workers = {{"127.0.0.1", 1}};  // nothing listens there
  o.security = kSecurity;
  RemotePool pool(o);
  // At once: answered before any wait (RemoteDispatch.WithoutALiveWorkerACallIsAnswered…).
  auto r = pool.call("upper", bytes_of("x"), {});
  EXPECT_EQ(r.status, CallStatus::no_workers);
  EXPECT_FALSE(pool.wait_for_worker(300ms, {}));
}

// The hello is refused, and the reason names both sides.
void expect_refused(const WorkerNode& worker, PoolOptions o, const std::string& reason_part) {
  RemotePool pool(std::move(o));
  ASSERT_TRUE(until(pool, [](const auto& t) { return !t.lost_workers().empty(); }));
  EXPECT_EQ(pool.live_workers(), 0u);
  const auto lost = pool.lost_workers();
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_NE(lost[0].find(reason_part), std::string::npos) << lost[0];
  EXPECT_GE(worker.stats().hellos_refused, 1u);  // counted before the refusal is sent
  EXPECT_EQ(worker.stats().sessions_opened, 0u);
}

// Refused by the token's handshake before BASP (no TLS): no hello ever reaches the gate.
TEST(Remote, AWrongTokenIsRefused) {
  WorkerNode worker(worker_options(), upper_ops());
  auto o = pool_for(worker);
  o.security.token = "another job's token";
  RemotePool pool(std::move(o));
  ASSERT_TRUE(until(pool, [](const auto& t) { return !t.lost_workers().empty(); }));
  EXPECT_EQ(pool.live_workers(), 0u);
  const auto lost = pool.lost_workers();
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_NE(lost[0].find("the job token differs"), std::string::npos) << lost[0];
  ASSERT_TRUE(until(worker, [](const auto& s) { return s.connections_refused >= 1; }));
  EXPECT_EQ(worker.stats().connections_authenticated, 0u);
  EXPECT_EQ(worker.stats().hellos_refused, 0u);
  EXPECT_EQ(worker.stats().sessions_opened, 0u);
}

TEST(Remote, AnOperationOfAnotherVersionIsRefusedNamingBothVersions) {
  WorkerNode worker(worker_options(), upper_ops());
  expect_refused(worker, pool_for(worker, {{"upper", 2}}),
                 "operation 'upper' version 2 (trainer) differs from version 1 (worker");
}

TEST(Remote, AnUnknownOperationIsRefused) {
  WorkerNode worker(worker_options(), upper_ops());
  expect_refused(worker, pool_for(worker, {{"lower", 1}}), "'lower' version 1 (trainer) is not on");
}

TEST(Remote, ADatasetOfAnotherFingerprintIsRefused) {
  auto wo = worker_options();
  wo.fingerprint = 0x1234;
  WorkerNode worker(wo, upper_ops());
  auto o = pool_for(worker);
  o.fingerprint = 0x9999;
  expect_refused(worker, o,
                 "dataset fingerprint 0000000000009999 (trainer) differs from 0000000000001234");
}

TEST(Remote, AnOperationThatThrowsFailsTheCallWithItsMessage) {
  OperationRegistry ops;
  ops.add({"boom", 1}, [](std::span<const char>, const OperationContext&) -> std::vector<char> {
    throw std::runtime_error("the task is malformed");
  });
  WorkerNode worker(worker_options(), std::move(ops));
  RemotePool pool(pool_for(worker, {{"boom", 1}}));
  ASSERT_TRUE(pool.wait_for_worker(5s, {}));
  auto r = pool.call("boom", bytes_of("x"), {});
  EXPECT_EQ(r.status, CallStatus::failed);
  EXPECT_EQ(r.reason, "the task is malformed");
  EXPECT_EQ(worker.stats().tasks_failed, 1u);
}

// An operation that runs until it is released (or cancelled).
struct Gate {
  std::mutex mutex;
  std::condition_variable_any cv;
  bool open = false;
  int running = 0, max_running = 0, started = 0;
  std::vector<std::string> order;

  OperationRegistry ops() {
    OperationRegistry r;
    r.add({"held", 1}, [this](std::span<const char> task, const OperationContext& context) {
      std::unique_lock lock(mutex);
      ++started;
      cv.notify_all();
      max_running = std::max(max_running, ++running);
      order.emplace_back(task.begin(), task.end());
      cv.wait(lock, context.stop, [&] { return open; });
      --running;
      if (!open) throw std::runtime_error("cancelled");
      return std::vector<char>(task.begin(), task.end());
    });
    return r;
  }
  void release() {
    {
      std::lock_guard lock(mutex);
      open = true;
    }
    cv.notify_all();
  }
  int started_count() {
    std::lock_guard lock(mutex);
    return started;
  }
  void wait_started(int n) {
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return started >= n; });
  }
};

TEST(Remote, TheWindowBoundsTheTasksOutstandingOnAWorker) {
  Gate gate;
  auto wo = worker_options(4);
  wo.window = 2;
  WorkerNode worker(wo, gate.ops());
  RemotePool pool(pool_for(worker, {{"held", 1}}));
  ASSERT_TRUE(pool.wait_for_worker(5s, {}));
  std::vector<std::thread> callers;
  std::atomic<int> done{0};
  for (int i = 0; i < 8; ++i) {
    callers.emplace_back([&, i] {
      auto r = pool.call("held", bytes_of(std::to_string(i)), {});
      if (r.status == CallStatus::done) ++done;
    });
  }
  gate.wait_started(2);
  // 4 threads could run 4: the pool sends only the window's 2, the others wait.
  ASSERT_TRUE(until(pool, [](const auto& t) { return t.outstanding() == 2 && t.pending() == 6; }));
  EXPECT_EQ(gate.started_count(), 2);
  gate.release();
  for (auto& t : callers) t.join();
  EXPECT_EQ(done.load(), 8);
  EXPECT_EQ(gate.max_running, 2);
}

TEST(Remote, TrainersShareAWorkerInTurn) {
  Gate gate;
  auto wo = worker_options(1);
  wo.window = 8;
  WorkerNode worker(wo, gate.ops());
  RemotePool a(pool_for(worker, {{"held", 1}})), b(pool_for(worker, {{"held", 1}}));
  ASSERT_TRUE(a.wait_for_worker(5s, {}));
  ASSERT_TRUE(b.wait_for_worker(5s, {}));
  std::vector<std::thread> callers;
  for (int i = 0; i < 8; ++i) {
    callers.emplace_back([&, i] { a.call("held", bytes_of("a" + std::to_string(i)), {}); });
  }
  gate.wait_started(1);
  // a's 8 tasks on the worker, ahead of b's (a FIFO would run all of a's first).
  ASSERT_TRUE(until(worker, [](const auto& s) { return s.tasks_outstanding == 8; }));
  for (int i = 0; i < 8; ++i) {
    callers.emplace_back([&, i] { b.call("held", bytes_of("b" + std::to_string(i)), {}); });
  }
  // All 16 on the worker (one running) before the first ends.
  ASSERT_TRUE(until(worker, [](const auto& s) { return s.tasks_outstanding == 16; }));
  gate.release();
  for (auto& t : callers) t.join();
  // After a's first task, b's tasks alternate with a's instead of waiting for all of a's.
  ASSERT_EQ(gate.order.size(), 16u);
  int b_in_first_half = 0;
  for (std::size_t i = 0; i < 8; ++i) b_in_first_half += gate.order[i][0] == 'b' ? 1 : 0;
  EXPECT_GE(b_in_first_half, 3) << "order: " << ::testing::PrintToString(gate.order);
}

TEST(Remote, ATaskPastItsDeadlineIsLostAndCancelledOnTheWorker) {
  auto clock = std::make_shared<actors::ManualClock>();
  Gate gate;
  auto wo = worker_options();
  wo.clock = clock;
  WorkerNode worker(wo, gate.ops());
  auto o = pool_for(worker, {{"held", 1}});
  o.task_timeout = 300ms;
  o.clock = clock;
  RemotePool pool(o);
  ASSERT_TRUE(pool.wait_for_worker(60s, {}));
  CallResult r;
  std::thread caller([&] { r = pool.call("held", bytes_of("stuck"), {}); });
  ASSERT_TRUE(until(pool, [](const auto& t) { return t.outstanding_started() == 1; }));
  clock->advance(301ms);  // the pool's next tick finds the deadline passed
  caller.join();
  EXPECT_EQ(r.status, CallStatus::lost);
  EXPECT_TRUE(r.started);
  EXPECT_NE(r.reason.find("deadline of 300 ms"), std::string::npos) << r.reason;
  // The worker itself is not lost: its whole window back once its thread is free (the
  // operation saw its cancel), which the worker counts before it says so.
  ASSERT_TRUE(
      until(pool, [](const auto& t) { return t.live() == 1 && t.links()[0].stuck.empty(); }));
  EXPECT_EQ(worker.stats().tasks_cancelled, 1u);
}

// A read that never returns (an operation that ignores its cancel): the worker is
// suspect from the deadline on — connected, but it gets no new task and does not count
// as live — until that thread is free. The task it had queued behind is lost as never
// started (CallResult::started: the caller need not count it).
TEST(Remote, AStuckWorkerLeavesTheRotationUntilItsThreadIsFree) {
  auto clock = std::make_shared<actors::ManualClock>();
  std::mutex mutex;
  std::condition_variable cv;
  bool open = false;
  OperationRegistry ops;
  ops.add({"read", 1}, [&](std::span<const char> task, const OperationContext&) {
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return open; });  // deaf to the cancel, like read() on a hung mount
    return std::vector<char>(task.begin(), task.end());
  });
  auto wo = worker_options(1);
  wo.clock = clock;
  WorkerNode worker(wo, std::move(ops));
  auto o = pool_for(worker, {{"read", 1}});
  o.task_timeout = 300ms;
  o.clock = clock;
  RemotePool pool(o);
  ASSERT_TRUE(pool.wait_for_worker(60s, {}));
  CallResult first, second;
  std::thread a([&] { first = pool.call("read", bytes_of("hung"), {}); });
  ASSERT_TRUE(until(pool, [](const auto& t) { return t.outstanding_started() == 1; }));
  // The second is queued behind it on the one thread.
  std::thread b([&] { second = pool.call("read", bytes_of("queued"), {}); });
  ASSERT_TRUE(until(pool, [](const auto& t) { return t.outstanding() == 2; }));
  clock->advance(301ms);
  a.join();
  b.join();
  EXPECT_EQ(first.status, CallStatus::lost);
  EXPECT_TRUE(first.started);
  EXPECT_EQ(second.status, CallStatus::lost) << second.reason;
  EXPECT_FALSE(second.started) << second.reason;
  EXPECT_EQ(pool.live_workers(), 0u);
  const auto lost = pool.lost_workers();
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_NE(lost[0].find("suspect"), std::string::npos) << lost[0];
  EXPECT_EQ(pool.call("read", bytes_of("not sent"), {}).status, CallStatus::no_workers);
  {
    std::lock_guard lock(mutex);
    open = true;
  }
  cv.notify_all();
  // Back when the thread is free (the clock has not moved: not on parole).
  ASSERT_TRUE(pool.wait_for_worker(60s, {}));
  auto r = pool.call("read", bytes_of("back"), {});
  ASSERT_EQ(r.status, CallStatus::done) << r.reason;
  EXPECT_EQ(text_of(r.bytes), "back");
}

TEST(Remote, ACancelledAttemptsResultIsNeverSent) {
  auto clock = std::make_shared<actors::ManualClock>();
  std::mutex mutex;
  std::condition_variable cv;
  bool open = false, cancel_seen = false;
  OperationRegistry ops;
  ops.add({"slow", 1}, [&](std::span<const char> task, const OperationContext& context) {
    std::stop_callback seen(context.stop, [&] {
      std::lock_guard lock(mutex);
      cancel_seen = true;
      cv.notify_all();
    });
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return open; });  // ignores the cancel
    return std::vector<char>(task.begin(), task.end());
  });
  auto wo = worker_options();
  wo.clock = clock;
  WorkerNode worker(wo, std::move(ops));
  auto o = pool_for(worker, {{"slow", 1}});
  o.task_timeout = 200ms;
  o.clock = clock;
  RemotePool pool(o);
  ASSERT_TRUE(pool.wait_for_worker(60s, {}));
  CallResult r;
  std::thread caller([&] { r = pool.call("slow", bytes_of("x"), {}); });
  ASSERT_TRUE(until(pool, [](const auto& t) { return t.outstanding_started() == 1; }));
  clock->advance(201ms);
  caller.join();
  EXPECT_EQ(r.status, CallStatus::lost);
  {
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return cancel_seen; });  // the cancel reached the operation
    open = true;
  }
  cv.notify_all();
  // The operation returns after its cancel: the worker counts it cancelled and says its
  // thread is free (the pool takes it back) instead of sending the result.
  ASSERT_TRUE(
      until(pool, [](const auto& t) { return t.live() == 1 && t.links()[0].stuck.empty(); }));
  EXPECT_EQ(worker.stats().tasks_cancelled, 1u);
  EXPECT_EQ(worker.stats().tasks_done, 0u);
  EXPECT_EQ(pool.stats().done, 0u);
  EXPECT_EQ(pool.stats().late_dropped, 0u);
}

TEST(Remote, AResultOfALostSessionIsDroppedAsLate) {
  auto clock = std::make_shared<actors::ManualClock>();
  std::mutex mutex;
  std::condition_variable cv;
  bool open = false;
  OperationRegistry ops;
  ops.add({"slow", 1}, [&](std::span<const char> task, const OperationContext&) {
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return open; });
    return std::vector<char>(task.begin(), task.end());
  });
  auto wo = worker_options();
  wo.clock = clock;
  WorkerNode worker(wo, std::move(ops));
  auto o = pool_for(worker, {{"slow", 1}});
  // Heartbeats rarer than their timeout: the pool gives the session up while the task
  // runs (as for a worker frozen a moment), then opens a new one.
  o.heartbeat_interval = 5s;
  o.heartbeat_timeout = 300ms;
  o.clock = clock;
  RemotePool pool(o);
  ASSERT_TRUE(pool.wait_for_worker(60s, {}));
  CallResult r;
  std::thread caller([&] { r = pool.call("slow", bytes_of("x"), {}); });
  ASSERT_TRUE(until(pool, [](const auto& t) { return t.outstanding_started() == 1; }));
  clock->advance(301ms);
  caller.join();
  EXPECT_EQ(r.status, CallStatus::lost);
  EXPECT_NE(r.reason.find("no heartbeat for 301 ms"), std::string::npos) << r.reason;
  {
    std::lock_guard lock(mutex);
    open = true;
  }
  cv.notify_all();  // the result comes on the session the pool gave up
  ASSERT_TRUE(until(pool, [](const auto& t) { return t.stats().late_dropped == 1; }));
  EXPECT_EQ(pool.stats().done, 0u);
  clock->advance(200ms);  // reconnect_interval: a new session
  ASSERT_TRUE(pool.wait_for_worker(60s, {}));
  EXPECT_EQ(worker.stats().sessions_opened, 2u);
  auto again = pool.call("slow", bytes_of("y"), {});
  EXPECT_EQ(again.status, CallStatus::done) << again.reason;
}

TEST(Remote, TasksCancelledOrDroppedWhileQueuedLeaveTheWorkerServing) {
  // One thread: the first task holds it, the others wait in the session's queue.
  auto clock = std::make_shared<actors::ManualClock>();
  Gate gate;
  auto wo = worker_options(1);
  wo.window = 8;
  wo.heartbeat_timeout = 400ms;  // the worker ends a session that sends no heartbeat
  wo.clock = clock;
  WorkerNode worker(wo, gate.ops());
  auto o = pool_for(worker, {{"held", 1}});
  o.task_timeout = 300ms;  // the queued tasks are cancelled on the worker
  o.clock = clock;
  RemotePool pool(o);
  ASSERT_TRUE(pool.wait_for_worker(60s, {}));
  std::vector<std::thread> callers;
  for (int i = 0; i < 4; ++i)
    callers.emplace_back([&, i] { pool.call("held", bytes_of(std::to_string(i)), {}); });
  ASSERT_TRUE(until(pool, [](const auto& t) { return t.outstanding() == 4; }));
  clock->advance(301ms);
  for (auto& t : callers) t.join();  // all lost on their deadline, three while queued
  EXPECT_EQ(pool.stats().lost, 4u);
  ASSERT_TRUE(until(worker, [](const auto& s) { return s.tasks_cancelled == 4; }));
  {
    // A trainer that stops sending heartbeats: its session ends with tasks queued.
    auto silent = pool_for(worker, {{"held", 1}});
    silent.heartbeat_interval = 10s;
    silent.task_timeout = 10s;
    silent.clock = clock;
    RemotePool quiet(silent);
    ASSERT_TRUE(quiet.wait_for_worker(60s, {}));
    std::vector<std::thread> more;
    std::vector<CallResult> results(3);
    for (int i = 0; i < 3; ++i)
      more.emplace_back([&, i] { results[i] = quiet.call("held", bytes_of("q"), {}); });
    // On the worker (each task counts as a heartbeat there) before the clock moves.
    ASSERT_TRUE(until(worker, [](const auto& s) { return s.tasks_outstanding == 3; }));
    clock->advance(401ms);  // the worker ends the silent session at its next tick
    for (auto& t : more) t.join();
    for (const auto& r : results) EXPECT_EQ(r.status, CallStatus::lost) << r.reason;
  }
  // The queued tasks dropped with the session, the running one cancelled.
  ASSERT_TRUE(until(worker, [](const auto& s) { return s.tasks_cancelled == 7; }));
  gate.release();
  // The worker still serves.
  RemotePool next(pool_for(worker, {{"held", 1}}));
  ASSERT_TRUE(next.wait_for_worker(60s, {}));
  auto r = next.call("held", bytes_of("after"), {});
  ASSERT_EQ(r.status, CallStatus::done) << r.reason;
  EXPECT_EQ(text_of(r.bytes), "after");
}

TEST(Remote, AStopTokenEndsAWaitingCall) {
  Gate gate;
  WorkerNode worker(worker_options(), gate.ops());
  RemotePool pool(pool_for(worker, {{"held", 1}}));
  ASSERT_TRUE(pool.wait_for_worker(5s, {}));
  std::stop_source stop;
  std::thread stopper([&] {
    gate.wait_started(1);  // the call waits on its worker
    stop.request_stop();
  });
  auto r = pool.call("held", bytes_of("x"), stop.get_token());
  stopper.join();
  EXPECT_EQ(r.status, CallStatus::stopped);
  EXPECT_EQ(r.worker, worker.address().to_string());
  // Cancelled on the worker (the operation sees its stop token).
  ASSERT_TRUE(until(worker, [](const auto& s) { return s.tasks_cancelled == 1; }));
  gate.release();
}

TEST(Remote, AWorkerThatGoesAwayLosesItsCallsAtOnce) {
  Gate gate;
  auto worker = std::make_unique<WorkerNode>(worker_options(), gate.ops());
  RemotePool pool(pool_for(*worker, {{"held", 1}}));
  ASSERT_TRUE(pool.wait_for_worker(5s, {}));
  CallResult r;
  std::thread caller([&] { r = pool.call("held", bytes_of("x"), {}); });
  gate.wait_started(1);
  // The node's end waits for its threads: let the operation end (its result may or may
  // not still reach the pool before the connection closes).
  gate.release();
  worker.reset();  // the node shuts down: its connection closes
  caller.join();
  EXPECT_TRUE(r.status == CallStatus::lost || r.status == CallStatus::done) << r.reason;
  if (r.status == CallStatus::lost) {
    EXPECT_NE(r.reason.find("worker 127.0.0.1:"), std::string::npos);
  }
  ASSERT_TRUE(until(pool, [](const auto& t) { return t.live() == 0; }));
  EXPECT_EQ(pool.call("held", bytes_of("y"), {}).status, CallStatus::no_workers);
}

TEST(Remote, RandomBytesOnTheWorkersPortDoNotHurtIt) {
  WorkerNode worker(worker_options(), upper_ops());
  std::mt19937 random(7);
  for (int round = 0; round < 20; ++round) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(worker.address().port);
    ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    std::vector<char> junk(1 + random() % 4096);
    for (auto& c : junk) c = static_cast<char>(random());
    // The first word is a BASP header's payload length: sometimes claim a huge one.
    if (round % 2 == 0 && junk.size() >= 8) std::fill(junk.begin(), junk.begin() + 8, '\xff');
    [[maybe_unused]] auto n = ::write(fd, junk.data(), junk.size());
    ::close(fd);
  }
  RemotePool pool(pool_for(worker));
  ASSERT_TRUE(pool.wait_for_worker(5s, {}));
  auto r = pool.call("upper", bytes_of("still here"), {});
  ASSERT_EQ(r.status, CallStatus::done) << r.reason;
  EXPECT_EQ(text_of(r.bytes), "STILL HERE");
}

// Rank 0's pool: hosts a directory on a free port.
PoolOptions directory_host() {
  PoolOptions o;
  o.directory = Endpoint{"127.0.0.1", 0};
  o.host_directory = true;
  o.security = kSecurity;
  o.operations = {{"upper", 1}};
  return o;
}

TEST(Remote, AWorkerJoinsTheDirectoryAndTheTrainerFindsIt) {
  // The pool's clock never moves: the worker is found because the directory pushes the
  // list at once, not on a reconnect interval (a late joiner gets work fast).
  auto o = directory_host();
  o.clock = std::make_shared<actors::ManualClock>();
  RemotePool pool(o);
  ASSERT_TRUE(pool.directory_address());
  EXPECT_NE(pool.directory_address()->port, 0);
  EXPECT_EQ(pool.call("upper", bytes_of("x"), {}).status, CallStatus::no_workers);
  auto wo = worker_options();
  wo.join = *pool.directory_address();
  WorkerNode worker(wo, upper_ops());
  ASSERT_TRUE(pool.wait_for_worker(60s, {}));
  auto r = pool.call("upper", bytes_of("found"), {});
  ASSERT_EQ(r.status, CallStatus::done) << r.reason;
  EXPECT_EQ(text_of(r.bytes), "FOUND");
}

// Every thread of a worker stuck (another trainer's read that never returns): a new
// trainer's task never starts. Lost as never started at its deadline, the worker is out
// of this trainer's rotation for a deadline's time (parole), then tried again.
TEST(Remote, AWorkerWhoseThreadsAreAllStuckIsOutOfANewTrainersRotationOnParole) {
  auto clock = std::make_shared<actors::ManualClock>();
  std::mutex mutex;
  std::condition_variable cv;
  bool open = false;
  OperationRegistry ops;
  ops.add({"read", 1}, [&](std::span<const char> task, const OperationContext&) {
    if (std::string_view(task.data(), task.size()) == "hung") {
      std::unique_lock lock(mutex);
      cv.wait(lock, [&] { return open; });
    }
    return std::vector<char>(task.begin(), task.end());
  });
  auto wo = worker_options(1);
  wo.clock = clock;
  WorkerNode worker(wo, std::move(ops));
  auto o = pool_for(worker, {{"read", 1}});
  o.task_timeout = 300ms;
  o.clock = clock;
  RemotePool first(o);
  ASSERT_TRUE(first.wait_for_worker(60s, {}));
  CallResult r;
  std::thread hung([&] { r = first.call("read", bytes_of("hung"), {}); });
  ASSERT_TRUE(until(first, [](const auto& t) { return t.outstanding_started() == 1; }));
  clock->advance(301ms);
  hung.join();
  EXPECT_EQ(r.status, CallStatus::lost);
  RemotePool second(o);
  ASSERT_TRUE(second.wait_for_worker(60s, {}));
  std::thread waiting([&] { r = second.call("read", bytes_of("never starts"), {}); });
  ASSERT_TRUE(until(second, [](const auto& t) { return t.outstanding() == 1; }));
  clock->advance(301ms);
  waiting.join();
  EXPECT_EQ(r.status, CallStatus::lost);
  EXPECT_FALSE(r.started);
  EXPECT_EQ(second.live_workers(), 0u);
  EXPECT_EQ(second.call("read", bytes_of("not sent"), {}).status, CallStatus::no_workers);
  clock->advance(301ms);                         // a deadline's time: on parole
  ASSERT_TRUE(second.wait_for_worker(60s, {}));  // at its next tick
  {
    std::lock_guard lock(mutex);
    open = true;
  }
  cv.notify_all();
  r = second.call("read", bytes_of("served"), {});
  ASSERT_EQ(r.status, CallStatus::done) << r.reason;
  EXPECT_EQ(text_of(r.bytes), "served");
}

// A late rank whose directory cannot be reached can say so (not "it listed none").
TEST(Remote, ADirectoryThatCannotBeReachedSaysWhy) {
  PoolOptions o;
  o.directory = Endpoint{"127.0.0.1", 1};  // nothing listens there
  o.security = kSecurity;
  o.reconnect_interval = 100ms;
  RemotePool pool(o);
  ASSERT_TRUE(until(pool, [](const auto& t) { return t.directory_unreachable().has_value(); }));
  EXPECT_NE(pool.directory_unreachable()->find("refused"), std::string::npos)
      << *pool.directory_unreachable();
  // Reached: no reason any more.
  RemotePool host(directory_host());
  auto wo = worker_options();
  wo.join = *host.directory_address();
  WorkerNode worker(wo, upper_ops());
  o.directory = host.directory_address();
  RemotePool reached(o);
  ASSERT_TRUE(reached.wait_for_worker(5s, {}));
  EXPECT_FALSE(reached.directory_unreachable());
}

// Rank 0 keeps its directory until every rank has subscribed (issue 21: a rank started
// late found none, rank 0 having finished): the wait ends when the second trainer
// subscribes, and a stop ends a wait for a rank that never comes.
TEST(Remote, TheDirectoryHostWaitsUntilEveryRankHasSubscribedOrAStop) {
  RemotePool host(directory_host());
  ASSERT_TRUE(host.wait_for_subscribers(1, 60s, {}));  // its own pool
  EXPECT_EQ(host.subscribers(), 1u);
  std::stop_source stop;
  std::thread stopper([&] { stop.request_stop(); });
  EXPECT_FALSE(host.wait_for_subscribers(2, std::chrono::hours(1), stop.get_token()));
  stopper.join();
  PoolOptions o;
  o.directory = host.directory_address();
  o.security = kSecurity;
  {
    RemotePool rank1(o);
    EXPECT_TRUE(host.wait_for_subscribers(2, 60s, {}));
  }
  EXPECT_EQ(host.subscribers(), 2u);  // gone, but it had subscribed
  // Without a directory hosted there is nothing to wait for.
  RemotePool rank1(o);
  EXPECT_TRUE(rank1.wait_for_subscribers(5, std::chrono::hours(1), {}));
}

// A rank that starts before rank 0 listens finds the directory once it does (its
// refused connections are tried again, soon at first: next_retry).
TEST(Remote, ARankFindsADirectoryThatStartsListeningAfterIt) {
  const int probe = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ASSERT_EQ(::bind(probe, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ::getsockname(probe, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(probe);
  const Endpoint at{"127.0.0.1", ntohs(a.sin_port)};
  PoolOptions o;
  o.directory = at;
  o.security = kSecurity;
  RemotePool rank1(o);
  ASSERT_TRUE(until(rank1, [](const auto& t) { return t.directory_unreachable().has_value(); }));
  auto ho = directory_host();
  ho.directory = at;
  RemotePool host(ho);
  EXPECT_TRUE(host.wait_for_subscribers(2, 60s, {}));
  EXPECT_FALSE(rank1.directory_unreachable());
}

TEST(Remote, TheDirectoryRefusesAWrongToken) {
  RemotePool pool(directory_host());
  auto wo = worker_options();
  wo.join = *pool.directory_address();
  wo.security.token = "not the job's";
  OperationRegistry ops = upper_ops();
  WorkerNode worker(wo, std::move(ops));
  EXPECT_FALSE(pool.wait_for_worker(1500ms, {}));
}

TEST(Remote, ConfigurationErrorsAreRemoteErrors) {
  auto wo = worker_options();
  wo.security.token.clear();
  EXPECT_THROW(WorkerNode(wo, upper_ops()), RemoteError);
  wo = worker_options();
  wo.security.tls_cert = "/nonexistent/cert.pem";
  wo.security.tls_key = "/nonexistent/key.pem";
  wo.security.tls_ca = "/nonexistent/ca.pem";
  try {
    WorkerNode node(wo, upper_ops());
    FAIL() << "expected a RemoteError";
  } catch (const RemoteError& e) {
    EXPECT_NE(std::string(e.what()).find("tls_cert /nonexistent/cert.pem"), std::string::npos)
        << e.what();
  }
  // A port in use.
  WorkerNode first(worker_options(), upper_ops());
  wo = worker_options();
  wo.listen = first.address();
  EXPECT_THROW(WorkerNode(wo, upper_ops()), RemoteError);
}

TEST(Remote, OperationNamesAreUnique) {
  OperationRegistry ops = upper_ops();
  EXPECT_THROW(ops.add({"upper", 3}, {}), std::invalid_argument);
  EXPECT_THROW(ops.add({"", 1}, {}), std::invalid_argument);
  ASSERT_EQ(ops.list().size(), 1u);
  EXPECT_EQ(ops.list()[0], (OperationVersion{"upper", 1}));
}

}  // namespace
}  // namespace brigade::transport
