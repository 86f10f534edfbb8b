// The trainer pool's rules (detail/remote_dispatch.h) driven step by step: a manual
// clock, fake worker handles that record what the table sends, and the network's
// answers delivered by hand in the order each test chooses. No thread, no socket, no
// sleep: each test is one exact interleaving.
#include "transport/remote/detail/remote_dispatch.h"

#include <gtest/gtest.h>

#include "tests/transport/remote/remote_test_util.h"

namespace brigade::transport::detail {
namespace {

using namespace std::chrono_literals;
using test::bytes_of;
using test::text_of;

// Records every request of the table; the test answers them.
struct FakeNetwork final : DispatchNetwork {
  struct Task {
    SessionRef session;
    std::uint64_t id;
    std::string text;
  };
  std::vector<std::size_t> connects;
  std::vector<Task> tasks;
  std::vector<std::pair<SessionRef, std::uint64_t>> cancels;
  std::vector<SessionRef> pings, closed;

  void connect(std::size_t link, const Endpoint&) override { connects.push_back(link); }
  void send_task(SessionRef s, std::uint64_t id, const std::string&,
                 std::vector<char> task) override {
    tasks.push_back({s, id, text_of(task)});
  }
  void send_cancel(SessionRef s, std::uint64_t id) override { cancels.push_back({s, id}); }
  void send_ping(SessionRef s) override { pings.push_back(s); }
  void close(SessionRef s) override { closed.push_back(s); }
};

class RemoteDispatch : public ::testing::Test {
 protected:
  // Workers a (link 0) and b (link 1), given. Heartbeats are checked only where a test
  // says so (a short heartbeat_timeout).
  void start(std::vector<Endpoint> workers = {kA, kB},
             std::chrono::milliseconds heartbeat_timeout = 60s) {
    PoolOptions o;
    o.workers = std::move(workers);
    o.task_timeout = 1000ms;
    o.heartbeat_interval = 100ms;
    o.heartbeat_timeout = heartbeat_timeout;
    o.reconnect_interval = 200ms;
    o.clock = clock_;
    table_ = std::make_unique<DispatchTable>(o, net_);
  }

  // Connects `link` (at its next tick) and welcomes it with `window` and `threads`.
  SessionRef bring_up(std::size_t link, std::uint32_t window, std::uint32_t threads = 1) {
    table_->tick();
    auto s = table_->connected(link);
    EXPECT_TRUE(s);
    if (!s) return {};
    table_->welcome(*s, window, threads);
    return *s;
  }

  // The worker of `s` answers every ping sent to it so far (in order, as a session does).
  void answer_pings(SessionRef s) {
    for (; answered_ < net_.pings.size(); ++answered_)
      if (net_.pings[answered_] == s) table_->heard(s);
  }
  std::size_t answered_ = 0;

  // A caller's call() up to its wait: submitted and kicked.
  std::shared_ptr<Call> call(std::string text, std::string avoid = {}) {
    auto c = std::make_shared<Call>();
    c->op = "upper";
    c->task = bytes_of(text);
    c->avoid = std::move(avoid);
    if (table_->submit(c)) table_->dispatch();
    return c;
  }

  void advance(std::chrono::milliseconds by) {
    clock_->advance(by);
    table_->tick();
  }

