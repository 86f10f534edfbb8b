#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/clock.h"

namespace caf {
class actor_system_config;
}

namespace brigade::actors {

class TaskHook;
struct PipelineStats;

/// What a consumer's request for the next item found.
enum class NextStatus {
  item,     // an item was delivered
  timeout,  // none arrived within the timeout; the run goes on
  end,      // the epoch is over (or the pipeline was stopped)
};

/// Order in which a stage emits its results.
/// Brigade defaults to `input` (deterministic, resumable in sequence); SPDL defaults
/// to completion.
enum class Order {
  input,       // results leave in the order their inputs arrived
  completion,  // results leave as soon as they are done
};

/// Where a stage's function runs.
enum class Executor {
  cpu,  // on CAF's scheduler threads (BuildOptions::num_threads), shared by all cpu stages
  io,   // one dedicated thread per worker, so a blocking read never occupies a cpu thread
};

/// How many failures a stage (or the whole pipeline) tolerates before it fails.
/// Default: unlimited (every failure is still counted, logged and reported).
/// `FailureBudget{5}` tolerates 5 failures and fails on the 6th (SPDL's meaning);
/// `FailureBudget::rate(0.1, min_tasks)` fails once more than 10% of tasks have
/// failed, judged only after `min_tasks` tasks (SPDL fixes 100; here the caller
/// chooses, and 0 judges the rate from the first task on).
/// A failure is a task whose function threw, or a sample reported failed through
/// TaskContext::fail (each counts one). Budgets count over the pipeline's whole life:
/// every run (epoch) of one Pipeline adds to the same counts, whatever the stages'
/// output order — a job's budget, not an epoch's.
class FailureBudget {
 public:
  FailureBudget() = default;
  FailureBudget(std::int64_t max_count) : max_count_(max_count) {}  // NOLINT: implicit
  static FailureBudget rate(double max_rate, std::uint64_t min_tasks = 100);
  static FailureBudget unlimited() { return {}; }

  bool is_unlimited() const { return max_count_ < 0 && max_rate_ < 0; }
  /// A rate budget's rate (0.05 for 5%); negative for a count or unlimited.
  double max_rate() const { return max_rate_; }
  bool exceeded(std::uint64_t failures, std::uint64_t tasks) const;
  std::string describe() const;

 private:
  std::int64_t max_count_ = -1;
  double max_rate_ = -1;
  std::uint64_t min_tasks_ = 0;
};

/// Retry policy of an io stage: a task that throws a retryable error is run again up
/// to `attempts` times in all, sleeping `backoff`, then `backoff * multiplier`, …
/// between tries. Retryable: `retryable(error)` when set, else the error's code is
/// transient (is_transient(error_code_of(error)): a timeout, EAGAIN, a reset
/// connection) — a corrupt file is read once, not `attempts` times. The default (one
/// attempt) never retries. Only io stages may retry (their backoff sleeps on a
/// dedicated thread); build() rejects a retry policy on a cpu stage. A stop cuts the
/// backoff short.
struct RetryPolicy {
  int attempts = 1;
  std::chrono::milliseconds backoff{0};
  double multiplier = 2.0;
  std::function<bool(const std::exception&)> retryable{};
};

/// Options of `pipe()`. Members are declared in this order so that C++20 designated
/// initializers can name any subset in order: `{.concurrency = 4, .name = "decode"}`.
struct StageOptions {
  int concurrency = 1;                // tasks of this stage running at once
  Order output_order = Order::input;  // see Order
  Executor executor = Executor::cpu;  // see Executor
  std::string name{};                 // default: "<kind>_<index>", e.g. "pipe_1"
  FailureBudget max_failures{};       // this stage's own budget
  RetryPolicy retry{};                // io stages only
  int queue_capacity = 0;             // items queued beyond the running ones; 0 = 2 × concurrency
};

/// Options of `aggregate(n)`.
struct AggregateOptions {
  bool drop_last = false;  // drop a final partial batch (its items count as filtered)
  std::string name{};      // default "aggregate_<index>"
};

/// Options of `build()`.
struct BuildOptions {
  int num_threads = 0;                          // CAF scheduler threads for cpu stages; 0 = cores
  FailureBudget max_failures{};                 // budget over all stages together
  std::chrono::milliseconds stats_interval{0};  // > 0: call on_stats at this interval
  std::function<void(const PipelineStats&)> on_stats{};  // called on a thread of its own
  std::vector<std::shared_ptr<TaskHook>> hooks{};        // called around every task
  bool log_stats_at_end = true;                          // log the statistics table when a run ends
  /// Adjusts the engine's CAF actor system before it starts (scheduler policy,
  /// logging, …), after the engine's own settings (scheduler.max-threads from
  /// num_threads, the work-stealing policy). Called once, in build().
  std::function<void(caf::actor_system_config&)> configure_system{};
  /// The time source of the statistics (Clock); null: std::chrono::steady_clock.
  std::shared_ptr<const Clock> clock{};
};

}  // namespace brigade::actors
