#include "launch/loader/stats_reporter.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "launch/loader/stats_report.h"

namespace brigade::launch {
namespace {

// The engine's figures restart with each epoch (WHAT A REPORT SAYS).
bool restarted(const actors::PipelineStats& before, const actors::PipelineStats& after) {
  return after.elapsed_s < before.elapsed_s || after.sink.requests < before.sink.requests ||
         after.stages.size() != before.stages.size();
}

actors::StageStats stage_delta(const actors::StageStats& b, const actors::StageStats& a,
                               double interval_s) {
  actors::StageStats d = a;
  d.tasks = a.tasks - std::min(a.tasks, b.tasks);
  d.failures = a.failures - std::min(a.failures, b.failures);
  d.filtered = a.filtered - std::min(a.filtered, b.filtered);
  d.retries = a.retries - std::min(a.retries, b.retries);
  d.outputs = a.outputs - std::min(a.outputs, b.outputs);
  d.starved_s = std::max(0.0, a.starved_s - b.starved_s);
  d.backpressured_s = std::max(0.0, a.backpressured_s - b.backpressured_s);
  const double task_ms = a.mean_ms * double(a.tasks) - b.mean_ms * double(b.tasks);
  d.mean_ms = d.tasks ? std::max(0.0, task_ms / double(d.tasks)) : 0;
  const double span = a.elapsed_s - b.elapsed_s;
  d.occupancy =
      span > 0
          ? std::clamp((a.occupancy * a.elapsed_s - b.occupancy * b.elapsed_s) / span, 0.0, 1.0)
          : a.occupancy;
  d.elapsed_s = interval_s;
  d.items_per_s = interval_s > 0 ? double(d.outputs) / interval_s : 0;
  return d;
}

std::int64_t interval_ns(double interval_s) {
  return std::max<std::int64_t>(1, std::llround(interval_s * 1e9));
}

// THE GRID: the interval in progress at `t`, and where interval `k` starts.
std::uint64_t grid_at(const ReportGrid& g, double interval_s, actors::Clock::time_point t) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t - g.origin).count();
  return g.index + (ns <= 0 ? 0 : static_cast<std::uint64_t>(ns / interval_ns(interval_s)));
}

actors::Clock::time_point grid_start(const ReportGrid& g, double interval_s, std::uint64_t k) {
  return g.origin +
         std::chrono::nanoseconds(static_cast<std::int64_t>(k - g.index) * interval_ns(interval_s));
}

// How long start()'s thread waits: to 1 ms past the end of grid interval `in_progress`,
// or a quarter of the interval (at most 0.5 s) without a grid.
std::chrono::duration<double> wait_for_next(const std::optional<ReportGrid>& grid,
                                            double interval_s, std::uint64_t in_progress,
                                            const actors::Clock& clock) {
  using namespace std::chrono_literals;
  if (!grid) return std::chrono::duration<double>(std::min(interval_s / 4, 0.5));
  const auto end = grid_start(*grid, interval_s, in_progress + 1);
  return std::max<std::chrono::duration<double>>(end - clock.now() + 1ms, 1ms);
}

// Whether a report is due now (THE GRID, or interval_s since `last_at`), and the grid
// interval it ends (0 without a grid); advances `in_progress`.
std::optional<std::uint64_t> due(const std::optional<ReportGrid>& grid, double interval_s,
                                 bool force, actors::Clock::time_point now,
                                 actors::Clock::time_point last_at, std::uint64_t& in_progress) {
  const double elapsed = std::chrono::duration<double>(now - last_at).count();
  if (!grid) {
    if (force ? elapsed <= 0 : elapsed < interval_s) return std::nullopt;
    return 0;
  }
  const auto k = grid_at(*grid, interval_s, now);
  if (force ? elapsed <= 0 : k <= in_progress) return std::nullopt;
  in_progress = k;
  return force ? k : k - 1;
}

}  // namespace

