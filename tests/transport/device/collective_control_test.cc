#include "transport/device/detail/collective_control.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace brigade::transport::detail {
namespace {

using namespace std::chrono_literals;

// A communicator that answers status() from a script (then "in progress" for ever) and
// records every call; on_status runs before each answer (a test's hook).
struct ScriptedDriver final : CommDriver {
  enum class Answer { done, in_progress, remote_error };
  std::mutex mutex;
  std::deque<Answer> script;
  std::vector<std::string> calls;
  bool has_finalize = true;
  std::function<void(int polls)> on_status;
  int polls = 0;

  void note(const char* call) {
    std::lock_guard lock(mutex);
    calls.emplace_back(call);
  }
  std::vector<std::string> seen() {
    std::lock_guard lock(mutex);
    return calls;
  }
  CommStatus status() override {
    note("status");
    if (on_status) on_status(++polls);
    Answer a = Answer::in_progress;
    {
      std::lock_guard lock(mutex);
      if (!script.empty()) {
        a = script.front();
        script.pop_front();
      }
    }
    if (a == Answer::remote_error) {
      throw DeviceError("NCCL", "ncclRemoteError", "ncclCommGetAsyncError", {DeviceKind::cuda, 0},
                        "a peer went away", DeviceErrc::peer_lost);
    }
    return a == Answer::done ? CommStatus::done : CommStatus::in_progress;
  }
  bool finalize() override {
    note("finalize");
    return has_finalize;
  }
  void destroy() noexcept override { note("destroy"); }
  void abort() noexcept override { note("abort"); }
};

using Answer = ScriptedDriver::Answer;
using Calls = std::vector<std::string>;

CollectiveControlOptions quick(std::chrono::milliseconds timeout = 1h) {
  return {.timeout = timeout, .teardown_timeout = timeout, .poll = 1us, .abort_wait = 1ms};
}

CommStatus in_progress(ScriptedDriver& d) {
  d.note("call");
  return CommStatus::in_progress;
}

TEST(CollectiveControl, ACallInProgressIsPolledUntilDone) {
  ScriptedDriver d;
  d.script = {Answer::in_progress, Answer::in_progress, Answer::done};
  CollectiveControl control(d, quick());
  control.run("ncclSend", [&] { return in_progress(d); }, {});
  EXPECT_EQ(d.seen(), (Calls{"call", "status", "status", "status"}));
  EXPECT_FALSE(control.aborted());
}

// Item 3: the in-progress wait observes the caller's stop token, and aborts.
TEST(CollectiveControl, AStopDuringTheWaitAbortsTheCommunicator) {
  ScriptedDriver d;
  std::stop_source stop;
  d.on_status = [&](int polls) {
    if (polls == 2) stop.request_stop();
  };
  CollectiveControl control(d, quick());
  EXPECT_THROW(control.run(
                   "ncclRecv", [&] { return in_progress(d); }, stop.get_token()),
               StopRequested);
  EXPECT_EQ(d.seen(), (Calls{"call", "status", "status", "abort"}));
  EXPECT_TRUE(control.aborted());
  // Nothing reaches the communicator again.
  try {
    control.run("ncclSend", [&] { return in_progress(d); }, {});
    ADD_FAILURE() << "a call after the abort ran";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.code(), "aborted");
  }
  EXPECT_THROW(control.check(), DeviceError);
  control.close();
  EXPECT_EQ(d.seen().size(), 4u);
}

// Item 3: and a deadline (a peer that never comes), which aborts too.
TEST(CollectiveControl, TheDeadlineAbortsSayingWhy) {
  ScriptedDriver d;
  CollectiveControl control(d, quick(0ms));
  try {
    control.run(
        "ncclCommInitRankConfig", [&] { return in_progress(d); }, {},
        "not every rank joined within the timeout");
    ADD_FAILURE() << "no timeout";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.code(), "timeout");
    EXPECT_EQ(e.message(), "not every rank joined within the timeout");
  }
  EXPECT_EQ(d.seen(), (Calls{"call", "status", "abort"}));
}

