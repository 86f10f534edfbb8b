#include "actors/detail/stage_counters.h"

namespace brigade::actors::detail {

StageCounters::StageCounters(std::string name, std::string kind, int concurrency, int capacity,
                             const Clock& clock)
    : clock_(clock) {
  stats_.name = std::move(name);
  stats_.kind = std::move(kind);
  stats_.concurrency = concurrency;
  stats_.capacity = capacity;
}

void StageCounters::record_task(std::uint64_t ns, TaskOutcome outcome, int retries,
                                std::uint64_t failures) {
  std::lock_guard lock(mutex_);
  ++stats_.tasks;
  stats_.retries += static_cast<std::uint64_t>(retries);
  stats_.failures += failures;
  if (outcome == TaskOutcome::filtered) ++stats_.filtered;
  task_ns_.record(ns);
}

void StageCounters::record_tasks(const std::vector<std::uint64_t>& ns, std::uint64_t filtered,
                                 std::uint64_t retries, std::uint64_t failures) {
  std::lock_guard lock(mutex_);
  stats_.tasks += ns.size();
  stats_.retries += retries;
  stats_.failures += failures;
  stats_.filtered += filtered;
  for (const auto t : ns) task_ns_.record(t);
}

void StageCounters::record_filtered(std::uint64_t n) {
  std::lock_guard lock(mutex_);
  stats_.filtered += n;
}

void StageCounters::record_outputs(std::uint64_t n) {
  outputs_.store(outputs_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

void StageCounters::advance(int held, bool starved, bool backpressured) {
  // The state is written by this (the only) writer: reading it needs no lock.
  if (held == held_ && starved == starved_ && backpressured == backpressured_) return;
  const auto now = clock_.now();
  std::lock_guard lock(mutex_);
  const double dt = std::chrono::duration<double>(now - last_).count();
  held_integral_ += held_ * dt;
  if (starved_) starved_s_ += dt;
  if (backpressured_) backpressured_s_ += dt;
  last_ = now;
  held_ = held;
  starved_ = starved;
  backpressured_ = backpressured;
}

std::uint64_t StageCounters::tasks() const {
  std::lock_guard lock(mutex_);
  return stats_.tasks;
}

std::uint64_t StageCounters::failures() const {
  std::lock_guard lock(mutex_);
  return stats_.failures;
}

StageStats StageCounters::snapshot() const {
  const auto now = clock_.now();
  std::lock_guard lock(mutex_);
  StageStats s = stats_;
  s.outputs = outputs_.load(std::memory_order_relaxed);
  const double open = std::chrono::duration<double>(now - last_).count();
  s.elapsed_s = std::chrono::duration<double>(now - start_).count();
  s.starved_s = starved_s_ + (starved_ ? open : 0.0);
  s.backpressured_s = backpressured_s_ + (backpressured_ ? open : 0.0);
  if (s.elapsed_s > 0 && s.capacity > 0) {
    s.occupancy = (held_integral_ + held_ * open) / (s.elapsed_s * s.capacity);
    s.items_per_s = static_cast<double>(s.outputs) / s.elapsed_s;
  }
  s.mean_ms = task_ns_.mean_ns() / 1e6;
  s.p50_ms = task_ns_.quantile_ns(0.50) / 1e6;
  s.p90_ms = task_ns_.quantile_ns(0.90) / 1e6;
  s.p99_ms = task_ns_.quantile_ns(0.99) / 1e6;
  return s;
}

}  // namespace brigade::actors::detail
