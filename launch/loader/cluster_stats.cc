#include "launch/loader/cluster_stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace brigade::launch {
namespace {

bool sane(double v, double at_most) { return std::isfinite(v) && v >= 0 && v <= at_most; }

bool valid(const RankReport& r) {
  if (!(std::isfinite(r.interval_s) && r.interval_s > 0 && r.interval_s <= 86400)) return false;
  if (!sane(r.exposed_wait_s, r.interval_s * 1.001) || !sane(r.since_last_request_s, 1e9))
    return false;
  for (const auto& s : r.stages) {
    if (!sane(s.p50_ms, 1e9) || !sane(s.occupancy, 1.001) || !sane(s.backpressured_s, 1e9))
      return false;
  }
  for (const auto& w : r.workers) {
    if (!sane(w.busy_s, 1e9) || !sane(w.waited_s, 1e9)) return false;
  }
  return true;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The stage most responsible on `rank` (see THE STAGE MOST RESPONSIBLE).
std::string responsible_stage(const RankReport& rank, const std::vector<const RankReport*>& all) {
  std::string outlier;
  double worst = 1.25;
  for (const auto& s : rank.stages) {
    std::vector<double> others;
    for (const auto* r : all) {
      if (r == &rank) continue;
      for (const auto& o : r->stages) {
        if (o.name == s.name) others.push_back(o.p50_ms);
      }
    }
    const double m = median(others);
    if (m > 0 && s.p50_ms / m > worst) {
      worst = s.p50_ms / m;
      outlier = s.name;
    }
  }
  if (!outlier.empty()) return outlier;
  // The most occupied stage among the least backpressured: not backpressured (< 5% of
  // the interval) where any is; else the one least held by downstream (a process
  // stopped from outside holds every stage, its consumer too).
  const actors::StageStats* full = nullptr;
  const auto held = [&](const actors::StageStats& s) {
    return s.backpressured_s < 0.05 * rank.interval_s ? 0.0 : s.backpressured_s;
  };
  for (const auto& s : rank.stages) {
    if (!full || held(s) < held(*full) || (held(s) == held(*full) && s.occupancy > full->occupancy))
      full = &s;
  }
  return full ? full->name : std::string();
}

// A Prometheus label value: backslash, double quote and newline escaped.
std::string label(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\' || c == '"') out += '\\';
    out += c == '\n' ? std::string("\\n") : std::string(1, c);
  }
  return out;
}

bool valid(const WorkerNodeReport& w) {
  if (!(std::isfinite(w.interval_s) && w.interval_s > 0 && w.interval_s <= 86400)) return false;
  const double most = 1e6 * w.interval_s;  // a thread's time, times any sane thread count
  if (!sane(w.busy_s, most) || !sane(w.cpu_s, most) || !sane(w.task_p50_ms, 1e12) ||
      !sane(w.task_p99_ms, 1e12) || !sane(w.at_s, 1e12) || w.name.empty())
    return false;
  for (const auto& t : w.trainers) {
    if (!sane(t.busy_s, most)) return false;
  }
  return true;
}

std::string waited_worker(const RankReport& rank) {
  const WorkerReport* most = nullptr;
  for (const auto& w : rank.workers) {
    if (!most || w.waited_s > most->waited_s) most = &w;
  }
  return most && most->waited_s > 0 ? most->name : std::string();
}

}  // namespace

std::string_view to_string(ClusterEventKind kind) {
  switch (kind) {
    case ClusterEventKind::straggler:
      return "straggler";
    case ClusterEventKind::not_consuming:
      return "not_consuming";
    case ClusterEventKind::silent:
      return "silent";
    case ClusterEventKind::slowest_keeps_changing:
      return "slowest_keeps_changing";
  }
  return "?";
}

ClusterAnalyzer::ClusterAnalyzer(std::uint32_t world_size, ClusterOptions options)
    : options_(options), ranks_(world_size) {}

bool ClusterAnalyzer::add(const RankReport& report) {
  if (report.rank >= ranks_.size() || !valid(report)) {
    ++figures_.refused_reports;
    return false;
  }
  auto& r = ranks_[report.rank];
  if (r.last_sequence && report.sequence <= *r.last_sequence) {
    ++figures_.refused_reports;
    return false;
  }
  r.last_sequence = report.sequence;
  constexpr std::size_t kMaxPending = 4;  // a rank far ahead of rank 0's closes
  if (r.pending.size() >= kMaxPending) r.pending.erase(r.pending.begin());
  r.pending.push_back(report);
  return true;
}

bool ClusterAnalyzer::complete(std::uint64_t index) const {
  for (const auto& r : ranks_) {
    if (r.silent_intervals >= options_.silent_after) continue;
    const bool has = std::any_of(r.pending.begin(), r.pending.end(),
                                 [&](const RankReport& p) { return p.interval_index >= index; });
    if (!has) return false;
  }
  return true;
}