ReportGrid wall_clock_grid(double interval_s, const actors::Clock& clock) {
  const auto now = clock.now();
  const auto unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  const auto step = interval_ns(interval_s);
  return {.origin = now - std::chrono::nanoseconds(unix_ns % step),
          .index = static_cast<std::uint64_t>(unix_ns / step)};
}

RankReport report_between(const RankSample& before, const RankSample& after, double interval_s,
                          double since_last_request_s) {
  static const actors::PipelineStats kNone{};
  const bool restart = restarted(before.stats, after.stats);
  const auto& b = restart ? kNone : before.stats;
  const auto& a = after.stats;
  RankReport r;
  r.epoch_restarted = restart;
  r.interval_s = interval_s;
  r.samples = after.samples - std::min(after.samples, before.samples);
  r.batches = after.batches - std::min(after.batches, before.batches);
  r.exposed_wait_s = std::clamp(a.sink.consumer_wait_s - b.sink.consumer_wait_s, 0.0, interval_s);
  const auto requests = a.sink.requests - b.sink.requests;
  r.readiness = requests
                    ? double(a.sink.ready - std::min(a.sink.ready, b.sink.ready)) / double(requests)
                    : 1.0;
  r.since_last_request_s = since_last_request_s;
  r.last_sample_id = after.last_sample_id;
  for (std::size_t i = 0; i < a.stages.size(); ++i) {
    r.stages.push_back(stage_delta(i < b.stages.size() ? b.stages[i] : actors::StageStats{},
                                   a.stages[i], interval_s));
  }
  r.pipeline_full = !r.stages.empty() && r.stages.back().backpressured_s >= 0.5 * interval_s;
  r.stage_totals = a.stages;
  for (const auto& w : after.workers) {
    WorkerReport d = w;
    for (const auto& o : before.workers) {
      if (o.name != w.name) continue;
      d.tasks = w.tasks - std::min(w.tasks, o.tasks);
      d.samples = w.samples - std::min(w.samples, o.samples);
      d.busy_s = std::max(0.0, w.busy_s - o.busy_s);
      d.waited_s = std::max(0.0, w.waited_s - o.waited_s);
      break;
    }
    if (d.tasks > 0 || d.waited_s > 0) r.workers.push_back(std::move(d));
  }
  return r;
}

StatsReporter::StatsReporter(Sample sample, Deliver deliver, StatsReporterOptions options)
    : sample_(std::move(sample)), deliver_(std::move(deliver)), options_(std::move(options)) {
  origin_ = last_at_ = options_.clock->now();
  if (options_.grid) in_progress_ = grid_at(*options_.grid, options_.interval_s, origin_);
  last_ = sample_();
  first_samples_ = last_.samples;
}

StatsReporter::~StatsReporter() { stop(); }

bool StatsReporter::poll() {
  std::lock_guard lock(mutex_);
  return report_locked(false);
}

bool StatsReporter::flush() {
  std::lock_guard lock(mutex_);
  return report_locked(true);
}

bool StatsReporter::report_locked(bool force) {
  const auto now = options_.clock->now();
  const double elapsed = std::chrono::duration<double>(now - last_at_).count();
  const auto index = due(options_.grid, options_.interval_s, force, now, last_at_, in_progress_);
  if (!index) return false;
  RankSample current = sample_();
  const bool restarted_run = restarted(last_.stats, current.stats);
  const bool asked = restarted_run ? current.stats.sink.requests > 0
                                   : current.stats.sink.requests != last_.stats.sink.requests;
  since_last_request_s_ = asked ? 0 : since_last_request_s_ + elapsed;
  RankReport report = report_between(last_, current, elapsed, since_last_request_s_);
  report.rank = options_.rank;
  report.host = options_.host;
  report.sequence = ++sequence_;
  report.interval_index = *index;
  report.at_s = std::chrono::duration<double>(now - origin_).count();
  report.samples_total = current.samples - std::min(current.samples, first_samples_);
  wait_total_s_ += report.exposed_wait_s;
  report.exposed_wait_total_s = wait_total_s_;
  last_ = std::move(current);
  last_at_ = now;
  deliver_(report);
  return true;
}