TEST(CollectiveControl, AnAsynchronousErrorIsThrownAsTheLibrarysError) {
  ScriptedDriver d;
  d.script = {Answer::in_progress, Answer::remote_error};
  CollectiveControl control(d, quick());
  try {
    control.run("ncclBroadcast", [&] { return in_progress(d); }, {});
    ADD_FAILURE() << "no error";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.code(), "ncclRemoteError");
    EXPECT_TRUE(e.transient());
  }
}

// Item 3: abort() from another thread while one waits: the waiting thread holds no lock
// across its wait, sees the abort at its next poll and never calls the library again.
TEST(CollectiveControl, AbortFromAnotherThreadEndsAWait) {
  ScriptedDriver d;
  std::promise<void> polling;
  d.on_status = [&](int polls) {
    if (polls == 1) polling.set_value();
  };
  CollectiveControl control(d, quick());
  auto waiter = std::async(std::launch::async,
                           [&] { control.run("ncclSend", [&] { return in_progress(d); }, {}); });
  polling.get_future().wait();
  control.abort();
  try {
    waiter.get();
    ADD_FAILURE() << "the wait did not end";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.code(), "aborted");
  }
  const auto calls = d.seen();
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "abort"), 1);
  EXPECT_EQ(calls.back(), "abort") << "a poll after the abort";
}

// Item 3: a call stuck inside the library holds the lock; abort() does not wait for it
// (how NCCL unblocks a hung call), and the call's thread stops once it returns.
TEST(CollectiveControl, AbortDoesNotWaitForACallStuckInTheLibrary) {
  ScriptedDriver d;
  std::promise<void> inside, release;
  CollectiveControl control(d, quick());
  auto stuck = std::async(std::launch::async, [&] {
    control.run("ncclSend",
                [&] {
                  inside.set_value();
                  release.get_future().wait();
                  return in_progress(d);
                },
                {});
  });
  inside.get_future().wait();
  control.abort();  // returns while the call is still inside
  EXPECT_EQ(d.seen(), (Calls{"abort"}));
  release.set_value();
  EXPECT_THROW(stuck.get(), DeviceError);
  EXPECT_EQ(d.seen(), (Calls{"abort", "call"})) << "polled after the abort";
}

// Item 4: teardown finalizes and polls until done before destroying.
TEST(CollectiveControl, CloseFinalizesAndPollsBeforeDestroying) {
  ScriptedDriver d;
  d.script = {Answer::in_progress, Answer::in_progress, Answer::done};
  CollectiveControl control(d, quick());
  control.close();
  EXPECT_EQ(d.seen(), (Calls{"finalize", "status", "status", "status", "destroy"}));
  control.close();  // once
  control.abort();  // released: nothing to abort
  EXPECT_EQ(d.seen().size(), 5u);
}

TEST(CollectiveControl, CloseWithoutFinalizeDestroysAtOnce) {
  ScriptedDriver d;
  d.has_finalize = false;  // NCCL < 2.14
  CollectiveControl control(d, quick());
  control.close();
  EXPECT_EQ(d.seen(), (Calls{"finalize", "destroy"}));
}

// Item 4: a dead peer: queued work never finishes, so the teardown aborts at its
// timeout instead of destroying (ncclCommDestroy would wait for ever).
TEST(CollectiveControl, CloseAbortsAtTheTeardownTimeout) {
  ScriptedDriver d;
  CollectiveControl control(d, quick(0ms));
  control.close();
  EXPECT_EQ(d.seen(), (Calls{"finalize", "status", "abort"}));
}

TEST(CollectiveControl, CloseAbortsOnAnError) {
  ScriptedDriver d;
  d.script = {Answer::in_progress, Answer::remote_error};
  CollectiveControl control(d, quick());
  control.close();
  EXPECT_EQ(d.seen(), (Calls{"finalize", "status", "status", "abort"}));
}

TEST(CollectiveControl, CloseAfterAnAbortLeavesTheCommunicatorAlone) {
  ScriptedDriver d;
  CollectiveControl control(d, quick());
  control.abort();
  control.abort();
  control.close();
  EXPECT_EQ(d.seen(), (Calls{"abort"}));
}

}  // namespace
}  // namespace brigade::transport::detail
