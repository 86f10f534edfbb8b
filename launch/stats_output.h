#pragma once

// The statistics' outputs of `brigade run` and `brigade stats` (issue 24): the JSON line
// of one interval (--stats-out), the Prometheus text of the latest one (--metrics-port,
// launch/metrics_server.h serves it) and the HTML page of a JSON lines file. The
// command line's outputs, hence launch/ (the loader's core, launch/loader/, builds the
// reports: stats_reporter.h).
//
// JSON LINES (--stats-out FILE): one object per interval and rank, keys in this order:
//   rank, host, sequence (per rank, from 1), at_s (the interval's end, seconds since the
//   reporter started), interval_s, interval_index (the wall clock's grid interval it
//   ends, cluster_stats.h THE GRID; 0: none),
//   samples, samples_per_s, batches           (delivered to the consumer in the interval)
//   exposed_wait_s, exposed_wait_share        (the consumer blocked on its next batch:
//                                              seconds, and ÷ interval_s)
//   readiness                                 (requests that found a batch waiting ÷ requests)
//   since_last_request_s, pipeline_full, last_sample_id
//   totals: {samples, exposed_wait_s}         (since the reporter started)
//   stages: [{name, interval: {…}, total: {…}}]  in pipeline order; both objects have the
//           keys of `brigade run --json`'s stages (actors/stats.h stage_figures()):
//           interval = the interval's deltas (mean_ms its mean task time, occupancy its
//           time average; p50/p90/p99 the epoch's), total = the epoch's figures
//   workers: [{name, tasks, samples, busy_s, waited_s}]  (remote decoding: the rank's
//           pool's figures of the interval — tasks accepted from the worker, waited_s
//           the sum of their latencies; samples and busy_s 0 where the rank cannot know)
//   cluster (only where the process has the analyzer's findings: on rank 0 once the
//   cluster's reports reach it, and for a single process its own figures):
//     {interval, recommended_workers, refused_reports,
//      ranks: [{rank, host, reported, samples_per_s, wait_share, score}],
//      workers: [{worker, host, threads, tasks_per_s, task_p50_ms, task_p99_ms, queued,
//                 running, busy_share, cpu_share (÷ threads),
//                 trainers: [{name, rank (null if not a rank), tasks, busy_s}]}]
//                (the worker nodes' own reports, `brigade worker --stats`),
//      silent_workers: [{worker, host}]   (named SILENT, not reporting since),
//      events: [{kind (straggler | not_consuming | silent | slowest_keeps_changing),
//                rank (null for slowest_keeps_changing and a silent worker node, whose
//                worker names it), host, stage, worker, score,
//                wait_share, last_sample_id, message}]}
//
// PROMETHEUS. Gauges and counters of the latest report, labels rank and host, plus stage
// (brigade_stage_*) or worker (brigade_worker_*); then the analyzer's (cluster_stats.h
// prometheus_text), where the process has them. Names are stable:
//   brigade_samples_total, brigade_samples_per_second, brigade_exposed_wait_seconds_total,
//   brigade_exposed_wait_ratio, brigade_data_readiness_ratio, brigade_pipeline_full,
//   brigade_stage_tasks_total, brigade_stage_failures_total, brigade_stage_task_ms,
//   brigade_stage_occupancy_ratio, brigade_stage_starved_seconds,
//   brigade_stage_backpressured_seconds, brigade_worker_samples, brigade_worker_busy_seconds,
//   brigade_worker_tasks, brigade_worker_waited_seconds; the worker nodes' (label worker):
//   brigade_worker_node_tasks_per_second, brigade_worker_node_task_p50_ms,
//   brigade_worker_node_task_p99_ms, brigade_worker_node_queued_tasks,
//   brigade_worker_node_busy_ratio, brigade_worker_node_cpu_ratio,
//   brigade_worker_node_tasks_per_rank (labels worker, rank); SILENT:
//   brigade_rank_silent (label rank), brigade_worker_node_silent (labels worker, host).
//
// HTML (`brigade stats FILE`): one self-contained page (inline CSS and SVG, no script,
// nothing fetched): per-rank samples/s and exposed wait share over time, per-stage
// occupancy over time (one line per rank and stage), the analyzer's events marked on
// every chart at their time and listed below with their messages.
//
// THREADING. Plain functions over values.

#include <span>
#include <string>
#include <string_view>

#include "launch/loader/cluster_stats.h"

namespace brigade::launch {

/// The JSON line of one interval (without the newline); `cluster` null: no "cluster" key.
std::string stats_json_line(const RankReport& report, const ClusterFigures* cluster = nullptr,
                            std::span<const ClusterEvent> events = {});

/// The latest report in Prometheus' text exposition format (PROMETHEUS).
std::string prometheus_text(const RankReport& report);

/// The log line of an analyzer's event, fixed fields first (greppable), its message last:
///   "statistics: straggler rank=2 host=node-2 stage=decode worker=- score=0.25
///    wait_share=0.70 last_sample=0: rank 2 (node-2) straggling: …"
/// ("-" where a field is unknown or does not apply; rank "-" for slowest_keeps_changing).
std::string event_log_line(const ClusterEvent& event);

/// The HTML page of a JSON lines file's text. Throws ConfigError naming the line for a
/// line that is not such an object.
std::string render_stats_html(std::string_view json_lines, std::string_view title);

}  // namespace brigade::launch
