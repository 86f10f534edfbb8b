#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

#include "actors/detail/ring.h"
#include "actors/detail/run.h"

namespace brigade::actors::detail {
namespace {

// A retry's backoff waits in real time (the statistics' clock may be a test's, held still).
using RealClock = std::chrono::steady_clock;

// Dispatch granularity follows the measured task time: cheap tasks go to a cpu worker
// in chunks so that messaging does not dominate; slow tasks go one at a time so that a
// free worker always takes the next item (load balance beats message count there).
// io tasks always go one at a time (see dispatch()).
constexpr double kCheapTaskNs = 20'000;
constexpr double kMediumTaskNs = 200'000;
constexpr std::size_t kMaxChunk = 64;
// Tasks cheaper than this run on the coordinator itself (cpu stages): a hop to a worker
// and back is two messages, two actor resumptions and two allocations (~2 µs of CPU
// for a chunk), more than a chunk of such tasks costs to run. Nothing is lost in
// parallelism below it: the stage then handles well over 1 M items/s, more than the
// consumer thread can take.
constexpr double kInlineTaskNs = 500;

void call_hooks_before(const RunShared& run, const TaskInfo& info) {
  for (const auto& hook : run.options.hooks) {
    try {
      hook->before_task(info);
    } catch (const std::exception& e) {
      spdlog::warn("brigade: task hook threw in stage '{}': {}", info.stage, e.what());
    }
  }
}

void call_hooks_after(const RunShared& run, const TaskInfo& info, const Result& r) {
  for (const auto& hook : run.options.hooks) {
    try {
      hook->after_task(info, std::chrono::nanoseconds(r.ns), r.outcome, r.error);
    } catch (const std::exception& e) {
      spdlog::warn("brigade: task hook threw in stage '{}': {}", info.stage, e.what());
    }
  }
}

// Sleeps in short slices so that a stop is not delayed by a long backoff.
void backoff_sleep(const RunShared& run, std::chrono::duration<double, std::milli> total) {
  const auto until = RealClock::now() + std::chrono::duration_cast<RealClock::duration>(total);
  while (!run.stopping.load(std::memory_order_relaxed) && RealClock::now() < until) {
    std::this_thread::sleep_for(
        std::min<RealClock::duration>(until - RealClock::now(), std::chrono::milliseconds(10)));
  }
}

// The first output of a map takes the input's positions (moved: Result::positions is
// not read again when there is exactly one output).
void assign_output_positions(StageKind kind, Result& r, std::vector<AnyValue>& outs) {
  if (outs.size() == 1) {
    r.outputs.push_back(Item{std::move(outs[0]), std::move(r.positions)});
    return;
  }
  r.outputs.reserve(outs.size());
  const bool split = kind == StageKind::disaggregate && outs.size() == r.positions.size();
  for (std::size_t i = 0; i < outs.size(); ++i) {
    Positions p = split ? Positions(r.positions[i]) : r.positions;
    r.outputs.push_back(Item{std::move(outs[i]), std::move(p)});
  }
}

bool retryable(const StageSpec& spec, const std::exception& error) {
  const auto& policy = spec.options.retry;
  return policy.retryable ? policy.retryable(error) : is_transient(error_code_of(error));
}

}  // namespace

// Runs one task: the stage function with a TaskContext, retries, hooks, timing.
struct TaskRunner {
  // Fills `r` (default-constructed). `outs` is the caller's scratch, reused across tasks
  // (one allocation per batch). `t0` is when the task started: the caller's previous
  // clock reading, the end of the task before it in the batch (so a batch of n tasks
  // reads the clock n + 1 times, not 2n); returns the clock's reading at its end. A
  // task's time thus includes its share of the batch's bookkeeping (tens of ns).
  static Clock::time_point run(const RunShared& run, const StageSpec& spec, Task&& task,
                               std::vector<AnyValue>& outs, Result& r, Clock::time_point t0) {
    r.seq = task.seq;
    r.positions = std::move(task.item.positions);
    const TaskInfo info{spec.options.name, r.positions};
    if (!run.options.hooks.empty()) {
      call_hooks_before(run, info);
      t0 = run.clock.now();  // a hook's time is not the task's
    }
    const int attempts = std::max(1, spec.options.retry.attempts);
    std::chrono::duration<double, std::milli> backoff = spec.options.retry.backoff;
    for (int attempt = 1;; ++attempt) {
      bool again = false;
      try {
        outs.clear();
        if (attempt > 1) {  // `r` is fresh for the first
          r.sample_failures.clear();
          r.threw = false;
          r.error.clear();
          r.code.clear();
        }
        const bool may_retry = attempt < attempts && !run.stopping.load(std::memory_order_relaxed);
        TaskContext context(r.positions, run.task_stop, r.sample_failures, may_retry);
        spec.fn(task.item.value, outs, attempt < attempts, context);
        break;
      } catch (const std::exception& e) {
        r.error = e.what();
        r.code = error_code_of(e);
        again = retryable(spec, e);
      } catch (...) {
        r.error = "unknown exception (not derived from std::exception)";
        r.code.clear();
      }
      r.threw = true;
      if (!again || attempt >= attempts || run.stopping.load(std::memory_order_relaxed)) {
        outs.clear();  // a generator that threw midway delivers nothing of its input
        r.sample_failures.clear();
        break;
      }
      ++r.retries;
      backoff_sleep(run, backoff);
      backoff *= spec.options.retry.multiplier;
    }
    const auto t1 = run.clock.now();
    r.ns = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
    if (r.threw) {
      r.outcome = TaskOutcome::failed;
    } else if (!r.sample_failures.empty()) {
      r.outcome = TaskOutcome::failed;
      r.error = r.sample_failures.front().message();
    } else {
      r.outcome = outs.empty() ? TaskOutcome::filtered : TaskOutcome::ok;
    }
    if (!run.options.hooks.empty()) call_hooks_after(run, info, r);
    assign_output_positions(spec.kind, r, outs);
    return t1;
  }
};

namespace {

struct WorkerState {
  WorkerState() = default;
  static inline const char* name = "brigade.worker";
};

worker_actor::behavior_type worker_main(worker_actor::stateful_pointer<WorkerState> self,
                                        std::shared_ptr<RunShared> run, int stage, int index,
                                        stage_actor coordinator) {
  return {
      [=](work_atom, TaskBatch& batch) {
        const StageSpec& spec = run->spec.stages[stage];
        auto results = std::make_shared<std::vector<Result>>();
        results->reserve(batch.tasks->size());
        std::vector<AnyValue> outs;
        auto t = run->clock.now();
        for (auto& task : *batch.tasks) {
          if (run->stopping.load(std::memory_order_relaxed)) return;  // cancelled
          t = TaskRunner::run(*run, spec, std::move(task), outs, results->emplace_back(), t);
        }
        self->send(coordinator, done_atom::value, ResultBatch{std::move(results), index});
      },
      [=](stop_atom) { self->quit(); },
  };
}

struct OutItem {
  Item item;
  int weight = 0;  // input units this output accounts for in `held`
};

// A slot of the input-order window: the outputs of the task with that sequence number,
// once it has finished.
struct Pending {
  bool done = false;
  Outputs outputs;
};

/// A stage's coordinator. It owns the stage's queue, order and credit:
/// `held` counts every item the stage holds (queued, at a worker, finished and waiting
/// for order or credit, accumulating in an aggregate), in the stage's input units,
/// and upstream is granted credit only while held + granted < capacity.
struct StageState {
  StageState() = default;  // not an aggregate: CAF probes State(self)
  static inline const char* name = "brigade.stage";