bool ClusterAnalyzer::add_worker(const WorkerNodeReport& report) {
  auto it = workers_.find(report.name);
  if (!valid(report) || (it == workers_.end() && workers_.size() >= options_.max_workers)) {
    ++figures_.refused_reports;
    return false;
  }
  auto& w = workers_[report.name];
  if (w.incarnation == report.incarnation && report.sequence <= w.last_sequence) {
    ++figures_.refused_reports;
    return false;
  }
  w.incarnation = report.incarnation;
  w.last_sequence = report.sequence;
  w.current = report;
  return true;
}

std::vector<ClusterEvent> ClusterAnalyzer::close_interval(std::uint64_t index) {
  std::vector<ClusterEvent> events;
  ++figures_.interval;
  // THE GRID: each rank's latest report of this interval or an earlier one counts.
  for (auto& r : ranks_) {
    auto due = std::stable_partition(r.pending.begin(), r.pending.end(),
                                     [&](const RankReport& p) { return p.interval_index > index; });
    if (due != r.pending.end()) r.current = std::move(r.pending.back());
    r.pending.erase(due, r.pending.end());
  }
  // WORKER NODES: this interval's figures, and the capacity for RECOMMENDED WORKERS.
  figures_.workers.clear();
  double node_capacity = 0;  // Σ over nodes that reported of tasks/s at full use
  std::size_t nodes = 0;
  for (auto it = workers_.begin(); it != workers_.end();) {
    auto& w = it->second;
    if (!w.current) {
      if (++w.silent_intervals >= options_.silent_after) {
        const std::string host = w.last ? w.last->host : std::string();
        events.push_back(
            {.kind = ClusterEventKind::silent,
             .host = host,
             .worker = it->first,
             .message = fmt::format(
                 "worker {} ({}) silent: no statistics for {} intervals; left out of the figures",
                 it->first, host.empty() ? "host unknown" : host, w.silent_intervals)});
        if (silent_workers_.size() < options_.max_workers) silent_workers_[it->first] = host;
        it = workers_.erase(it);
        continue;
      }
      ++it;
      continue;
    }
    silent_workers_.erase(it->first);
    const auto& r = *w.current;
    const double threads = std::max<double>(r.threads, 1);
    WorkerNodeFigures f{.name = r.name,
                        .host = r.host,
                        .reported = true,
                        .tasks_per_s = double(r.tasks) / r.interval_s,
                        .busy_share = r.busy_s / r.interval_s / threads,
                        .cpu_share = r.cpu_s / r.interval_s / threads,
                        .task_p50_ms = r.task_p50_ms,
                        .task_p99_ms = r.task_p99_ms,
                        .queued = r.queued,
                        .running = r.running,
                        .threads = r.threads,
                        .trainers = r.trainers};
    if (r.busy_s > 0 && r.tasks > 0) {
      node_capacity += double(r.tasks) / r.busy_s * threads;
      ++nodes;
    }
    w.silent_intervals = 0;
    w.last = f;
    figures_.workers.push_back(std::move(f));
    w.current.reset();
    ++it;
  }
  figures_.silent_workers = silent_workers_;
  double task_demand = 0;  // Σ over ranks of tasks/s with data always ready
  std::vector<const RankReport*> reported;
  std::vector<double> rates;
  for (const auto& r : ranks_) {
    if (!r.current) continue;
    reported.push_back(&*r.current);
    rates.push_back(double(r.current->samples) / r.current->interval_s);
  }
  std::sort(rates.begin(), rates.end());
  figures_.ranks.assign(ranks_.size(), {});
  double demand = 0, worker_samples = 0, worker_busy = 0;
  bool all_waiting = !reported.empty() && reported.size() == ranks_.size();
  std::optional<std::uint32_t> slowest;
  double slowest_score = 2;
  for (std::uint32_t i = 0; i < ranks_.size(); ++i) {
    auto& state = ranks_[i];
    auto& f = figures_.ranks[i];
    f.rank = i;
    if (!state.current) {
      f.silent = state.named_silent;
      if (++state.silent_intervals >= options_.silent_after && !state.named_silent) {
        f.silent = true;
        state.named_silent = true;
        events.push_back({.kind = ClusterEventKind::silent,
                          .rank = i,
                          .message = fmt::format("rank {} silent: no statistics for {} intervals",
                                                 i, state.silent_intervals)});
      }
      // One interval without a report (its reporter's phase against rank 0's) keeps
      // the count of slow intervals; a silent rank's is forgotten.
      if (state.silent_intervals >= options_.silent_after) state.slow_intervals = 0;
      continue;
    }
    const RankReport& r = *state.current;
    ++state.reports;
    state.silent_intervals = 0;
    state.named_silent = false;
    f.host = r.host;
    f.reported = true;
    f.samples_per_s = double(r.samples) / r.interval_s;
    f.wait_share = r.exposed_wait_s / r.interval_s;
    // SCORE: against the median of the other ranks' rates (`rates` sorted: this
    // rank's entry skipped by index, O(log n) per rank).
    double typical = 0;
    if (rates.size() > 1) {
      const auto self = static_cast<std::size_t>(
          std::lower_bound(rates.begin(), rates.end(), f.samples_per_s) - rates.begin());
      const auto other = [&](std::size_t k) { return rates[k < self ? k : k + 1]; };
      const std::size_t n = rates.size() - 1;
      typical = n % 2 ? other(n / 2) : (other(n / 2 - 1) + other(n / 2)) / 2;
    }
    f.score = typical > 0 ? std::min(f.samples_per_s / typical, 1.0) : 1.0;
    const double consuming_s = r.interval_s - r.exposed_wait_s;
    if (consuming_s > 0) demand += double(r.samples) / consuming_s;
    for (const auto& w : r.workers) {
      if (consuming_s > 0) task_demand += double(w.tasks) / consuming_s;
      worker_samples += double(w.samples);
      worker_busy += w.busy_s;
    }
    const bool waiting = f.wait_share >= options_.min_wait_share;
    all_waiting = all_waiting && waiting;
    if (f.score < slowest_score) {
      slowest_score = f.score;
      slowest = i;
    }
    const bool hung = r.pipeline_full && r.since_last_request_s >= options_.hang_after_s;
    if (hung) {
      if (!state.named_hung) {
        state.named_hung = true;
        events.push_back(
            {.kind = ClusterEventKind::not_consuming,
             .rank = i,
             .host = r.host,
             .last_sample_id = r.last_sample_id,
             .message = fmt::format(
                 "rank {} ({}) not consuming: no batch asked for in {:.1f} s with its pipeline "
                 "full; last sample delivered {} (the training step or a collective is stuck, "
                 "not the data)",
                 i, r.host, r.since_last_request_s, r.last_sample_id)});
      }
      state.slow_intervals = 0;
      continue;
    }
    state.named_hung = false;
    if (f.score < options_.threshold && waiting && state.reports > options_.warmup) {
      ++state.slow_intervals;
    } else if (f.score < options_.threshold && r.epoch_restarted) {
      // Its wait covers the new epoch's part alone: the count is kept (STRAGGLER).
    } else {
      state.slow_intervals = 0;
      state.named_straggler = false;
    }
    if (state.slow_intervals >= options_.consecutive && !state.named_straggler) {
      state.named_straggler = true;
      ClusterEvent e{.kind = ClusterEventKind::straggler,
                     .rank = i,
                     .host = r.host,
                     .stage = responsible_stage(r, reported),
                     .worker = waited_worker(r),
                     .score = f.score,
                     .wait_share = f.wait_share};
      std::string worker_text;
      if (!e.worker.empty()) {
        worker_text = ", waiting on worker " + e.worker;
        // Its own figures, when it reports (WORKER NODES).
        if (auto w = workers_.find(e.worker); w != workers_.end() && w->second.last) {
          const auto& wf = *w->second.last;
          worker_text += fmt::format(
              " (its tasks p50 {:.1f} ms, p99 {:.1f} ms; {} queued; CPU {:.0f}% of {} threads)",
              wf.task_p50_ms, wf.task_p99_ms, wf.queued, 100 * wf.cpu_share, wf.threads);
        }
      }
      e.message = fmt::format(
          "rank {} ({}) straggling: {:.0f} samples/s, score {:.2f} against the others' median, its "
          "consumer waited {:.0f}% of the interval; stage {}{}",
          i, r.host, f.samples_per_s, f.score, 100 * f.wait_share,
          e.stage.empty() ? "unknown" : e.stage, worker_text);
      events.push_back(std::move(e));
    }
  }
  if (nodes > 0 && node_capacity > 0) {
    figures_.recommended_workers =
        static_cast<std::uint32_t>(std::ceil(task_demand / (node_capacity / double(nodes))));
  } else {
    figures_.recommended_workers =
        worker_busy > 0 && worker_samples > 0
            ? static_cast<std::uint32_t>(std::ceil(demand / (worker_samples / worker_busy)))
            : 0;
  }
  slowest_history_.push_back(all_waiting ? slowest : std::nullopt);
  const std::size_t window = static_cast<std::size_t>(options_.consecutive) + 1;
  if (slowest_history_.size() > window) slowest_history_.erase(slowest_history_.begin());
  bool changing = slowest_history_.size() == window && ranks_.size() > 1;
  for (std::size_t k = 0; changing && k < window; ++k) {
    changing = slowest_history_[k].has_value() &&
               (k == 0 || slowest_history_[k] != slowest_history_[k - 1]);
  }
  if (changing && !named_changing_) {
    events.push_back({.kind = ClusterEventKind::slowest_keeps_changing,
                      .message = fmt::format(
                          "every rank waits on data and the slowest rank changed in each "
                          "of the last {} intervals: the loader as a whole is too slow "
                          "for the training step (more CPUs or workers{})",
                          window,
                          figures_.recommended_workers ? fmt::format(": {} workers recommended",
                                                                     figures_.recommended_workers)
                                                       : std::string())});
  }
  named_changing_ = changing;
  for (auto& r : ranks_) r.current.reset();
  return events;
}

