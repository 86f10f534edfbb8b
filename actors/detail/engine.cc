#include "actors/detail/engine.h"

#include <spdlog/spdlog.h>

#include <stdexcept>
#include <thread>

#include "actors/detail/run.h"

namespace brigade::actors::detail {

// Two locks: `lifecycle` serializes start/stop/end-of-run (and is held while waiting
// for a run's actors), `mutex` guards the members below for short reads, so that
// stats() and committed() never wait for a stop in progress.
struct Engine::Impl {
  PipelineSpec spec;
  BuildOptions options;
  caf::actor_system_config config;
  std::unique_ptr<caf::actor_system> system;
  std::shared_ptr<LifetimeCounts> lifetime;

  std::mutex lifecycle;
  mutable std::mutex mutex;  // guards the members below
  std::shared_ptr<RunShared> run;
  sink_actor sink;
  caf::actor reporter;
  bool active = false;

  Impl(PipelineSpec s, BuildOptions o) : spec(std::move(s)), options(std::move(o)) {
    if (!options.clock) options.clock = Clock::steady();
    int threads = options.num_threads > 0
                      ? options.num_threads
                      : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    config.set("scheduler.max-threads", threads);
    // CAF's work-stealing scheduler, with idle threads polling at least every 1 ms
    // (CAF's default backs off to 10 ms sleeps, which delays work sent to a second
    // worker). Measured on an idle 2-core machine (bench_engine): 364-383 k items/s
    // through 3 no-op stages at concurrency 4, against 224-237 k with the work-sharing
    // policy, whose shared queue wakes a sleeping thread (a futex round trip) for
    // nearly every message; a 200 µs stage scales 1.9x from concurrency 1 to 2 with
    // either, and the image pipeline of `brigade run` runs at the same rate with either.
    // (Measured while another process loaded a core, sharing had looked faster.)
    config.set("scheduler.policy", caf::atom("stealing"));
    config.set("work-stealing.relaxed-sleep-duration", caf::timespan{std::chrono::milliseconds(1)});
    if (options.configure_system) options.configure_system(config);
    system = std::make_unique<caf::actor_system>(config);
    lifetime = std::make_shared<LifetimeCounts>(spec.stages.size());
  }

  PipelineStats snapshot(const std::shared_ptr<RunShared>& r) const {
    PipelineStats s;
    if (!r) return s;
    for (const auto& c : r->counters) s.stages.push_back(c->snapshot());
    s.sink = r->queue.stats();
    s.source_items = r->source_items.load();
    s.failures = r->total_failures.load();
    s.elapsed_s = std::chrono::duration<double>(r->clock.now() - r->started).count();
    s.recent_failures = r->recent_failures();
    return s;
  }

  // With `lifecycle` held.
  void start_locked(CommitState resume = {}) {
    auto r = std::make_shared<RunShared>(spec, options, std::move(resume), lifetime);
    auto new_sink = spawn_sink(*system, r);
    r->add_actor(caf::actor_cast<caf::actor>(new_sink));
    downstream_actor down = new_sink;
    std::vector<stage_actor> stages(spec.stages.size());
    for (auto i = static_cast<int>(stages.size()) - 1; i >= 0; --i) {
      stages[i] = spawn_stage(*system, r, i, down);
      r->add_actor(caf::actor_cast<caf::actor>(stages[i]));
      down = stages[i];
    }
    const source_actor source = spawn_source(*system, r, down);
    r->add_actor(caf::actor_cast<caf::actor>(source));
    upstream_actor up = source;
    for (auto& stage : stages) {
      caf::anon_send(stage, connect_atom::value, up);
      up = stage;
    }
    caf::anon_send(new_sink, connect_atom::value, up);
    caf::actor new_reporter;
    if (options.stats_interval.count() > 0 && options.on_stats) {
      new_reporter = spawn_stats_reporter(*system, r, [this, r] { return snapshot(r); });
    }
    std::lock_guard lock(mutex);
    run = std::move(r);
    sink = std::move(new_sink);
    reporter = std::move(new_reporter);
    active = true;
  }