  std::shared_ptr<RunShared> run;
  const StageSpec* spec = nullptr;
  StageCounters* counters = nullptr;
  std::size_t index = 0;  // of the stage in the pipeline
  upstream_actor upstream;
  downstream_actor downstream;
  std::vector<worker_actor> workers;
  std::vector<std::size_t> load;  // tasks given to each worker, not yet answered
  Ring<Task> queue;
  Ring<Pending> reorder;  // input order: outputs by seq - next_emit
  std::uint64_t next_seq = 0;
  Ring<OutItem> out;
  std::unique_ptr<ErasedAggregator> aggregator;
  Positions accumulated;
  int accumulated_count = 0;
  int capacity = 0;
  int held = 0;
  std::size_t in_flight = 0;
  std::uint32_t granted = 0;
  std::uint32_t credit = 0;
  std::uint64_t tasks = 0;
  std::uint64_t failures = 0;
  double ewma_ns = -1;
  std::vector<std::uint64_t> task_ns;        // scratch: the times of a batch of results
  std::vector<Result> results;               // scratch: a chunk of tasks run inline
  std::vector<AnyValue> outs;                // scratch: a task's outputs, run inline
  std::shared_ptr<std::vector<Item>> spare;  // an emptied batch of upstream's, reused by forward()
  bool upstream_done = false;
  bool flushed = false;
  bool finished = false;
};

using StagePtr = stage_actor::stateful_pointer<StageState>;

void push_out(StageState& st, Item&& item, int weight) {
  OutItem& out = st.out.emplace_back();
  out.item = std::move(item);
  out.weight = weight;
}

void quit_stage(StagePtr self) {
  auto& st = self->state;
  for (auto& w : st.workers) self->send(w, stop_atom::value);
  st.finished = true;
  self->quit();
}

void record_failure(StagePtr self, SampleFailure record) {
  auto& st = self->state;
  ++st.failures;
  st.run->total_failures.fetch_add(1, std::memory_order_relaxed);
  st.run->lifetime->failures.fetch_add(1, std::memory_order_relaxed);
  st.run->lifetime->stage_failures[st.index].fetch_add(1, std::memory_order_relaxed);
  record.stage = st.spec->options.name;
  st.run->record_failure(std::move(record));
}

// Counted once per batch of results, not per task: these counters are shared with
// the other stages' coordinators (and the stats reader), and a no-op task costs less
// than an atomic add on a contended cache line.
void count_tasks(StagePtr self, std::uint64_t n) {
  auto& st = self->state;
  st.tasks += n;
  st.run->total_tasks.fetch_add(n, std::memory_order_relaxed);
  st.run->lifetime->tasks.fetch_add(n, std::memory_order_relaxed);
  st.run->lifetime->stage_tasks[st.index].fetch_add(n, std::memory_order_relaxed);
}

// Budgets are judged on the pipeline's lifetime counts (every run of it).
void check_budgets(StagePtr self) {
  auto& st = self->state;
  const auto& own = st.spec->options.max_failures;
  const auto& global = st.run->options.max_failures;
  const auto& life = *st.run->lifetime;
  const auto stage_failures = life.stage_failures[st.index].load();
  const auto stage_tasks = life.stage_tasks[st.index].load();
  if (own.exceeded(stage_failures, stage_tasks)) {
    st.run->fail("stage '" + st.spec->options.name + "' exceeded its failure budget (" +
                 own.describe() + "): " + std::to_string(stage_failures) + " failures in " +
                 std::to_string(stage_tasks) + " tasks");
  } else if (global.exceeded(life.failures.load(), life.tasks.load())) {
    st.run->fail("the pipeline exceeded its failure budget (" + global.describe() +
                 "): " + std::to_string(life.failures.load()) + " failures in " +
                 std::to_string(life.tasks.load()) + " tasks");
  }
}

void emit_aggregate(StagePtr self, AnyValue&& value) {
  auto& st = self->state;
  const bool fixed = st.spec->aggregate_size > 0;
  const int weight = fixed ? st.accumulated_count : 1;
  if (!fixed) st.held += 1;
  push_out(st, Item{std::move(value), std::move(st.accumulated)}, weight);
  st.accumulated.clear();
  st.accumulated_count = 0;
}

void accumulate(StagePtr self, Item&& item) {
  auto& st = self->state;
  const auto t0 = st.run->clock.now();
  const bool fixed = st.spec->aggregate_size > 0;
  count_tasks(self, 1);
  try {
    auto batch = st.aggregator->accumulate(std::move(item.value));
    st.accumulated.append(item.positions);
    ++st.accumulated_count;
    if (!fixed) st.held -= 1;  // a custom aggregator bounds what it keeps itself
    if (batch) emit_aggregate(self, std::move(*batch));
    st.counters->record_task(static_cast<std::uint64_t>((st.run->clock.now() - t0).count()),
                             TaskOutcome::ok, 0, 0);
  } catch (const std::exception& e) {
    st.held -= 1;
    st.counters->record_task(0, TaskOutcome::failed, 0, 1);
    st.run->commits.commit(item.positions);
    record_failure(
        self,
        SampleFailure{.positions = item.positions, .code = error_code_of(e), .cause = e.what()});
    check_budgets(self);
  }
}

void flush_aggregate(StagePtr self) {
  auto& st = self->state;
  st.flushed = true;
  const bool fixed = st.spec->aggregate_size > 0;
  try {
    auto batch = st.aggregator->flush();
    if (batch) {
      emit_aggregate(self, std::move(*batch));
      return;
    }
    st.counters->record_filtered(static_cast<std::uint64_t>(st.accumulated_count));
  } catch (const std::exception& e) {
    record_failure(self, SampleFailure{.positions = st.accumulated,
                                       .code = error_code_of(e),
                                       .cause = std::string("aggregate flush: ") + e.what()});
  }
  st.run->commits.commit(st.accumulated);
  if (fixed) st.held -= st.accumulated_count;
  st.accumulated.clear();
  st.accumulated_count = 0;
}

// Keeps an emptied batch's vector for the next forward(), unless another copy of the
// message still shares it: one allocation less per message (the vector, its buffer).
void keep_spare(StagePtr self, ItemBatch& batch) {
  auto& st = self->state;
  if (st.spare || batch.items.use_count() != 1) return;
  batch.items->clear();
  st.spare = std::move(batch.items);
}

void accept(StagePtr self, ItemBatch& batch) {
  auto& st = self->state;
  const auto n = static_cast<std::uint32_t>(batch.items->size());
  st.granted -= std::min(st.granted, n);
  st.held += static_cast<int>(n);
  if (st.spec->kind == StageKind::aggregate) {
    for (auto& item : *batch.items) accumulate(self, std::move(item));
    keep_spare(self, batch);
    return;
  }
  const bool ordered = st.spec->options.output_order == Order::input;
  for (auto& item : *batch.items) {
    Task& task = st.queue.emplace_back();
    task.seq = st.next_seq++;
    task.item = std::move(item);
    if (ordered) st.reorder.emplace_back();
  }
  keep_spare(self, batch);
}

void take_result(StagePtr self, Result&& r) {
  auto& st = self->state;
  if (r.threw) {
    spdlog::warn("brigade: stage '{}' failed on source position {}: {}", st.spec->options.name,
                 r.positions.empty() ? 0 : r.positions.front(), r.error);
    record_failure(self, SampleFailure{.positions = r.positions, .code = r.code, .cause = r.error});
  }
  for (auto& f : r.sample_failures) {
    spdlog::warn("brigade: stage '{}' failed on source position {}: {}", st.spec->options.name,
                 f.positions.front(), f.message());
    record_failure(self, std::move(f));
  }
  if (r.outputs.empty()) {
    st.run->commits.commit(r.positions);  // filtered or failed: committed here
  } else if (r.outputs.size() > 1 && !(st.spec->kind == StageKind::disaggregate &&
                                       r.outputs.size() == r.positions.size())) {
    st.run->commits.split(r.positions, r.outputs.size());
  }
  st.held += static_cast<int>(r.outputs.size()) - 1;
  if (st.spec->options.output_order == Order::input) {
    const std::uint64_t front = st.next_seq - st.reorder.size();  // the oldest unfinished
    if (r.seq != front) {  // waits in its slot for those before it
      Pending& slot = st.reorder[r.seq - front];
      slot.outputs = std::move(r.outputs);
      slot.done = true;
      return;
    }
    st.reorder.pop_front();  // next in order: out at once (take_results drains the rest)
  }
  r.outputs.drain([&](Item&& item) { push_out(st, std::move(item), 1); });
}

// Books a chunk of finished tasks, run by a worker or inline: statistics, the task-time
// estimate, failures, commits, order.
void take_results(StagePtr self, std::vector<Result>& results) {
  auto& st = self->state;
  const auto n = results.size();
  std::uint64_t filtered = 0, retries = 0, failures = 0;
  st.task_ns.clear();
  for (const auto& r : results) {
    st.task_ns.push_back(r.ns);
    filtered += r.outcome == TaskOutcome::filtered ? 1 : 0;
    retries += static_cast<std::uint64_t>(r.retries);
    failures += r.threw ? 1 : static_cast<std::uint64_t>(r.sample_failures.size());
    st.ewma_ns = st.ewma_ns < 0 ? static_cast<double>(r.ns) : 0.9 * st.ewma_ns + 0.1 * r.ns;
  }
  count_tasks(self, n);
  st.counters->record_tasks(st.task_ns, filtered, retries, failures);
  for (auto& r : results) take_result(self, std::move(r));
  while (!st.reorder.empty() && st.reorder.front().done) {
    st.reorder.front().outputs.drain([&](Item&& item) { push_out(st, std::move(item), 1); });
    st.reorder.pop_front();
  }
  check_budgets(self);
}

void on_results(StagePtr self, ResultBatch& batch) {
  auto& st = self->state;
  const auto n = batch.results->size();
  st.load[batch.worker] -= n;
  st.in_flight -= n;
  take_results(self, *batch.results);
}

// Whether the stage's tasks are cheap enough to run on the coordinator (kInlineTaskNs).
// io tasks never are: they may block, and the coordinator shares a scheduler thread.
// Not while a worker runs some (the stage's concurrency would be exceeded by one).
bool runs_inline(const StageState& st) {
  return st.spec->options.executor == Executor::cpu && st.in_flight == 0 && st.ewma_ns >= 0 &&
         st.ewma_ns < kInlineTaskNs;
}

// Runs a chunk of queued tasks on the coordinator, one at a time and with no worker
// busy (runs_inline), and books their results.
void run_inline(StagePtr self) {
  auto& st = self->state;
  const std::size_t chunk = std::min(st.queue.size(), kMaxChunk);
  st.results.clear();
  st.results.reserve(chunk);
  auto t = st.run->clock.now();
  for (std::size_t i = 0; i < chunk; ++i) {
    t = TaskRunner::run(*st.run, *st.spec, std::move(st.queue.front()), st.outs,
                        st.results.emplace_back(), t);
    st.queue.pop_front();
  }
  take_results(self, st.results);
  st.results.clear();
}

void dispatch(StagePtr self) {
  auto& st = self->state;
  while (!st.queue.empty()) {
    if (runs_inline(st)) {
      if (st.run->stopping.load(std::memory_order_relaxed)) return;  // cancelled
      run_inline(self);
      continue;
    }
    const auto idle = static_cast<std::size_t>(std::count(st.load.begin(), st.load.end(), 0));
    if (idle == 0) return;
    const auto w =
        static_cast<std::size_t>(std::find(st.load.begin(), st.load.end(), 0) - st.load.begin());
    // io stages get one task at a time: a task that blocks (a hung read) must not hold
    // the finished results of the tasks chunked with it.
    std::size_t chunk = 1;
    if (st.spec->options.executor == Executor::io) {
      chunk = 1;
    } else if (st.ewma_ns >= 0 && st.ewma_ns < kCheapTaskNs) {
      chunk = std::min(st.queue.size(), kMaxChunk);
    } else if (st.ewma_ns >= 0 && st.ewma_ns < kMediumTaskNs) {
      chunk = (st.queue.size() + idle - 1) / idle;
    }
    auto tasks = std::make_shared<std::vector<Task>>();
    tasks->reserve(chunk);
    for (std::size_t i = 0; i < chunk; ++i) {
      tasks->push_back(std::move(st.queue.front()));
      st.queue.pop_front();
    }
    st.load[w] += chunk;
    st.in_flight += chunk;
    self->send(st.workers[w], work_atom::value, TaskBatch{std::move(tasks)});
  }
}

void forward(StagePtr self) {
  auto& st = self->state;
  const std::size_t n = std::min<std::size_t>(st.credit, st.out.size());
  if (n == 0) return;
  auto items = st.spare ? std::move(st.spare) : std::make_shared<std::vector<Item>>();
  items->reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    st.held -= st.out.front().weight;
    items->push_back(std::move(st.out.front().item));
    st.out.pop_front();
  }
  st.credit -= static_cast<std::uint32_t>(n);
  st.counters->record_outputs(n);
  self->send(st.downstream, items_atom::value, ItemBatch{std::move(items)});
}

void maybe_finish(StagePtr self) {
  auto& st = self->state;
  if (!st.upstream_done || st.finished) return;
  if (!st.queue.empty() || st.in_flight > 0 || !st.reorder.empty()) return;
  if (st.aggregator && !st.flushed) {
    flush_aggregate(self);
    forward(self);
  }
  if (!st.out.empty()) return;
  self->send(st.downstream, end_atom::value);
  quit_stage(self);
}

void grant(StagePtr self) {
  auto& st = self->state;
  if (!st.upstream || st.upstream_done || st.finished) return;
  const int free = st.capacity - st.held - static_cast<int>(st.granted);
  if (free <= 0 || free < std::max(1, st.capacity / 4)) return;
  st.granted += static_cast<std::uint32_t>(free);
  self->send(st.upstream, demand_atom::value, static_cast<std::uint32_t>(free));
}

void pump(StagePtr self) {
  auto& st = self->state;
  if (st.finished) return;
  dispatch(self);
  forward(self);
  maybe_finish(self);
  if (st.finished) return;
  grant(self);
  const bool starved = !st.upstream_done && st.queue.empty() && st.in_flight < st.workers.size();
  const bool backpressured = !st.out.empty() && st.credit == 0;
  st.counters->advance(st.held, starved, backpressured);
}

stage_actor::behavior_type stage_main(StagePtr self, std::shared_ptr<RunShared> run, int index,
                                      downstream_actor downstream) {
  auto& st = self->state;
  st.run = run;
  st.spec = &run->spec.stages[index];
  st.counters = run->counters[index].get();
  st.index = static_cast<std::size_t>(index);
  st.downstream = std::move(downstream);
  st.capacity = st.spec->capacity();
  if (st.spec->kind == StageKind::aggregate) {
    st.aggregator = st.spec->make_aggregator();
  } else {
    const stage_actor me = self;
    for (int w = 0; w < st.spec->options.concurrency; ++w) {
      worker_actor worker = st.spec->options.executor == Executor::io
                                ? self->spawn<caf::detached>(worker_main, run, index, w, me)
                                : self->spawn(worker_main, run, index, w, me);
      run->add_actor(caf::actor_cast<caf::actor>(worker));
      st.workers.push_back(std::move(worker));
      st.load.push_back(0);
    }
  }
  auto live = [self] {
    if (!self->state.run->stopping.load(std::memory_order_relaxed)) return true;
    quit_stage(self);
    return false;
  };
  return {
      [=](connect_atom, upstream_actor up) {
        self->state.upstream = std::move(up);
        if (live()) pump(self);
      },
      [=](items_atom, ItemBatch& batch) {
        if (!live()) return;
        accept(self, batch);
        pump(self);
      },
      [=](done_atom, ResultBatch& batch) {
        if (!live()) return;
        on_results(self, batch);
        pump(self);
      },
      [=](demand_atom, std::uint32_t n) {
        if (!live()) return;
        self->state.credit += n;
        pump(self);
      },
      [=](end_atom) {
        if (!live()) return;
        self->state.upstream_done = true;
        pump(self);
      },
      [=](stop_atom) { quit_stage(self); },
  };
}

}  // namespace

stage_actor spawn_stage(caf::actor_system& system, std::shared_ptr<RunShared> run, int index,
                        downstream_actor downstream) {
  return system.spawn(stage_main, std::move(run), index, std::move(downstream));
}

}  // namespace brigade::actors::detail
