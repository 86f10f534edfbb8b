// The worker node's actors (detail/worker_actors.h) on CAF's test_coordinator: every
// message is delivered when the test runs the scheduler, timers fire when it triggers
// them, the worker's clock is a ManualClock, and the operation thread is played by
// hand. Shows that the actors only carry messages to the worker's rules and back, in
// one exact order per test; the rules themselves are tested in worker_table_test.cc.
#include "transport/remote/detail/worker_actors.h"

#include <gtest/gtest.h>

#include <caf/scheduler/test_coordinator.hpp>

#include "tests/transport/remote/remote_test_util.h"
#include "transport/remote/detail/remote_auth.h"
#include "transport/remote/detail/wire_messages.h"

namespace brigade::transport::detail {
namespace {

using namespace std::chrono_literals;
using test::bytes_of;
using test::text_of;

using test::kTrainerKey;

caf::actor_system_config& testing_config(caf::actor_system_config& config) {
  config.set("scheduler.policy", caf::atom("testing"));
  return config;
}

// A trainer that records every message it gets.
caf::behavior recorder(caf::event_based_actor* self,
                       std::shared_ptr<std::vector<caf::message>> inbox) {
  self->set_default_handler(
      [inbox](caf::scheduled_actor*, caf::message_view& x) -> caf::result<caf::message> {
        inbox->push_back(x.copy_content_to_message());
        return caf::none;
      });
  return {[](int) {}};
}

class WorkerActors : public ::testing::Test {
 protected:
  WorkerActors() {
    WorkerOptions o;
    o.threads = 1;
    o.security = test::kSecurity;
    o.heartbeat_timeout = 2000ms;
    o.clock = clock_;
    core_ = std::make_shared<Core>(o, 2, test::upper_ops());
    core_->table.set_name("10.0.0.9:7000");
    gate_ = spawn_gate(system_, core_);
    trainer_ = system_.spawn(recorder, inbox_);
  }
  ~WorkerActors() override {
    core_->guard->stopping = true;  // this process's own exits from here on
    caf::anon_send_exit(gate_, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(trainer_, caf::exit_reason::user_shutdown);
    if (session_) caf::anon_send_exit(session_, caf::exit_reason::user_shutdown);
    sched_.run();
  }

  // The hello, delivered: the welcome's session actor and key (or a refusal in inbox_).
  void hello(HelloFields h) {
    caf::anon_send(gate_, hello_atom::value, write_hello(h), trainer_);
    sched_.run();
    if (inbox_->empty() || !inbox_->back().match_element<caf::atom_value>(0) ||
        inbox_->back().get_as<caf::atom_value>(0) != welcome_atom::value)
      return;
    const auto& m = inbox_->back();
    key_ = read_welcome(m.get_as<std::vector<char>>(2)).session_key;
    session_ = m.get_as<caf::actor>(3);
    session_->attach_functor([ended = ended_](const caf::error&) { *ended = true; });
  }
  HelloFields good_hello() const {
    return {.protocol = kProtocolVersion,
            .build_id = std::string(build_id()),
            .token = token_digest(test::kSecurity.token),
            .trainer_key = kTrainerKey,
            .name = "trainer-1",
            .operations = {{"upper", 1}}};
  }
  // What the trainer got, one line per message: "started 1", "result 1: ABC", ….
  std::vector<std::string> got() const {
    std::vector<std::string> out;
    for (const auto& m : *inbox_) {
      const auto atom = caf::to_string(m.get_as<caf::atom_value>(0));
      std::string line = atom;
      if (m.size() > 1 && m.match_element<std::string>(1) &&
          m.get_as<std::string>(1) != kTrainerKey)
        line += " (another key)";
      if (m.size() > 2 && m.match_element<std::uint64_t>(2))
        line += " " + std::to_string(m.get_as<std::uint64_t>(2));
      if (m.size() > 3 && m.match_element<WirePayload>(3))
        line += ": " + text_of(m.get_as<WirePayload>(3).bytes);
      if (m.size() > 3 && m.match_element<std::string>(3)) line += ": " + m.get_as<std::string>(3);
      out.push_back(line);
    }
    return out;
  }
  // The operation thread, by hand: takes the next task and runs "upper" on it.
  void run_one_task() {
    std::optional<TakenTask> t;
    {
      std::lock_guard lock(core_->table.mutex);
      t = core_->table.take();
    }
    ASSERT_TRUE(t);
    auto result = (*core_->operations.find(t->op))(t->payload, {t->stop});
    std::lock_guard lock(core_->table.mutex);
    core_->table.finish(*t, std::move(result), {});
  }
  WorkerStats stats() const {
    std::lock_guard lock(core_->table.mutex);
    return core_->table.stats();
  }

  caf::actor_system_config config_;
  caf::actor_system system_{testing_config(config_)};
  caf::scheduler::test_coordinator& sched_ =
      dynamic_cast<caf::scheduler::test_coordinator&>(system_.scheduler());
  std::shared_ptr<actors::ManualClock> clock_ = std::make_shared<actors::ManualClock>();
  std::shared_ptr<std::vector<caf::message>> inbox_ = std::make_shared<std::vector<caf::message>>();
  std::shared_ptr<bool> ended_ = std::make_shared<bool>(false);
  std::shared_ptr<Core> core_;
  caf::actor gate_, trainer_, session_;
  std::string key_;
};

// A hello, a task, its thread's start and result, a ping: each reaches the trainer with
// its key, in the order the table made them.
TEST_F(WorkerActors, ASessionCarriesTasksAndResultsInOrder) {
  hello(good_hello());
  ASSERT_TRUE(session_);
  caf::anon_send(session_, task_atom::value, key_, std::uint64_t{1}, std::string("upper"),
                 bytes_of("abc"));
  caf::anon_send(session_, task_atom::value, key_, std::uint64_t{2}, std::string("upper"),
                 bytes_of("de"));
  caf::anon_send(session_, task_atom::value, key_, std::uint64_t{3}, std::string("upper"),
                 bytes_of("full"));
  sched_.run();
  run_one_task();
  caf::anon_send(session_, ping_atom::value, key_);
  sched_.run();
  EXPECT_EQ(got(), (std::vector<std::string>{"welcome",
                                             "refuse 3: worker 10.0.0.9:7000: the "
                                             "session's window of 2 tasks is full",
                                             "started 1", "result 1: ABC", "pong"}));
  EXPECT_EQ(stats().tasks_outstanding, 1u);
}

// A message with a wrong key or of no known kind is dropped and counted (one that does
// not even start with an atom, at the mailbox); nothing reaches the trainer.
TEST_F(WorkerActors, AMessageWithAWrongKeyIsDroppedByTheSession) {
  hello(good_hello());
  ASSERT_TRUE(session_);
  caf::anon_send(session_, task_atom::value, std::string(16, 'x'), std::uint64_t{1},
                 std::string("upper"), bytes_of("abc"));
  caf::anon_send(session_, ping_atom::value, std::string("short"));
  caf::anon_send(session_, caf::atom("bogus"), key_);               // the default handler
  caf::anon_send(session_, std::string("not a protocol message"));  // the mailbox's guard
  sched_.run();
  EXPECT_EQ(got(), std::vector<std::string>{"welcome"});
  EXPECT_EQ(stats().messages_dropped, 3u);
  EXPECT_EQ(core_->guard->dropped(), 1u);
  EXPECT_EQ(stats().tasks_outstanding, 0u);
}

// The gate's timer has the table look at heartbeats: a trainer silent past the timeout
// loses its session, and the session actor ends.
TEST_F(WorkerActors, ASilentTrainersSessionActorEndsAtTheGatesTick) {
  hello(good_hello());
  ASSERT_TRUE(session_);
  clock_->advance(2000ms);
  sched_.trigger_timeouts();  // the gate's tick: not past the timeout yet
  sched_.run();
  EXPECT_FALSE(*ended_);
  caf::anon_send(session_, ping_atom::value, key_);  // heard at 2 s
  sched_.run();
  clock_->advance(2001ms);
  sched_.trigger_timeouts();
  sched_.run();
  EXPECT_TRUE(*ended_);
  EXPECT_EQ(stats().sessions_open, 0u);
  std::lock_guard lock(core_->table.mutex);
  EXPECT_TRUE(core_->network.sessions().empty());
}

// The trainer's actor goes down (its connection broke): the session ends at once.
TEST_F(WorkerActors, ATrainerThatGoesDownEndsItsSessionActor) {
  hello(good_hello());
  ASSERT_TRUE(session_);
  caf::anon_send(session_, task_atom::value, key_, std::uint64_t{1}, std::string("upper"),
                 bytes_of("abc"));
  sched_.run();
  caf::anon_send_exit(trainer_, caf::exit_reason::kill);
  sched_.run();
  EXPECT_TRUE(*ended_);
  const auto s = stats();
  EXPECT_EQ(s.sessions_open, 0u);
  EXPECT_EQ(s.tasks_cancelled, 1u);
  EXPECT_EQ(s.tasks_outstanding, 0u);
}

// A refused hello is answered with the reason, and no session actor is made.
TEST_F(WorkerActors, ARefusedHelloIsAnsweredAndOpensNothing) {
  auto h = good_hello();
  h.token = token_digest("another token");
  hello(h);
  EXPECT_FALSE(session_);
  ASSERT_EQ(inbox_->size(), 1u);
  const auto& m = inbox_->front();
  ASSERT_TRUE(m.match_element<caf::atom_value>(0));
  EXPECT_EQ(m.get_as<caf::atom_value>(0), refuse_atom::value);
  EXPECT_EQ(m.get_as<std::string>(1), kTrainerKey);
  EXPECT_EQ(m.get_as<std::string>(2), "the job token differs from worker 10.0.0.9:7000's");
  EXPECT_EQ(stats().hellos_refused, 1u);
  std::lock_guard lock(core_->table.mutex);
  EXPECT_TRUE(core_->network.sessions().empty());
}

}  // namespace
}  // namespace brigade::transport::detail