  static inline const Endpoint kA{"10.0.0.1", 7000}, kB{"10.0.0.2", 7000}, kC{"10.0.0.3", 7000};
  std::shared_ptr<actors::ManualClock> clock_ = std::make_shared<actors::ManualClock>();
  FakeNetwork net_;
  std::unique_ptr<DispatchTable> table_;
};

TEST_F(RemoteDispatch, WithoutALiveWorkerACallIsAnsweredWithoutWaiting) {
  start();
  auto c = call("x");
  EXPECT_TRUE(c->finished);  // answered inside submit: the caller never waits
  EXPECT_EQ(c->result.status, CallStatus::no_workers);
  EXPECT_EQ(c->result.reason, "no worker is live");
  EXPECT_EQ(table_->stats().calls, 0u);
  EXPECT_TRUE(net_.tasks.empty());
}

// The window, not the mailbox, bounds a worker's tasks; a call beyond every window
// waits (FIFO) and goes out when a result frees credit; the freest worker is chosen.
TEST_F(RemoteDispatch, ACallBeyondEveryWindowWaitsForCredit) {
  start();
  const auto a = bring_up(0, 2);
  const auto b = bring_up(1, 1);
  std::vector<std::shared_ptr<Call>> calls;
  for (int i = 0; i < 4; ++i) calls.push_back(call("t" + std::to_string(i)));
  ASSERT_EQ(net_.tasks.size(), 3u);
  EXPECT_EQ(net_.tasks[0].session, a);  // 2 free on a, 1 on b
  EXPECT_EQ(net_.tasks[1].session, a);  // 1 and 1: the first
  EXPECT_EQ(net_.tasks[2].session, b);
  EXPECT_EQ(table_->pending(), 1u);
  EXPECT_FALSE(calls[3]->finished);
  table_->reply(b, net_.tasks[2].id, CallStatus::done, {}, bytes_of("T2"));
  EXPECT_EQ(calls[2]->result.status, CallStatus::done);
  ASSERT_EQ(net_.tasks.size(), 4u);
  EXPECT_EQ(net_.tasks[3].text, "t3");
  EXPECT_EQ(net_.tasks[3].session, b);
  EXPECT_EQ(table_->pending(), 0u);
}

// Worker a runs its first task and has the 2nd and 3rd queued when its connection goes
// down: all three return lost at once, only the first as started; a caller trying
// again (avoiding a) gets b; a is reconnected after reconnect_interval, not before.
TEST_F(RemoteDispatch, AWorkerLostWhileItsThirdTaskIsQueuedLosesAllThreeAtOnce) {
  start();
  const auto a = bring_up(0, 3);
  std::vector<std::shared_ptr<Call>> calls;
  for (int i = 0; i < 3; ++i) calls.push_back(call("t" + std::to_string(i)));
  ASSERT_EQ(net_.tasks.size(), 3u);
  table_->started(a, calls[0]->id);
  const auto b = bring_up(1, 3);  // b comes up while a holds the three
  EXPECT_TRUE(net_.tasks.size() == 3u);
  ASSERT_TRUE(table_->lost(a, "its connection went down"));
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(calls[i]->finished) << i;
    EXPECT_EQ(calls[i]->result.status, CallStatus::lost);
    EXPECT_EQ(calls[i]->result.reason, "worker 10.0.0.1:7000: its connection went down");
    EXPECT_EQ(calls[i]->result.worker, "10.0.0.1:7000");
    EXPECT_EQ(calls[i]->result.started, i == 0) << i;
  }
  EXPECT_EQ(net_.closed, std::vector<SessionRef>{a});
  EXPECT_EQ(table_->live(), 1u);
  EXPECT_EQ(table_->stats().lost, 3u);
  EXPECT_EQ(table_->stats().workers[0].lost, 3u);
  auto again = call("t2", "10.0.0.1:7000");
  ASSERT_EQ(net_.tasks.size(), 4u);
  EXPECT_EQ(net_.tasks[3].session, b);
  // A result of the lost session is late.
  table_->reply(a, calls[1]->id, CallStatus::done, {}, bytes_of("T1"));
  EXPECT_EQ(table_->stats().late_dropped, 1u);
  // Reconnected after reconnect_interval, not before.
  const auto connects = net_.connects.size();
  advance(199ms);
  EXPECT_EQ(net_.connects.size(), connects);
  advance(2ms);
  ASSERT_EQ(net_.connects.size(), connects + 1);
  EXPECT_EQ(net_.connects.back(), 0u);
  auto a2 = table_->connected(0);
  ASSERT_TRUE(a2);
  EXPECT_NE(a2->number, a.number);  // a new session
  table_->welcome(*a2, 3);
  EXPECT_EQ(table_->live(), 2u);
  EXPECT_EQ(table_->stats().workers[0].sessions, 2u);
}

// The deadline passes while no pong has come for a while, but for less than
// heartbeat_timeout: the task is lost on its deadline (the worker told to cancel), the
// worker is suspect, not lost; the pong that comes keeps it connected, and the freed
// thread brings it back.
TEST_F(RemoteDispatch, ADeadlineThatPassesInAHeartbeatGapLosesTheTaskNotTheWorker) {
  start({kA}, 400ms);
  const auto a = bring_up(0, 2);
  auto c = call("slow");
  table_->started(a, c->id);
  // Pings every 100 ms, answered until 700 ms; then the gap.
  for (int i = 0; i < 7; ++i) {
    advance(100ms);
    table_->heard(a);
  }
  EXPECT_EQ(net_.pings.size(), 7u);
  advance(200ms);
  EXPECT_FALSE(c->finished);
  advance(101ms);  // 1001 ms: past the deadline; 301 ms since the last pong
  ASSERT_TRUE(c->finished);
  EXPECT_EQ(c->result.status, CallStatus::lost);
  EXPECT_TRUE(c->result.started);
  EXPECT_EQ(c->result.reason, "worker 10.0.0.1:7000: the task passed its deadline of 1000 ms");
  ASSERT_EQ(net_.cancels.size(), 1u);
  EXPECT_EQ(net_.cancels[0], std::make_pair(a, c->id));
  EXPECT_EQ(table_->live(), 0u);  // suspect: its thread is stuck
  EXPECT_TRUE(net_.closed.empty());
  ASSERT_EQ(table_->lost_workers().size(), 1u);
  EXPECT_NE(table_->lost_workers()[0].find("suspect"), std::string::npos);
  table_->heard(a);  // the gap ends
  advance(300ms);    // no heartbeat loss: heard 300 ms ago
  EXPECT_TRUE(net_.closed.empty());
  EXPECT_EQ(table_->live(), 0u);  // still stuck: no parole while its thread is held
  table_->freed(a, c->id);
  EXPECT_EQ(table_->live(), 1u);
}

// The same gap growing past heartbeat_timeout at the tick where the deadline passes:
// the worker is lost (heartbeats are checked first), and the call says why.
TEST_F(RemoteDispatch, AHeartbeatGapPastItsTimeoutLosesTheWorkerBeforeTheDeadline) {
  start({kA}, 400ms);
  const auto a = bring_up(0, 2);
  clock_->advance(600ms);
  auto c = call("slow");
  table_->started(a, c->id);  // heard at 600 ms
  advance(1001ms);
  ASSERT_TRUE(c->finished);
  EXPECT_EQ(c->result.status, CallStatus::lost);
  EXPECT_EQ(c->result.reason, "worker 10.0.0.1:7000: no heartbeat for 1001 ms");
  EXPECT_TRUE(c->result.started);
  EXPECT_EQ(net_.closed, std::vector<SessionRef>{a});
  EXPECT_TRUE(net_.cancels.empty());
  EXPECT_EQ(table_->live(), 0u);
}

// A task lost on its deadline before it started, sent again to the other worker: the
// first worker's late result is dropped, the second's accepted once, and a duplicate
// of it dropped too. One result per attempt.
TEST_F(RemoteDispatch, ALateResultAfterTheTaskWasSentAgainIsDropped) {
  start();
  const auto a = bring_up(0, 1);
  const auto b = bring_up(1, 1);
  auto first = call("sample 7");
  ASSERT_EQ(net_.tasks.size(), 1u);
  ASSERT_EQ(net_.tasks[0].session, a);
  advance(1001ms);
  ASSERT_TRUE(first->finished);
  EXPECT_EQ(first->result.status, CallStatus::lost);
  EXPECT_FALSE(first->result.started);  // the caller need not count it
  EXPECT_EQ(table_->live(), 1u);        // a on parole
  auto second = call("sample 7", first->result.worker);
  ASSERT_EQ(net_.tasks.size(), 2u);
  EXPECT_EQ(net_.tasks[1].session, b);
  table_->reply(a, first->id, CallStatus::done, {}, bytes_of("from a"));
  EXPECT_FALSE(second->finished);
  EXPECT_EQ(table_->stats().late_dropped, 1u);
  table_->reply(b, second->id, CallStatus::done, {}, bytes_of("from b"));
  ASSERT_TRUE(second->finished);
  EXPECT_EQ(second->result.status, CallStatus::done);
  EXPECT_EQ(text_of(second->result.bytes), "from b");
  table_->reply(b, second->id, CallStatus::done, {}, bytes_of("again"));
  table_->reply(std::nullopt, second->id, CallStatus::done, {}, bytes_of("forged"));
  EXPECT_EQ(table_->stats().late_dropped, 3u);
  EXPECT_EQ(table_->stats().done, 1u);
  EXPECT_EQ(text_of(second->result.bytes), "from b");
}

// A result of an earlier session of the same worker (lost, reconnected) is late too.
TEST_F(RemoteDispatch, AResultOfAnEarlierSessionOfTheSameWorkerIsDropped) {
  start({kA});
  const auto a = bring_up(0, 2);
  auto first = call("x");
  ASSERT_TRUE(table_->lost(a, "its connection went down"));
  advance(200ms);
  auto a2 = table_->connected(0);
  ASSERT_TRUE(a2);
  table_->welcome(*a2, 2);
  auto second = call("x");
  table_->reply(a, second->id, CallStatus::done, {}, bytes_of("old session"));
  EXPECT_FALSE(second->finished);
  EXPECT_EQ(table_->stats().late_dropped, 1u);
  table_->reply(*a2, second->id, CallStatus::done, {}, bytes_of("X"));
  EXPECT_EQ(second->result.status, CallStatus::done);
}

// Worker a leaves the directory while it is being reconnected: the connect in flight
// completes (the worker answers, so it is used), no second link is made, and once lost
// again it is not reconnected; a new worker in the same update is connected at once,
// and a listed again is wanted again.
TEST_F(RemoteDispatch, AReconnectDuringADirectoryUpdateKeepsOneLinkPerWorker) {
  start({});
  table_->set_directory_workers({kA, kB});
  const auto a = bring_up(0, 2);
  table_->welcome(*table_->connected(1), 2);
  ASSERT_EQ(table_->live(), 2u);
  ASSERT_TRUE(table_->lost(a, "its connection went down"));
  advance(200ms);  // a's reconnect starts
  ASSERT_EQ(table_->links()[0].phase, Link::Phase::connecting);
  const auto connects = net_.connects.size();
  table_->set_directory_workers({kB, kC});  // a left, c joined
  table_->tick();
  EXPECT_EQ(table_->links().size(), 3u);
  ASSERT_EQ(net_.connects.size(), connects + 1);  // c, not a again
  EXPECT_EQ(net_.connects.back(), 2u);
  auto a2 = table_->connected(0);  // the connect in flight completes
  ASSERT_TRUE(a2);
  table_->set_directory_workers({kB, kC});  // an update during a's hello
  EXPECT_EQ(table_->links()[0].phase, Link::Phase::hello);
  table_->welcome(*a2, 2);
  EXPECT_EQ(table_->live(), 2u);
  ASSERT_TRUE(table_->lost(*a2, "its connection went down"));
  advance(1000ms);
  EXPECT_EQ(net_.connects.size(), connects + 1);  // a is not wanted any more
  table_->set_directory_workers({kA, kB, kC});
  table_->tick();
  ASSERT_EQ(net_.connects.size(), connects + 2);
  EXPECT_EQ(net_.connects.back(), 0u);
  EXPECT_EQ(table_->links().size(), 3u);
}

// A task that never started passed its deadline (every thread of the worker busy):
// the worker is out for one task_timeout (parole), then probed, and back once it
// answers; a task of it starting brings it back earlier.
TEST_F(RemoteDispatch, AWorkerWhoseTaskNeverStartedIsOnParoleUntilItAnswersAProbe) {
  start({kA});
  const auto a = bring_up(0, 2);
  auto c = call("x");
  advance(1001ms);
  ASSERT_EQ(c->result.status, CallStatus::lost);
  EXPECT_FALSE(c->result.started);
  EXPECT_EQ(table_->live(), 0u);
  EXPECT_EQ(call("y")->result.status, CallStatus::no_workers);
  advance(999ms);
  answer_pings(a);  // its heartbeats answered all along: no parole before its time
  EXPECT_EQ(table_->live(), 0u);
  const auto pings = net_.pings.size();
  advance(2ms);  // a deadline's time since: the probe goes at once
  ASSERT_EQ(net_.pings.size(), pings + 1);
  EXPECT_EQ(table_->live(), 0u);  // not before the probe is answered
  advance(1000ms);                // a worker that does not answer stays out
  EXPECT_EQ(table_->live(), 0u);
  answer_pings(a);
  EXPECT_EQ(table_->live(), 1u);
  // Out again; then a task of it that was sent before starts: back before parole.
  auto d = call("d");
  advance(500ms);
  auto e = call("e");
  advance(501ms);
  EXPECT_EQ(d->result.status, CallStatus::lost);
  EXPECT_FALSE(e->finished);
  EXPECT_EQ(table_->live(), 0u);
  table_->started(a, e->id);
  EXPECT_EQ(table_->live(), 1u);
}

// A worker whose started task is stuck stays out (no parole) and its queued task is
// lost as never started; it is back when the stuck thread is freed.
TEST_F(RemoteDispatch, AStuckWorkerIsOutUntilItsThreadIsFreedAndItsQueuedTaskIsNotCounted) {
  start({kA});
  const auto a = bring_up(0, 2);
  auto hung = call("hung");
  table_->started(a, hung->id);
  auto queued = call("queued");
  ASSERT_EQ(net_.tasks.size(), 2u);
  advance(1001ms);
  EXPECT_EQ(hung->result.status, CallStatus::lost);
  EXPECT_TRUE(hung->result.started);
  EXPECT_EQ(queued->result.status, CallStatus::lost);
  EXPECT_FALSE(queued->result.started);
  EXPECT_EQ(net_.cancels.size(), 2u);
  for (int i = 0; i < 30; ++i) {
    advance(100ms);
    table_->heard(a);
  }
  EXPECT_EQ(table_->live(), 0u);  // three deadlines later: still out
  EXPECT_EQ(call("not sent")->result.status, CallStatus::no_workers);
  table_->reply(a, hung->id, CallStatus::done, {}, bytes_of("late"));  // it ended after all
  EXPECT_EQ(table_->live(), 1u);
  EXPECT_EQ(table_->stats().late_dropped, 1u);
}

// A worker of 2 threads and a window of 4 whose started task is stuck keeps serving
// with the other thread's share of the window (2); a second stuck thread takes it out;
// each thread freed gives its share back.
TEST_F(RemoteDispatch, AStuckThreadShrinksTheWindowByItsShare) {
  start({kA});
  const auto a = bring_up(0, 4, 2);
  auto hung = call("hung");
  table_->started(a, hung->id);
  advance(1001ms);
  ASSERT_EQ(hung->result.status, CallStatus::lost);
  EXPECT_EQ(table_->live(), 1u);  // one thread of two is stuck: still in the rotation
  std::vector<std::shared_ptr<Call>> calls;
  for (int i = 0; i < 3; ++i) calls.push_back(call("c" + std::to_string(i)));
  EXPECT_EQ(table_->outstanding(), 2u);  // a window of 2, not 4
  EXPECT_EQ(table_->pending(), 1u);
  table_->started(a, calls[0]->id);
  advance(1001ms);  // the second thread is stuck too; the queued c1 never started
  EXPECT_TRUE(calls[0]->result.started);
  EXPECT_FALSE(calls[1]->result.started);
  EXPECT_EQ(table_->live(), 0u);
  EXPECT_EQ(calls[2]->result.status, CallStatus::no_workers);
  for (int i = 0; i < 30; ++i) advance(100ms), answer_pings(a);
  EXPECT_EQ(table_->live(), 0u);  // no parole while every thread is stuck
  table_->freed(a, hung->id);
  EXPECT_EQ(table_->live(), 1u);
  auto more = {call("d0"), call("d1"), call("d2")};
  EXPECT_EQ(table_->outstanding(), 2u);  // one thread stuck still: a window of 2
  table_->freed(a, calls[0]->id);
  EXPECT_EQ(table_->outstanding(), 3u);  // the whole window again
  for (const auto& c : more) EXPECT_FALSE(c->finished);
}

// A caller that stops waiting: the attempt is cancelled on its worker, and its result,
// should it come, is late.
TEST_F(RemoteDispatch, AnAbandonedCallIsCancelledAndItsResultDropped) {
  start({kA});
  const auto a = bring_up(0, 2);
  auto c = call("x");
  table_->abandon(c);
  ASSERT_EQ(net_.cancels.size(), 1u);
  EXPECT_EQ(net_.cancels[0], std::make_pair(a, c->id));
  table_->reply(a, c->id, CallStatus::done, {}, bytes_of("X"));
  EXPECT_EQ(table_->stats().late_dropped, 1u);
  EXPECT_EQ(table_->outstanding(), 0u);
}

// Hello timeouts and refusals: tried again after reconnect_interval (5 × for a refusal,
// another build or token will not change soon), and lost_workers says why.
TEST_F(RemoteDispatch, AnUnansweredOrRefusedHelloIsTriedAgainLater) {
  start({kA});
  table_->tick();
  auto s = table_->connected(0);
  ASSERT_TRUE(s);
  advance(5001ms);
  EXPECT_EQ(table_->links()[0].phase, Link::Phase::idle);
  EXPECT_EQ(net_.closed, std::vector<SessionRef>{*s});
  EXPECT_EQ(table_->lost_workers(),
            std::vector<std::string>{"10.0.0.1:7000 (no answer to the hello within 5 s)"});
  advance(200ms);
  auto s2 = table_->connected(0);
  ASSERT_TRUE(s2);
  table_->welcome(*s, 4);  // a welcome of the earlier hello: ignored
  EXPECT_EQ(table_->live(), 0u);
  table_->refused(*s2, "build 'x' (trainer) differs");
  const auto connects = net_.connects.size();
  advance(999ms);
  EXPECT_EQ(net_.connects.size(), connects);
  advance(2ms);
  EXPECT_EQ(net_.connects.size(), connects + 1);
  EXPECT_EQ(table_->lost_workers()[0], "10.0.0.1:7000 (refused: build 'x' (trainer) differs)");
}

TEST_F(RemoteDispatch, TheEndOfThePoolStopsEveryCall) {
  start({kA});
  bring_up(0, 1);
  auto out = call("sent");
  auto waiting = call("waits");
  table_->shut_down();
  EXPECT_EQ(out->result.status, CallStatus::stopped);
  EXPECT_EQ(waiting->result.status, CallStatus::stopped);
  EXPECT_EQ(call("after")->result.status, CallStatus::stopped);
}

}  // namespace
}  // namespace brigade::transport::detail
