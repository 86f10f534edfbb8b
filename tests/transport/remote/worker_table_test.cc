// The worker node's rules (detail/worker_table.h) driven step by step: a manual clock,
// a fake network that records what the worker sends, and the operation threads played
// by hand (take, then finish). No thread, no socket, no sleep: each test is one exact
// interleaving.
#include "transport/remote/detail/worker_table.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>

#include "tests/transport/remote/remote_test_util.h"
#include "transport/remote/detail/remote_auth.h"
#include "transport/remote/detail/wire_messages.h"

namespace brigade::transport::detail {
namespace {

using namespace std::chrono_literals;
using test::bytes_of;
using test::text_of;

// Records every send of the table.
struct FakeWorkerNetwork final : WorkerNetwork {
  struct Sent {
    std::uint64_t session;
    std::string what;  // "refuse 3: why", "started 3", "result 3: TEXT", …
    friend bool operator==(const Sent&, const Sent&) = default;
  };
  std::vector<Sent> sent;
  std::vector<std::uint64_t> closed;

  void send_refuse_task(std::uint64_t s, std::uint64_t id, const std::string& why) override {
    sent.push_back({s, "refuse " + std::to_string(id) + ": " + why});
  }
  void send_pong(std::uint64_t s) override { sent.push_back({s, "pong"}); }
  void send_started(std::uint64_t s, std::uint64_t id) override {
    sent.push_back({s, "started " + std::to_string(id)});
  }
  void send_freed(std::uint64_t s, std::uint64_t id) override {
    sent.push_back({s, "freed " + std::to_string(id)});
  }
  void send_result(std::uint64_t s, std::uint64_t id, std::vector<char> bytes) override {
    sent.push_back({s, "result " + std::to_string(id) + ": " + text_of(bytes)});
  }
  void send_failed(std::uint64_t s, std::uint64_t id, const std::string& why) override {
    sent.push_back({s, "failed " + std::to_string(id) + ": " + why});
  }
  void close(std::uint64_t s) override { closed.push_back(s); }
};

using test::kTrainerKey;

HelloFields good_hello() {
  return {.protocol = kProtocolVersion,
          .build_id = std::string(build_id()),
          .token = token_digest(test::kSecurity.token),
          .trainer_key = kTrainerKey,
          .name = "trainer-1",
          .operations = {{"upper", 1}},
          .fingerprint = 42};
}

class WorkerSessions : public ::testing::Test {
 protected:
  void start(std::uint32_t window = 2) {
    WorkerOptions o;
    o.threads = 1;
    o.security = test::kSecurity;
    o.fingerprint = 42;
    o.heartbeat_timeout = 2000ms;
    o.clock = clock_;
    table_ = std::make_unique<WorkerTable>(o, window, test::upper_ops(), net_);
    table_->set_name("10.0.0.9:7000");
  }

  // A session opened by an accepted hello.
  std::uint64_t open_session(HelloFields h = good_hello()) {
    auto out = table_->hello(write_hello(h), true);
    EXPECT_TRUE(out.session) << out.refusal;
    return out.session.value_or(0);
  }
  Dropped task(std::uint64_t s, std::uint64_t id, std::string text = "x") {
    return table_->task(s, table_->session_key(s), id, "upper", bytes_of(text));
  }
  std::string refusal(HelloFields h) {
    auto out = table_->hello(write_hello(h), true);
    EXPECT_FALSE(out.session);
    return out.refusal;
  }
  std::vector<std::string> sent_to(std::uint64_t s) const {
    std::vector<std::string> out;
    for (const auto& x : net_.sent)
      if (x.session == s) out.push_back(x.what);
    return out;
  }