std::string prometheus_text(const ClusterFigures& figures) {
  std::string out;
  const auto family = [&](const char* name, const char* help, auto value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n", name, help, name);
    for (const auto& r : figures.ranks) {
      if (!r.reported) continue;
      out +=
          fmt::format("{}{{rank=\"{}\",host=\"{}\"}} {}\n", name, r.rank, label(r.host), value(r));
    }
  };
  family("brigade_rank_samples_per_second", "Samples delivered per second in the last interval",
         [](const RankFigures& r) { return r.samples_per_s; });
  family("brigade_rank_exposed_wait_ratio",
         "Share of the last interval the consumer waited for its next batch",
         [](const RankFigures& r) { return r.wait_share; });
  family("brigade_rank_score", "Samples per second over the median of the other ranks', at most 1",
         [](const RankFigures& r) { return r.score; });
  const auto node = [&](const char* name, const char* type, const char* help, auto value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
    for (const auto& w : figures.workers)
      out += fmt::format("{}{{worker=\"{}\",host=\"{}\"}} {}\n", name, label(w.name), label(w.host),
                         value(w));
  };
  if (!figures.workers.empty()) {
    node("brigade_worker_node_tasks_per_second", "gauge",
         "Tasks the worker node finished per second, last interval",
         [](const WorkerNodeFigures& w) { return w.tasks_per_s; });
    node("brigade_worker_node_task_p50_ms", "gauge", "Median task time, last interval",
         [](const WorkerNodeFigures& w) { return w.task_p50_ms; });
    node("brigade_worker_node_task_p99_ms", "gauge", "99th percentile task time, last interval",
         [](const WorkerNodeFigures& w) { return w.task_p99_ms; });
    node("brigade_worker_node_queued_tasks", "gauge",
         "Tasks waiting for a thread at the interval's end",
         [](const WorkerNodeFigures& w) { return w.queued; });
    node("brigade_worker_node_busy_ratio", "gauge",
         "Share of the threads' time spent on tasks, last interval",
         [](const WorkerNodeFigures& w) { return w.busy_share; });
    node("brigade_worker_node_cpu_ratio", "gauge",
         "Process CPU time per thread and second, last interval",
         [](const WorkerNodeFigures& w) { return w.cpu_share; });
    out +=
        "# HELP brigade_worker_node_tasks_per_rank Tasks the worker node served a rank, last "
        "interval\n# TYPE brigade_worker_node_tasks_per_rank gauge\n";
    for (const auto& w : figures.workers) {
      for (const auto& t : w.trainers) {
        if (!t.rank) continue;
        out += fmt::format("brigade_worker_node_tasks_per_rank{{worker=\"{}\",rank=\"{}\"}} {}\n",
                           label(w.name), *t.rank, t.tasks);
      }
    }
  }
  out +=
      "# HELP brigade_rank_silent A rank that stopped reporting (SILENT)\n"
      "# TYPE brigade_rank_silent gauge\n";
  for (const auto& r : figures.ranks) {
    if (r.silent) out += fmt::format("brigade_rank_silent{{rank=\"{}\"}} 1\n", r.rank);
  }
  out +=
      "# HELP brigade_worker_node_silent A worker node that stopped reporting (SILENT)\n"
      "# TYPE brigade_worker_node_silent gauge\n";
  for (const auto& [name, host] : figures.silent_workers) {
    out += fmt::format("brigade_worker_node_silent{{worker=\"{}\",host=\"{}\"}} 1\n", label(name),
                       label(host));
  }
  out += fmt::format(
      "# HELP brigade_recommended_workers Remote workers the consumption rate needs\n"
      "# TYPE brigade_recommended_workers gauge\nbrigade_recommended_workers {}\n"
      "# HELP brigade_refused_reports_total Statistics reports refused\n"
      "# TYPE brigade_refused_reports_total counter\nbrigade_refused_reports_total {}\n",
      figures.recommended_workers, figures.refused_reports);
  return out;
}

}  // namespace brigade::launch
