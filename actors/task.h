#pragma once

// What a stage function may learn about, and report on, the task it runs.

#include <cstdint>
#include <exception>
#include <stop_token>
#include <string>
#include <system_error>
#include <vector>

#include "actors/errors.h"
#include "actors/positions.h"

namespace brigade::actors {

namespace detail {
struct TaskRunner;
}

/// Handed to a stage function that takes it as its last parameter:
///
///   .pipe([](Batch b, TaskContext& task) { ...; task.fail(position, error); return b; })
///   .generate([](T in, Emitter<U>& emit, TaskContext& task) { ... })
///
/// STOPPING. stop_token() is requested as soon as the run stops (Pipeline::stop(), a
/// failure budget exceeded, the pipeline destroyed). stop() waits for running tasks,
/// so a function that waits on something outside the process (a remote worker, a
/// device, another process's lock) must also wait on this token — e.g.
/// std::condition_variable_any::wait(lock, token, pred), or a std::stop_callback that
/// wakes it — and return or throw promptly once it is requested. What it returns then
/// is discarded.
///
/// FAILED SAMPLES. fail() reports that one sample of the task's input failed while the
/// task goes on: its output still flows downstream (a batch delivered without that
/// sample, an item marked as failed for a later stage to skip). The engine keeps one
/// set of books for these and for thrown errors: the stage's and the pipeline's
/// failure counts and budgets, the failure log and PipelineFailure's recent causes,
/// the statistics, and the task hooks (after_task sees TaskOutcome::failed and the
/// first message). The position stays with its item and is committed when the item
/// is (delivered, filtered, or failed downstream), so a checkpoint never replays it.
/// A position reported twice in one task counts once.
///
/// THREADING. Valid during the call only, on the thread that runs the task.
class TaskContext {
 public:
  TaskContext(const TaskContext&) = delete;
  TaskContext& operator=(const TaskContext&) = delete;

  /// The source positions of the task's input item.
  const Positions& positions() const { return positions_; }
  std::stop_token stop_token() const { return stop_; }
  bool stop_requested() const { return stop_.stop_requested(); }

  /// Reports the failure of the sample at source `position` (one of positions()):
  /// `failure` names the sample (id, path), its typed code and cause; the engine sets
  /// its stage and positions.
  void fail(std::uint64_t position, SampleFailure failure);
  /// The same for a sample the stage cannot name: `cause` and `code` only.
  void fail(std::uint64_t position, std::string cause, std::error_code code = {});
  /// The same with the message and code of `error` (std::system_error carries a code).
  void fail(std::uint64_t position, const std::exception& error);
  /// Whether the engine runs this task again if the function throws a retryable
  /// error now (an io stage's RetryPolicy with attempts left, see actors/options.h). A
  /// function that reports a transient error through fail() may throw it instead
  /// while this is true, and report it as the sample's failure on the last attempt.
  bool may_retry() const { return may_retry_; }

 private:
  friend struct detail::TaskRunner;
  // `stop` outlives the context (the run's token): copying a std::stop_token per task
  // is two atomic operations on a count every worker shares.
  TaskContext(const Positions& positions, const std::stop_token& stop,
              std::vector<SampleFailure>& failures, bool may_retry = false)
      : positions_(positions), stop_(stop), failures_(failures), may_retry_(may_retry) {}

  const Positions& positions_;
  const std::stop_token& stop_;
  std::vector<SampleFailure>& failures_;
  bool may_retry_;
};

/// The std::error_code an exception carries: its code() if it is a std::system_error
/// (media::MediaError is one), else empty.
std::error_code error_code_of(const std::exception& error);

}  // namespace brigade::actors