  std::shared_ptr<actors::ManualClock> clock_ = std::make_shared<actors::ManualClock>();
  FakeWorkerNetwork net_;
  std::unique_ptr<WorkerTable> table_;
};

TEST_F(WorkerSessions, AHelloOpensASessionWithItsOwnKeyAndTheWindow) {
  start(3);
  auto out = table_->hello(write_hello(good_hello()), true);
  ASSERT_TRUE(out.session) << out.refusal;
  EXPECT_EQ(out.trainer_key, kTrainerKey);
  const auto w = read_welcome(out.welcome);
  EXPECT_EQ(w.window, 3u);
  EXPECT_EQ(w.threads, 1u);
  EXPECT_EQ(w.name, "10.0.0.9:7000");
  EXPECT_EQ(w.session_key, table_->session_key(*out.session));
  EXPECT_EQ(w.session_key.size(), 16u);
  const auto second = open_session();
  EXPECT_NE(table_->session_key(second), w.session_key);  // a key per session
  EXPECT_EQ(table_->stats().sessions_opened, 2u);
  EXPECT_EQ(table_->stats().sessions_open, 2u);
}

// Each refusal names both sides; nothing is kept for a refused hello, however many.
TEST_F(WorkerSessions, ARefusedHelloNamesBothSidesAndKeepsNothing) {
  start();
  auto h = good_hello();
  h.token = token_digest("another token");
  EXPECT_EQ(refusal(h), "the job token differs from worker 10.0.0.9:7000's");
  h = good_hello();
  h.protocol = kProtocolVersion + 1;
  EXPECT_EQ(refusal(h), fmt::format("protocol version {} (trainer) differs from {} (worker "
                                    "10.0.0.9:7000)",
                                    kProtocolVersion + 1, kProtocolVersion));
  h = good_hello();
  h.build_id = "0.0.1+other";
  EXPECT_EQ(refusal(h), fmt::format("build '0.0.1+other' (trainer) differs from '{}' (worker "
                                    "10.0.0.9:7000)",
                                    build_id()));
  h = good_hello();
  h.operations = {{"upper", 2}};
  EXPECT_EQ(refusal(h),
            "operation 'upper' version 2 (trainer) differs from version 1 (worker 10.0.0.9:7000)");
  h.operations = {{"lower", 1}};
  EXPECT_EQ(refusal(h), "operation 'lower' version 1 (trainer) is not on worker 10.0.0.9:7000");
  h = good_hello();
  h.fingerprint = 43;
  EXPECT_EQ(refusal(h),
            "dataset fingerprint 000000000000002b (trainer) differs from 000000000000002a (worker "
            "10.0.0.9:7000)");
  h = good_hello();
  h.trainer_key = "short";
  EXPECT_EQ(refusal(h), "a trainer key of 16 bytes is required");
  EXPECT_EQ(table_->hello(write_hello(good_hello()), false).refusal, "an anonymous hello");
  auto garbage = table_->hello(bytes_of("not a hello"), true);
  EXPECT_FALSE(garbage.session);
  EXPECT_FALSE(garbage.refusal.empty());
  // A peer without the token, hello after hello: a counter grows, nothing else.
  h = good_hello();
  h.token = token_digest("guess");
  for (int i = 0; i < 1000; ++i) ASSERT_FALSE(table_->hello(write_hello(h), true).session);
  EXPECT_EQ(table_->sessions(), 0u);
  EXPECT_EQ(table_->stats().hellos_refused, 1009u);
  EXPECT_EQ(table_->stats().sessions_opened, 0u);
  EXPECT_TRUE(net_.sent.empty());
}

// The window bounds what a session holds: queued and running together; a task beyond it
// is refused to the trainer at once, and admitted again once a result frees credit.
TEST_F(WorkerSessions, TheWindowBoundsTheTasksASessionHolds) {
  start(2);
  const auto s = open_session();
  EXPECT_EQ(task(s, 1), nullptr);
  EXPECT_EQ(task(s, 2), nullptr);
  EXPECT_EQ(task(s, 3), nullptr);  // taken: answered with a refusal
  EXPECT_EQ(sent_to(s), std::vector<std::string>{
                            "refuse 3: worker 10.0.0.9:7000: the session's window of 2 tasks is "
                            "full"});
  EXPECT_EQ(table_->held(s), 2u);
  auto one = table_->take();
  ASSERT_TRUE(one);
  EXPECT_EQ(one->id, 1u);
  EXPECT_EQ(task(s, 4), nullptr);  // one running, one queued: still full
  EXPECT_EQ(table_->held(s), 2u);
  EXPECT_EQ(table_->stats().tasks_outstanding, 2u);
  table_->finish(*one, bytes_of("X"), {});
  EXPECT_EQ(task(s, 5), nullptr);
  EXPECT_EQ(table_->held(s), 2u);
  EXPECT_EQ(sent_to(s), (std::vector<std::string>{
                            "refuse 3: worker 10.0.0.9:7000: the session's window of 2 tasks is "
                            "full",
                            "started 1",
                            "refuse 4: worker 10.0.0.9:7000: the session's window of 2 tasks is "
                            "full",
                            "result 1: X"}));
}

// Messages a peer may forge or replay: a wrong key, a session that ended, a task id the
// session holds already. Each is dropped and counted; none changes what is held.
TEST_F(WorkerSessions, AWrongKeyAnEndedSessionOrADuplicateTaskIsDropped) {
  start(4);
  const auto s = open_session();
  const auto other = open_session();
  EXPECT_STREQ(table_->task(s, table_->session_key(other), 1, "upper", bytes_of("x")),
               "a message with a wrong session key");
  EXPECT_STREQ(table_->ping(s, std::string(16, '\0')), "a message with a wrong session key");
  EXPECT_STREQ(table_->cancel(s, "", 1), "a message with a wrong session key");
  EXPECT_EQ(task(s, 7), nullptr);
  EXPECT_STREQ(task(s, 7), "a task whose id the session holds already");  // queued
  auto running = table_->take();
  ASSERT_TRUE(running);
  EXPECT_STREQ(task(s, 7), "a task whose id the session holds already");  // running
  EXPECT_EQ(table_->held(s), 1u);
  const auto key = table_->session_key(other);
  table_->trainer_gone(other);
  EXPECT_STREQ(table_->task(other, key, 1, "upper", bytes_of("late")),
               "a message for an ended session");
  EXPECT_STREQ(table_->ping(other, key), "a message for an ended session");
  EXPECT_EQ(table_->stats().messages_dropped, 7u);
  EXPECT_EQ(table_->held(s), 1u);
  EXPECT_EQ(table_->held(other), 0u);
  EXPECT_EQ(sent_to(other), std::vector<std::string>{});
  // A finished id may come again (the trainer numbers attempts, never reuses one; a
  // replay of a done task is a new task to this session, held within the window).
  table_->finish(*running, bytes_of("7"), {});
  EXPECT_EQ(task(s, 7), nullptr);
}

// The threads take the sessions' tasks in turn, so trainers share the worker's cores.
TEST_F(WorkerSessions, ThreadsTakeTheSessionsTasksInTurn) {
  start(4);
  const auto a = open_session();
  const auto b = open_session();
  for (std::uint64_t id = 1; id <= 3; ++id) ASSERT_EQ(task(a, id, "a"), nullptr);
  ASSERT_EQ(task(b, 10, "b"), nullptr);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> order;
  while (auto t = table_->take()) order.emplace_back(t->session, t->id);
  EXPECT_EQ(order, (std::vector<std::pair<std::uint64_t, std::uint64_t>>{
                       {a, 1}, {b, 10}, {a, 2}, {a, 3}}));
  EXPECT_FALSE(table_->has_work());
}

// What the worker served, per trainer and interval (its statistics reports): results
// counted per session name with their task times; a failed task counted apart, a
// cancelled one not at all; the queue and the running tasks as they are now.
TEST_F(WorkerSessions, TakeServedCountsEachTrainersResultsSinceTheLastCall) {
  start(4);
  auto h = good_hello();
  h.name = "rank 1 of 2 (pid 9)";
  const auto a = open_session();
  const auto b = open_session(h);
  ASSERT_EQ(task(a, 1), nullptr);
  ASSERT_EQ(task(b, 2), nullptr);
  ASSERT_EQ(task(a, 3), nullptr);
  ASSERT_EQ(task(a, 4), nullptr);
  auto t1 = table_->take();
  clock_->advance(100ms);
  table_->finish(*t1, bytes_of("1"), {});
  auto t2 = table_->take();
  clock_->advance(300ms);
  table_->finish(*t2, bytes_of("2"), {});
  auto t3 = table_->take();
  clock_->advance(10ms);
  table_->finish(*t3, {}, "it threw");
  auto served = table_->take_served();
  EXPECT_EQ(served.tasks, 2u);
  EXPECT_EQ(served.failed, 1u);
  EXPECT_NEAR(served.busy_s, 0.4, 1e-9);
  EXPECT_NEAR(served.p50_ms, 100, 6);  // the histogram's ±6%
  EXPECT_NEAR(served.p99_ms, 300, 18);
  EXPECT_EQ(served.queued, 1u);  // task 4
  EXPECT_EQ(served.running, 0u);
  EXPECT_EQ(served.threads, 1u);
  ASSERT_EQ(served.trainers.size(), 2u);  // by name
  EXPECT_EQ(served.trainers[0].name, "rank 1 of 2 (pid 9)");
  EXPECT_EQ(served.trainers[0].tasks, 1u);
  EXPECT_NEAR(served.trainers[0].busy_s, 0.3, 1e-9);
  EXPECT_EQ(served.trainers[1].name, "trainer-1");
  EXPECT_EQ(served.trainers[1].tasks, 1u);
  // Since the last call: nothing yet; a cancelled task is not served.
  auto t4 = table_->take();
  EXPECT_EQ(table_->take_served().running, 1u);
  ASSERT_EQ(table_->cancel(a, table_->session_key(a), 4), nullptr);
  table_->finish(*t4, bytes_of("4"), {});
  const auto after = table_->take_served();
  EXPECT_EQ(after.tasks, 0u);
  EXPECT_TRUE(after.trainers.empty());
  EXPECT_EQ(after.p50_ms, 0);
}

// The directory's rank weights (REBALANCING): while every session has tasks queued,
// a session is served in proportion to its rank's weight; the ranks left at the neutral
// weight (and a trainer without a rank) share the rest evenly.
TEST_F(WorkerSessions, RankWeightsServeEachSessionInProportionToItsRanksWeight) {
  start(40);
  std::vector<std::uint64_t> sessions;
  for (std::optional<std::uint32_t> rank : {std::optional<std::uint32_t>(0), {1}, {2}, {}}) {
    auto h = good_hello();
    h.rank = rank;
    sessions.push_back(open_session(h));
  }
  table_->set_rank_weights({kNeutralRankWeight, kNeutralRankWeight, 3 * kNeutralRankWeight});
  EXPECT_EQ(table_->stats().weight_updates, 1u);
  for (auto s : sessions)
    for (std::uint64_t id = 1; id <= 30; ++id) ASSERT_EQ(task(s, id), nullptr);
  std::map<std::uint64_t, int> served;
  for (int turn = 0; turn < 60; ++turn) {
    auto t = table_->take();
    ASSERT_TRUE(t);
    ++served[t->session];
  }
  // Weights 1 : 1 : 3 : 1 (the last has no rank) over 60 turns.
  EXPECT_EQ(served[sessions[0]], 10);
  EXPECT_EQ(served[sessions[1]], 10);
  EXPECT_EQ(served[sessions[2]], 30);
  EXPECT_EQ(served[sessions[3]], 10);
}

// Even weights again: round robin. A session that had nothing queued does not come
// back with turns saved up: it takes its turn among the others, not a burst.
TEST_F(WorkerSessions, AnIdleSessionSavesNoTurnsAndEvenWeightsAreRoundRobin) {
  start(64);
  auto ha = good_hello(), hb = good_hello();
  ha.rank = 0;
  hb.rank = 1;
  const auto a = open_session(ha);
  const auto b = open_session(hb);
  table_->set_rank_weights({kNeutralRankWeight, 2 * kNeutralRankWeight});
  for (std::uint64_t id = 1; id <= 44; ++id) ASSERT_EQ(task(b, id), nullptr);
  for (int i = 0; i < 40; ++i) ASSERT_EQ(table_->take()->session, b);  // a is idle
  table_->set_rank_weights({kNeutralRankWeight, kNeutralRankWeight});
  for (std::uint64_t id = 1; id <= 3; ++id) ASSERT_EQ(task(a, id), nullptr);
  std::vector<std::uint64_t> order;
  for (int i = 0; i < 6; ++i) order.push_back(table_->take()->session);
  EXPECT_EQ(order, (std::vector<std::uint64_t>{a, b, a, b, a, b})) << "no burst of a";
}

// However heavy its rank, a session holds at most its window.
TEST_F(WorkerSessions, AHeavyRanksSessionIsStillBoundedByItsWindow) {
  start(2);
  auto h = good_hello();
  h.rank = 0;
  const auto a = open_session(h);
  table_->set_rank_weights({kMaxRankWeight});
  ASSERT_EQ(task(a, 1), nullptr);
  ASSERT_EQ(task(a, 2), nullptr);
  ASSERT_EQ(task(a, 3), nullptr);
  EXPECT_EQ(sent_to(a).back(),
            "refuse 3: worker 10.0.0.9:7000: the session's window of 2 tasks is full");
  EXPECT_EQ(table_->held(a), 2u);
}

// A cancel drops a queued task (it never starts) and stops a running one, whose thread
// then says it is free instead of sending a result.
TEST_F(WorkerSessions, ACancelledTaskIsNeverAnsweredButItsThreadIsFreed) {
  start(4);
  const auto s = open_session();
  ASSERT_EQ(task(s, 1), nullptr);
  ASSERT_EQ(task(s, 2), nullptr);
  auto running = table_->take();
  ASSERT_TRUE(running);
  EXPECT_EQ(table_->cancel(s, table_->session_key(s), 2), nullptr);
  EXPECT_EQ(table_->cancel(s, table_->session_key(s), 1), nullptr);
  EXPECT_TRUE(running->stop.stop_requested());
  EXPECT_FALSE(table_->take());                                       // 2 was dropped
  EXPECT_EQ(table_->cancel(s, table_->session_key(s), 99), nullptr);  // unknown: nothing
  clock_->advance(1500ms);
  table_->finish(*running, bytes_of("too late"), {});
  EXPECT_EQ(sent_to(s), (std::vector<std::string>{"started 1", "freed 1"}));
  const auto st = table_->stats();
  EXPECT_EQ(st.tasks_cancelled, 2u);
  EXPECT_EQ(st.tasks_done, 0u);
  EXPECT_EQ(st.tasks_outstanding, 0u);
  EXPECT_DOUBLE_EQ(st.busy_seconds, 1.5);
}

TEST_F(WorkerSessions, AnOperationsFailureIsSentAsAFailure) {
  start();
  const auto s = open_session();
  ASSERT_EQ(task(s, 1), nullptr);
  auto t = table_->take();
  ASSERT_TRUE(t);
  table_->finish(*t, {}, "a malformed task");
  EXPECT_EQ(sent_to(s), (std::vector<std::string>{"started 1", "failed 1: a malformed task"}));
  EXPECT_EQ(table_->stats().tasks_failed, 1u);
}

// A trainer that froze (SIGSTOP): no task, no ping for heartbeat_timeout ends its
// session — its queue dropped, its running task stopped, its thread's result never sent
// — and the worker serves the others. Each ping or task counts as heard.
TEST_F(WorkerSessions, ASilentTrainersSessionEndsAfterTheHeartbeatTimeout) {
  start(4);
  const auto frozen = open_session();
  const auto alive = open_session();
  ASSERT_EQ(task(frozen, 1), nullptr);
  ASSERT_EQ(task(frozen, 2), nullptr);
  auto running = table_->take();
  ASSERT_TRUE(running);
  ASSERT_EQ(running->session, frozen);
  clock_->advance(1500ms);
  ASSERT_EQ(task(alive, 5), nullptr);  // heard from `alive` at 1.5 s
  clock_->advance(500ms);
  table_->tick();  // 2.0 s: not past the timeout
  EXPECT_TRUE(table_->open(frozen));
  clock_->advance(1ms);
  table_->tick();
  EXPECT_FALSE(table_->open(frozen));
  EXPECT_TRUE(table_->open(alive));
  EXPECT_EQ(net_.closed, std::vector<std::uint64_t>{frozen});
  EXPECT_TRUE(running->stop.stop_requested());
  EXPECT_EQ(table_->held(frozen), 0u);
  EXPECT_EQ(table_->stats().sessions_open, 1u);
  EXPECT_EQ(table_->stats().tasks_cancelled, 1u);  // task 2, dropped from the queue
  auto next = table_->take();
  ASSERT_TRUE(next);
  EXPECT_EQ(next->session, alive);
  table_->finish(*running, bytes_of("X"), {});  // the frozen trainer's thread returns
  EXPECT_EQ(sent_to(frozen), std::vector<std::string>{"started 1"});
  EXPECT_EQ(table_->stats().tasks_cancelled, 2u);
  // `alive` pings: answered, and kept open past its task's time.
  clock_->advance(1499ms);
  EXPECT_EQ(table_->ping(alive, table_->session_key(alive)), nullptr);
  clock_->advance(1999ms);
  table_->tick();
  EXPECT_TRUE(table_->open(alive));
  EXPECT_EQ(sent_to(alive).back(), "pong");
}

// The trainer's connection went down: the session ends at once, and a task of it that
// was still in flight is dropped as late.
TEST_F(WorkerSessions, ATrainerThatIsGoneEndsItsSessionAtOnce) {
  start();
  const auto s = open_session();
  const auto key = table_->session_key(s);
  ASSERT_EQ(task(s, 1), nullptr);
  table_->trainer_gone(s);
  EXPECT_FALSE(table_->take());
  EXPECT_EQ(net_.closed, std::vector<std::uint64_t>{s});
  EXPECT_STREQ(table_->task(s, key, 2, "upper", bytes_of("late")),
               "a message for an ended session");
  EXPECT_EQ(table_->sessions(), 0u);
  table_->trainer_gone(s);  // a second down: nothing
  EXPECT_EQ(net_.closed.size(), 1u);
}

TEST_F(WorkerSessions, AtItsEndTheWorkerHandsOutNoTaskAndRefusesHellos) {
  start();
  const auto s = open_session();
  ASSERT_EQ(task(s, 1), nullptr);
  table_->shut_down();
  EXPECT_FALSE(table_->take());
  EXPECT_EQ(table_->hello(write_hello(good_hello()), true).refusal,
            "worker 10.0.0.9:7000 is stopping");
}

// -- retries -------------------------------------------------------------------------------

TEST(NextRetry, WaitsFiftyMillisecondsThenDoublesUpToTheCap) {
  const TimePoint t0{std::chrono::seconds(100)};
  EXPECT_EQ(next_retry(t0, 1, 1000ms) - t0, 50ms);
  EXPECT_EQ(next_retry(t0, 2, 1000ms) - t0, 100ms);
  EXPECT_EQ(next_retry(t0, 3, 1000ms) - t0, 200ms);
  EXPECT_EQ(next_retry(t0, 5, 1000ms) - t0, 800ms);
  EXPECT_EQ(next_retry(t0, 6, 1000ms) - t0, 1000ms);
  EXPECT_EQ(next_retry(t0, 4'000'000'000u, 1000ms) - t0, 1000ms);  // no overflow
  EXPECT_EQ(next_retry(t0, 1, 20ms) - t0, 20ms);                   // a cap below the first wait
  EXPECT_EQ(next_retry(t0, 0, 1000ms) - t0, 50ms);
}

// -- the directory join -----------------------------------------------------------------

struct FakeJoinNetwork final : JoinNetwork {
  std::vector<std::string> calls;
  void connect() override { calls.push_back("connect"); }
  void send_join() override { calls.push_back("join"); }
  void forget() override { calls.push_back("forget"); }
};

class WorkerJoin : public ::testing::Test {
 protected:
  void advance(std::chrono::milliseconds by) {
    clock_->advance(by);
    join_.tick();
  }
  std::shared_ptr<actors::ManualClock> clock_ = std::make_shared<actors::ManualClock>();
  FakeJoinNetwork net_;
  DirectoryJoin join_{{"10.0.0.1", 5000}, clock_, net_};
  using Calls = std::vector<std::string>;
};

// Rank 0 starts after the worker: the connect fails, and is tried again 50 ms later,
// then after 100, 200 ms, then every 250 ms (kRetry); a join answered starts over.
TEST_F(WorkerJoin, AnUnreachableDirectoryIsTriedAgainSoonThenLessOften) {
  join_.tick();
  EXPECT_EQ(net_.calls, Calls{"connect"});
  for (auto wait : {50ms, 100ms, 200ms, 250ms, 250ms}) {
    join_.connect_failed("connection refused");
    const auto calls = net_.calls.size();
    advance(wait - 1ms);
    EXPECT_EQ(net_.calls.size(), calls) << wait.count();
    advance(1ms);
    EXPECT_EQ(net_.calls.size(), calls + 1) << wait.count();
    EXPECT_EQ(net_.calls.back(), "connect");
  }
  join_.connected();
  EXPECT_EQ(net_.calls.back(), "join");
  join_.joined();
  EXPECT_EQ(join_.phase(), DirectoryJoin::Phase::joined);
  advance(10s);
  EXPECT_EQ(net_.calls.back(), "join");  // joined: nothing more
  join_.directory_gone();                // the count starts over: 50 ms
  advance(49ms);
  EXPECT_EQ(net_.calls.back(), "forget");
  advance(1ms);
  EXPECT_EQ(net_.calls.back(), "connect");
}

// --join at a worker's port: the join is never answered; given up after 5 s, tried
// again 50 ms later; an answer of the given-up attempt is ignored.
TEST_F(WorkerJoin, AJoinNobodyAnswersIsTriedAgain) {
  join_.tick();
  join_.connected();
  advance(4999ms);
  EXPECT_EQ(join_.phase(), DirectoryJoin::Phase::joining);
  advance(1ms);
  EXPECT_EQ(net_.calls, (Calls{"connect", "join", "forget"}));
  join_.joined();  // late
  EXPECT_EQ(join_.phase(), DirectoryJoin::Phase::idle);
  advance(50ms);
  EXPECT_EQ(net_.calls.back(), "connect");
  EXPECT_EQ(join_.attempts(), 1u);
}

// Rank 0 restarts while the worker is listed, and again while the worker rejoins: each
// time the worker joins the new directory.
TEST_F(WorkerJoin, AWorkerRejoinsADirectoryThatCameBack) {
  join_.tick();
  join_.connected();
  join_.joined();
  join_.directory_gone();
  EXPECT_EQ(join_.phase(), DirectoryJoin::Phase::idle);
  advance(1s);
  join_.connected();
  join_.directory_gone();  // gone again before it answered
  advance(1s);
  join_.connected();
  join_.joined();
  EXPECT_EQ(net_.calls,
            (Calls{"connect", "join", "forget", "connect", "join", "forget", "connect", "join"}));
  EXPECT_EQ(join_.attempts(), 3u);
  EXPECT_EQ(join_.phase(), DirectoryJoin::Phase::joined);
}

// A directory that refuses this worker (another job token) is not asked again.
TEST_F(WorkerJoin, ARefusalIsFinal) {
  join_.tick();
  join_.connected();
  join_.refused("a wrong job token");
  EXPECT_EQ(join_.phase(), DirectoryJoin::Phase::refused);
  advance(60s);
  EXPECT_EQ(net_.calls, (Calls{"connect", "join", "forget"}));
}

}  // namespace
}  // namespace brigade::transport::detail
