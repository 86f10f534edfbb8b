#pragma once

#include <chrono>
#include <memory>
#include <optional>

#include "actors/detail/spec.h"
#include "actors/stats.h"

namespace brigade::actors::detail {

/// Runs a PipelineSpec on CAF: the untyped core behind Pipeline<T>.
///
/// Each run (epoch) spawns a source actor, per stage a coordinator and `concurrency`
/// workers, and a sink actor, all in an actor system owned by the engine; the run
/// ends when the consumer has taken the last item (or on stop/failure), and every
/// actor of the run has terminated before the next run starts.
///
/// Thread safety: `next` is for one consumer thread at a time; `stop` and `stats` may
/// be called from any thread, also while another thread waits in `next`.
class Engine {
 public:
  Engine(PipelineSpec spec, BuildOptions options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  void start(CommitState resume = {});  // no-op while a run is active
  CommitState committed() const;        // of the current (or last) run
  void stop();  // cancels queued work, waits for running tasks, joins all actors
  bool running() const;
  /// Replaces the pipeline's failure budget from the next run on. Between runs only
  /// (throws std::logic_error while a run is active).
  void set_failure_budget(FailureBudget budget);

  /// Takes the next item. Throws PipelineFailure once when the run failed (after the
  /// items already in the sink buffer); returns `end` when the epoch is over.
  NextStatus next(Item& out, std::optional<std::chrono::nanoseconds> timeout);

  PipelineStats stats() const;
  std::size_t item_bound() const;  // see Pipeline::item_bound()

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace brigade::actors::detail