  // With `lifecycle` held: waits until every actor of the run has terminated.
  void join_locked(bool cancel) {
    std::shared_ptr<RunShared> r;
    caf::actor rep;
    {
      std::lock_guard lock(mutex);
      if (!active) return;
      r = run;
      rep = reporter;
    }
    if (cancel) {
      r->stopping = true;
      r->queue.close();
      r->stop_all();
    }
    if (rep) caf::anon_send(rep, stop_atom::value);
    system->await_all_actors_done();
    {
      std::lock_guard lock(mutex);
      reporter = nullptr;
      sink = nullptr;
      active = false;
    }
    if (options.log_stats_at_end) {
      spdlog::info("brigade: pipeline {}\n{}", cancel ? "stopped" : "finished",
                   format_stats_table(snapshot(r)));
    }
  }
};

Engine::Engine(PipelineSpec spec, BuildOptions options)
    : impl_(std::make_unique<Impl>(std::move(spec), std::move(options))) {}

Engine::~Engine() { stop(); }

void Engine::start(CommitState resume) {
  std::lock_guard lifecycle(impl_->lifecycle);
  if (!running()) impl_->start_locked(std::move(resume));
}

CommitState Engine::committed() const {
  std::shared_ptr<RunShared> run;
  {
    std::lock_guard lock(impl_->mutex);
    run = impl_->run;
  }
  return run ? run->commits.snapshot() : CommitState{};
}

void Engine::stop() {
  {
    // Ask a run in progress to stop at once, before waiting for the lifecycle lock
    // (a concurrent end-of-run join may hold it): its tasks see the stop token now.
    std::lock_guard lock(impl_->mutex);
    if (impl_->run && impl_->active) {
      impl_->run->stopping = true;
      impl_->run->stop_source.request_stop();
    }
  }
  std::lock_guard lifecycle(impl_->lifecycle);
  impl_->join_locked(/*cancel=*/true);
}

void Engine::set_failure_budget(FailureBudget budget) {
  std::lock_guard lifecycle(impl_->lifecycle);
  if (running()) throw std::logic_error("set_failure_budget: a run is active");
  impl_->options.max_failures = std::move(budget);
}

bool Engine::running() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->active;
}

NextStatus Engine::next(Item& out, std::optional<std::chrono::nanoseconds> timeout) {
  std::shared_ptr<RunShared> run;
  sink_actor sink;
  {
    // The common case, a run in progress, needs no lifecycle lock: only this (the
    // consumer) thread starts runs, and a stop in progress sets `stopping` first.
    std::lock_guard lock(impl_->mutex);
    if (impl_->active && !impl_->run->stopping.load(std::memory_order_relaxed)) {
      run = impl_->run;
      sink = impl_->sink;
    }
  }
  if (!run) {
    std::lock_guard lifecycle(impl_->lifecycle);
    if (!running()) impl_->start_locked();  // after an end: the next epoch
    std::lock_guard lock(impl_->mutex);
    run = impl_->run;
    sink = impl_->sink;
  }
  bool notify = false;
  NextStatus status;
  try {
    status = run->queue.pop(out, timeout, notify);
  } catch (...) {
    stop();  // the run failed: join its actors before the consumer sees the failure
    throw;
  }
  if (notify) caf::anon_send(sink, wake_atom::value);
  if (status == NextStatus::item) run->commits.commit(out.positions);
  if (status == NextStatus::end) {
    std::lock_guard lifecycle(impl_->lifecycle);
    bool same = false;
    {
      std::lock_guard lock(impl_->mutex);
      same = impl_->run == run;
    }
    if (same) impl_->join_locked(/*cancel=*/run->stopping.load());
  }
  return status;
}

PipelineStats Engine::stats() const {
  std::shared_ptr<RunShared> run;
  {
    std::lock_guard lock(impl_->mutex);
    run = impl_->run;
  }
  return impl_->snapshot(run);
}

std::size_t Engine::item_bound() const {
  // Counted in source items: an item after a fixed-size aggregate of n weighs n.
  double weight = 1;
  double bound = 0;
  for (const auto& stage : impl_->spec.stages) {
    bound += stage.capacity() * weight;
    if (stage.kind == StageKind::aggregate && stage.aggregate_size > 0) {
      weight *= static_cast<double>(stage.aggregate_size);
    }
  }
  bound += (impl_->spec.sink_buffer.value_or(0) + 1) * weight;  // + the consumer's item
  return static_cast<std::size_t>(bound);
}

}  // namespace brigade::actors::detail
