#pragma once

#include <chrono>
#include <string_view>

#include "actors/positions.h"

namespace brigade::actors {

enum class TaskOutcome { ok, filtered, failed };

/// What a hook learns about one task.
struct TaskInfo {
  std::string_view stage;      // the stage's name
  const Positions& positions;  // the source positions of the task's input item
};

/// User measurements around every task (SPDL's TaskHook, without async contexts).
///
/// Contract: `before_task` and `after_task` are called once each per task, on the
/// thread that runs the task, before and after the stage function (a retried task is
/// one task; aggregation in the stage's coordinator is not a task). Calls for
/// different tasks run concurrently from many threads: implementations must be
/// thread-safe and quick. A hook must not throw; an exception from a hook is logged
/// and ignored.
class TaskHook {
 public:
  virtual ~TaskHook() = default;
  virtual void before_task(const TaskInfo& /*task*/) {}
  virtual void after_task(const TaskInfo& /*task*/, std::chrono::nanoseconds /*duration*/,
                          TaskOutcome /*outcome*/, std::string_view /*error*/) {}
};

}  // namespace brigade::actors
