#pragma once

// CAF-facing internals of one pipeline run: message types, actor interfaces and the
// state shared by the run's actors. Included only by the engine's .cc files.

#include <atomic>
#include <caf/all.hpp>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "actors/detail/commit_tracker.h"
#include "actors/detail/handoff_queue.h"
#include "actors/detail/spec.h"
#include "actors/detail/stage_counters.h"
#include "actors/errors.h"
#include "actors/options.h"

namespace brigade::actors::detail {

// -- messages (in-process only: payloads are moved, never serialized) ---------------

struct Task {
  std::uint64_t seq = 0;  // arrival order within the stage
  Item item;
};

// A task's outputs: the first inline, the rest (a generator's) on the heap, so that
// a map's result costs no allocation of its own.
class Outputs {
 public:
  std::size_t size() const { return first_ ? 1 + rest_.size() : 0; }
  bool empty() const { return !first_; }
  void push_back(Item&& item) {
    if (!first_) {
      first_.emplace(std::move(item));
    } else {
      rest_.push_back(std::move(item));
    }
  }
  void reserve(std::size_t n) {
    if (n > 1) rest_.reserve(n - 1);
  }
  // Calls f(Item&&) for each output in order; the outputs are moved from.
  template <typename F>
  void drain(F&& f) {
    if (!first_) return;
    f(std::move(*first_));
    for (auto& item : rest_) f(std::move(item));
  }

 private:
  std::optional<Item> first_;
  std::vector<Item> rest_;
};

struct Result {
  std::uint64_t seq = 0;
  Positions positions;  // of the task's input; moved to the output if it is the only one
  Outputs outputs;      // empty: filtered or failed
  TaskOutcome outcome = TaskOutcome::ok;
  bool threw = false;  // the function threw: the whole input failed (`error`, `code`)
  std::uint64_t ns = 0;
  int retries = 0;
  std::string error;
  std::error_code code;
  std::vector<SampleFailure> sample_failures;  // TaskContext::fail, outputs go on
};

// CAF 0.17 messages must be copyable: each batch travels as one shared vector whose
// receiver moves the items out. One allocation per message, amortized over a batch.
struct ItemBatch {
  std::shared_ptr<std::vector<Item>> items;
};
struct TaskBatch {
  std::shared_ptr<std::vector<Task>> tasks;
};
struct ResultBatch {
  std::shared_ptr<std::vector<Result>> results;
  int worker = 0;
};

}  // namespace brigade::actors::detail

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(brigade::actors::detail::ItemBatch)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(brigade::actors::detail::TaskBatch)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(brigade::actors::detail::ResultBatch)

namespace brigade::actors::detail {

using demand_atom = caf::atom_constant<caf::atom("demand")>;
using items_atom = caf::atom_constant<caf::atom("items")>;
using end_atom = caf::atom_constant<caf::atom("end")>;
using stop_atom = caf::atom_constant<caf::atom("stop")>;
using work_atom = caf::atom_constant<caf::atom("work")>;
using done_atom = caf::atom_constant<caf::atom("done")>;
using wake_atom = caf::atom_constant<caf::atom("wake")>;
using connect_atom = caf::atom_constant<caf::atom("connect")>;
using tick_atom = caf::atom_constant<caf::atom("tick")>;

/// What a stage sees of its upstream: it grants credit (demand) and may be stopped.
using upstream_actor =
    caf::typed_actor<caf::reacts_to<demand_atom, std::uint32_t>, caf::reacts_to<stop_atom>>;

/// What a stage sees of its downstream: items within the credit it granted, then end.
using downstream_actor = caf::typed_actor<caf::reacts_to<items_atom, ItemBatch>,
                                          caf::reacts_to<end_atom>, caf::reacts_to<stop_atom>>;

using source_actor = upstream_actor;

/// A stage's coordinator: both ends of the credit protocol, plus its workers' results.
using stage_actor =
    caf::typed_actor<caf::reacts_to<demand_atom, std::uint32_t>, caf::reacts_to<stop_atom>,
                     caf::reacts_to<items_atom, ItemBatch>, caf::reacts_to<end_atom>,
                     caf::reacts_to<done_atom, ResultBatch>,
                     caf::reacts_to<connect_atom, upstream_actor>>;

/// A stage worker: runs tasks, answers `done` to its coordinator. Everything it needs
/// travels in the message, so a worker could live in another process.
using worker_actor =
    caf::typed_actor<caf::reacts_to<work_atom, TaskBatch>, caf::reacts_to<stop_atom>>;

/// The sink: fills the consumer's HandoffQueue; woken by the consumer for credit.
using sink_actor = caf::typed_actor<caf::reacts_to<items_atom, ItemBatch>, caf::reacts_to<end_atom>,
                                    caf::reacts_to<stop_atom>, caf::reacts_to<wake_atom>,
                                    caf::reacts_to<connect_atom, upstream_actor>>;

/// Failure-budget counts over a pipeline's whole life (all its runs); owned by the
/// engine, shared by its runs. Written by coordinators, read anywhere.
struct LifetimeCounts {
  explicit LifetimeCounts(std::size_t stages) : stage_tasks(stages), stage_failures(stages) {}
  std::atomic<std::uint64_t> tasks{0};
  std::atomic<std::uint64_t> failures{0};
  std::vector<std::atomic<std::uint64_t>> stage_tasks;
  std::vector<std::atomic<std::uint64_t>> stage_failures;
};

/// State shared by the actors of one run and the consumer thread.
class RunShared {
 public:
  RunShared(const PipelineSpec& spec, const BuildOptions& options, CommitState resume,
            std::shared_ptr<LifetimeCounts> lifetime);

  const PipelineSpec& spec;
  const BuildOptions& options;
  const Clock& clock;  // *options.clock, which the engine sets
  HandoffQueue queue;
  CommitTracker commits;
  std::vector<std::unique_ptr<StageCounters>> counters;  // one per stage
  std::atomic<bool> stopping{false};
  std::stop_source stop_source;  // requested with `stopping`: tasks see it (TaskContext)
  const std::stop_token task_stop = stop_source.get_token();  // the one tasks get
  std::shared_ptr<LifetimeCounts> lifetime;
  std::atomic<std::uint64_t> source_items{0};
  std::atomic<std::uint64_t> total_tasks{0};
  std::atomic<std::uint64_t> total_failures{0};
  Clock::time_point started = clock.now();

  void add_actor(const caf::actor& actor);
  /// Stops every actor of the run (they drop queued work and quit).
  void stop_all();
  void record_failure(SampleFailure record);
  std::vector<SampleFailure> recent_failures() const;
  /// Ends the run with a PipelineFailure for the consumer, then stops every actor.
  void fail(const std::string& reason);

 private:
  mutable std::mutex mutex_;
  std::vector<caf::actor> actors_;
  std::deque<SampleFailure> recent_;
};

// Spawn functions (stage.cc, endpoints.cc).
stage_actor spawn_stage(caf::actor_system& system, std::shared_ptr<RunShared> run, int index,
                        downstream_actor downstream);
source_actor spawn_source(caf::actor_system& system, std::shared_ptr<RunShared> run,
                          downstream_actor downstream);
sink_actor spawn_sink(caf::actor_system& system, std::shared_ptr<RunShared> run);
caf::actor spawn_stats_reporter(caf::actor_system& system, std::shared_ptr<RunShared> run,
                                std::function<PipelineStats()> snapshot);

}  // namespace brigade::actors::detail