void PeriodicPoll::start(std::chrono::duration<double> period, std::function<void()> poll) {
  start([period] { return period; }, std::move(poll));
}

void PeriodicPoll::start(Wait wait, std::function<void()> poll) {
  std::lock_guard lock(mutex_);
  if (thread_ || stopping_) return;
  thread_.emplace([this, wait = std::move(wait), poll = std::move(poll)] {
    std::unique_lock lock(mutex_);
    while (!stopping_) {
      lock.unlock();
      const auto period = wait();
      lock.lock();
      wake_.wait_for(lock, period, [this] { return stopping_; });
      if (stopping_) break;
      lock.unlock();
      poll();
      lock.lock();
    }
  });
}

bool PeriodicPoll::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return false;
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_ && thread_->joinable()) thread_->join();
  return true;
}

std::chrono::duration<double> StatsReporter::next_wait() {
  std::lock_guard lock(mutex_);
  return wait_for_next(options_.grid, options_.interval_s, in_progress_, *options_.clock);
}

void StatsReporter::start() {
  thread_.start([this] { return next_wait(); }, [this] { poll(); });
}

void StatsReporter::stop() {
  if (thread_.stop()) flush();
}

// -- a worker node's reports --------------------------------------------------------------

WorkerStatsReporter::WorkerStatsReporter(Take take, Deliver deliver, WorkerReporterOptions options)
    : take_(std::move(take)), deliver_(std::move(deliver)), options_(std::move(options)) {
  origin_ = last_at_ = options_.clock->now();
  if (options_.grid) in_progress_ = grid_at(*options_.grid, options_.interval_s, origin_);
  std::random_device random;
  incarnation_ = (std::uint64_t{random()} << 32) | random();
  last_cpu_s_ = options_.cpu_seconds ? options_.cpu_seconds() : 0;
}

WorkerStatsReporter::~WorkerStatsReporter() { stop(); }

bool WorkerStatsReporter::poll() {
  std::lock_guard lock(mutex_);
  return report_locked(false);
}

bool WorkerStatsReporter::report_locked(bool force) {
  const auto now = options_.clock->now();
  const double elapsed = std::chrono::duration<double>(now - last_at_).count();
  const auto index = due(options_.grid, options_.interval_s, force, now, last_at_, in_progress_);
  if (!index) return false;
  const auto served = take_();
  const double cpu = options_.cpu_seconds ? options_.cpu_seconds() : 0;
  WorkerNodeReport r{.name = options_.name,
                     .host = options_.host,
                     .incarnation = incarnation_,
                     .sequence = ++sequence_,
                     .interval_s = elapsed,
                     .at_s = std::chrono::duration<double>(now - origin_).count(),
                     .threads = served.threads,
                     .tasks = served.tasks,
                     .failed = served.failed,
                     .busy_s = served.busy_s,
                     .task_p50_ms = served.p50_ms,
                     .task_p99_ms = served.p99_ms,
                     .queued = served.queued,
                     .running = served.running,
                     .cpu_s = std::max(0.0, cpu - last_cpu_s_),
                     .trainers = {},
                     .interval_index = *index};
  for (const auto& t : served.trainers) {
    r.trainers.push_back(
        {.name = t.name, .rank = rank_of_trainer(t.name), .tasks = t.tasks, .busy_s = t.busy_s});
  }
  last_cpu_s_ = cpu;
  last_at_ = now;
  deliver_(r);
  return true;
}

std::chrono::duration<double> WorkerStatsReporter::next_wait() {
  std::lock_guard lock(mutex_);
  return wait_for_next(options_.grid, options_.interval_s, in_progress_, *options_.clock);
}

void WorkerStatsReporter::start() {
  thread_.start([this] { return next_wait(); }, [this] { poll(); });
}

void WorkerStatsReporter::stop() {
  if (!thread_.stop()) return;
  std::lock_guard lock(mutex_);
  report_locked(true);
}

}  // namespace brigade::launch
