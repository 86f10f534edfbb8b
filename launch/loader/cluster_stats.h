#pragma once

// Cluster-wide statistics on rank 0 (issue 24): what every rank reports per interval,
// and the analysis that names who holds the job back. Plain values and a
// single-threaded analyzer driven by its caller (the aggregator actor, or a test): no
// clock inside, the interval is what the reports say.
//
// THE GRID. Every process's reporter ends its intervals on one grid (stats_reporter.h
// ReportGrid: multiples of the interval on the wall clock, the same on every host whose
// clock is synchronized), and each report says which interval of the grid it ends
// (interval_index; 0: not on a grid, as in a test that closes by hand). Rank 0 closes
// interval n (close_interval(n)) once every rank not yet silent has reported it
// (complete(n)), or a bounded grace after its end (launch/run_statistics.h), never on a
// phase of its own: a report is counted in the interval it covers, not the next one.
// A report for a later interval waits for that one's close; a report that arrives after
// its interval closed (later than the grace) counts in the next one, unless the rank's
// own report of that one arrives (the newer replaces it).
//
// DETECTION LATENCY, defined: a rank slowed (score below threshold, waiting on data)
// throughout grid intervals t, t+1, … is named at the close of interval t +
// `consecutive` − 1 (t+1 at the default K = 2), provided its reports arrive within the
// grace and t is past its warm-up. Counted from the interval in progress when the
// slowing began (s = t − 1, slowed only in part): named at most `consecutive` intervals
// later — the close of s + 2 at most, of s + 1 when the part of s slowed already scores
// below the threshold (ClusterStats.ARankSlowedFromIntervalTIsNamedAtTheCloseOfTPlusOne;
// tests/launch/stats_cluster_test.py slowed asserts it on real processes).
//
// SCORE. A rank's score in an interval is its delivered samples/s over the median of
// the other ranks' that reported in it, at most 1. Not NVIDIA's (over the fastest rank):
// on a shared node one rank that runs alone on a core would make every other rank look
// slow (4 equal ranks of `brigade run --threads 1` on 2 loaded cores, 0.5 s intervals:
// some rank scored below 0.75 in 15 of 23 intervals against the fastest, in 10 of 23
// against the others' median; cluster_stats_test.cc
// TheScoreIsAgainstTheMedianOfTheOthersNotTheFastest). The threshold is the minimum
// relative gap (0.75: a quarter below the others); `consecutive` intervals in a row,
// `warmup` and many batches per interval keep noise out. A low score alone does not
// say the data is late: a rank whose training step is slower also delivers fewer
// samples, but its consumer never waits. So:
//   - STRAGGLER: score < threshold AND exposed data wait share ≥ min_wait_share (the
//     consumer spent that share of the interval blocked on the next batch), for
//     `consecutive` intervals in a row. An interval in which the rank's epoch restarted
//     (RankReport::epoch_restarted: its wait covers only part of it) with a low score
//     but too little wait keeps the count rather than ending it. Named with its host, the stage
//     most responsible and, when it decodes remotely, the worker it waits on most.
//   - NOT CONSUMING: the consumer has not asked for a batch for hang_after_s while the
//     pipeline is full (the training step or a collective is stuck, not the data);
//     named with the last sample id delivered. Never also a straggler.
//   - SILENT: no report for silent_after intervals (a rank that stops reporting is not
//     a straggler: its figures are unknown; its slow count is forgotten). A worker node
//     too (add_worker): one that reported and then stopped for silent_after intervals is
//     named (rank none, worker its name) once, and left out of the figures until it
//     reports again (figures().silent_workers).
//   - SLOWEST KEEPS CHANGING: in each of the last `consecutive` + 1 intervals every
//     rank waited on data (share ≥ min_wait_share) and the slowest rank changed every
//     interval: the loader as a whole is too slow for the training step (more CPUs or
//     workers, not one fix).
// THE STAGE MOST RESPONSIBLE: the stage whose task time (p50) is the largest multiple
// of the same stage's median over the other ranks; where no stage is an outlier (all
// within 1.25×), the most occupied stage that is not backpressured (full, and not
// waiting on downstream: the bottleneck); where every stage is backpressured (a process
// stopped from outside: its consumer too), the least backpressured one.
// RECOMMENDED WORKERS (tf.data service's rule): Σ over ranks of the rate each rank
// would consume with data always ready ÷ the mean worker's throughput, rounded up.
// With worker nodes' own reports (add_worker): in tasks — each rank's tasks accepted
// from workers / (interval − exposed wait) ÷ the mean node's capacity (tasks / busy
// seconds × threads); else from the ranks' figures alone — samples / (interval −
// exposed wait) ÷ (samples / busy seconds). 0 without worker figures.
// WORKER NODES (add_worker): each worker's own report of the interval — tasks served
// per trainer, task times, queue, CPU — is shown per worker (figures().workers, the
// outputs' label worker) and completes a straggler's event: the worker it waits on with
// that worker's own task times, queue and CPU. A worker that stops reporting is named
// SILENT and left out of the figures after silent_after intervals. Worker nodes are not
// waited for (complete(): their interval may be another than the ranks'): a worker's
// latest report counts in the next close.
//
// BAD INPUT. add() refuses a report for a rank outside the world, a report whose
// sequence is not above the rank's last (replayed, reordered), and figures that are
// negative, not finite or longer than an interval allows; refused reports are counted
// and change nothing.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "actors/stats.h"

namespace brigade::launch {

/// A remote worker as one rank sees it, in one interval (the trainer's side: its pool's
/// figures, launch/run_statistics.h).
struct WorkerReport {
  std::string name;           // HOST:PORT of the worker, as the rank's pool names it
  std::uint64_t samples = 0;  // it decoded for this rank in the interval (0: unknown)
  double busy_s = 0;          // its threads' time on them (0: unknown to the rank)
  double waited_s = 0;        // time this rank's tasks waited on it (sent to result, summed)
  std::uint64_t tasks = 0;    // results this rank accepted from it in the interval
};

/// What a worker node served one trainer (one session name: "rank R of W (pid P)") in
/// an interval.
struct TrainerServed {
  std::string name{};
  std::optional<std::uint32_t> rank{};  // read from the name; none for another client
  std::uint64_t tasks = 0;              // results sent
  double busy_s = 0;                    // its threads' time on them
};

/// A worker node's own report for one interval (`brigade worker --stats`): what it
/// served each trainer, its task times, its queue and its CPU.
struct WorkerNodeReport {
  std::string name{};                       // HOST:PORT it serves at (what trainers' pools call it)
  std::string host{};                       // its host name
  std::uint64_t incarnation = 0;            // random per process: a restarted worker starts anew
  std::uint64_t sequence = 0;               // per incarnation, increasing
  double interval_s = 0;                    // the time the deltas cover (> 0)
  double at_s = 0;                          // the interval's end, since its reporter started
  std::uint32_t threads = 0;                // operation threads
  std::uint64_t tasks = 0;                  // results sent in the interval
  std::uint64_t failed = 0;                 // tasks whose operation threw
  double busy_s = 0;                        // its threads' time on tasks
  double task_p50_ms = 0, task_p99_ms = 0;  // the interval's task times (0: no task)
  std::uint64_t queued = 0;                 // tasks waiting for a thread at the interval's end
  std::uint64_t running = 0;                // … running
  double cpu_s = 0;                         // the process's CPU time in the interval (all threads)
  std::vector<TrainerServed> trainers{};
  std::uint64_t interval_index = 0;  // the grid interval it ends (THE GRID; 0: none)
};

/// One rank's report for one interval: what launch/loader/stats_reporter.h builds from
/// the engine's statistics, launch/loader/stats_report.h carries as bytes, the analyzer
/// reads and the outputs (launch/stats_output.h) show.
struct RankReport {
  std::uint32_t rank = 0;
  std::string host{};
  std::uint64_t sequence = 0;       // per rank, increasing
  double interval_s = 0;            // the time the deltas cover (> 0)
  double at_s = 0;                  // the interval's end, since the reporter started
  std::uint64_t samples = 0;        // delivered to the consumer in the interval
  std::uint64_t samples_total = 0;  // … since the reporter started
  std::uint64_t batches = 0;        // batches delivered in the interval
  double exposed_wait_s = 0;        // the consumer blocked waiting for the next batch
  double exposed_wait_total_s = 0;  // … since the reporter started
  double readiness = 0;             // the interval's share of requests that found a batch waiting
  double since_last_request_s = 0;  // since the consumer last asked for a batch
  bool pipeline_full = false;       // the sink held a batch nobody asked for
  std::uint64_t last_sample_id = 0;
  // The engine's figures restarted in the interval (a new epoch): exposed_wait_s and
  // the stages' deltas cover only the new epoch's part of it (stats_reporter.h).
  bool epoch_restarted = false;
  // The interval's figures, pipeline order: counts and times are the interval's deltas,
  // mean_ms the interval's mean task time, occupancy its time average, items_per_s its
  // rate; p50/p90/p99 are the epoch's (the engine keeps one histogram per run).
  std::vector<actors::StageStats> stages{};
  std::vector<actors::StageStats> stage_totals{};  // the epoch's, as stats() gives them
  std::vector<WorkerReport> workers{};
  std::uint64_t interval_index = 0;  // the grid interval it ends (THE GRID; 0: none)
};

struct ClusterOptions {
  double threshold = 0.75;         // SCORE below this: slow
  double min_wait_share = 0.1;     // exposed wait share at or above this: waiting on data
  int consecutive = 2;             // intervals in a row before a straggler is named
  double hang_after_s = 60;        // NOT CONSUMING
  int silent_after = 3;            // SILENT, in intervals
  std::size_t max_workers = 4096;  // worker nodes tracked (more are refused)
  // A rank's first this many reports are never counted as slow (its start: ranks start
  // at different times, and a first interval holds the pipeline's warm-up).
  std::uint64_t warmup = 0;
};

enum class ClusterEventKind { straggler, not_consuming, silent, slowest_keeps_changing };
std::string_view to_string(ClusterEventKind kind);

struct ClusterEvent {
  ClusterEventKind kind = ClusterEventKind::straggler;
  std::optional<std::uint32_t> rank{};  // none for slowest_keeps_changing
  std::string host{}, stage{}, worker{};
  double score = 0, wait_share = 0;
  std::uint64_t last_sample_id = 0;  // not_consuming
  std::string message{};             // one log line naming everything above
};

/// One rank's figures in the interval closed last.
struct RankFigures {
  std::uint32_t rank = 0;
  std::string host{};
  bool reported = false;
  bool silent = false;  // named SILENT, not reporting since
  double samples_per_s = 0, wait_share = 0, score = 0;
};

/// One worker node's figures in the interval closed last (its own report).
struct WorkerNodeFigures {
  std::string name{}, host{};
  bool reported = false;                                  // in the interval closed last
  double tasks_per_s = 0, busy_share = 0, cpu_share = 0;  // busy and cpu: ÷ threads
  double task_p50_ms = 0, task_p99_ms = 0;
  std::uint64_t queued = 0, running = 0;
  std::uint32_t threads = 0;
  std::vector<TrainerServed> trainers{};  // tasks served per trainer in the interval
};

struct ClusterFigures {
  std::uint64_t interval = 0;  // intervals closed so far
  std::vector<RankFigures> ranks{};
  std::vector<WorkerNodeFigures> workers{};  // those that reported, by name
  std::uint32_t recommended_workers = 0;
  std::uint64_t refused_reports = 0;
  std::map<std::string, std::string> silent_workers{};  // name → host: SILENT since
};

class ClusterAnalyzer {
 public:
  explicit ClusterAnalyzer(std::uint32_t world_size, ClusterOptions options = {});

  /// Takes a rank's report: it counts in the close of its interval_index (THE GRID; of
  /// the next close where it has none or its interval closed already; a later one of
  /// the same rank for the same close replaces it). Returns false, counting it, for a
  /// refused report (BAD INPUT).
  bool add(const RankReport& report);
  /// Takes a worker node's report for the interval in progress (a second one from the
  /// same worker replaces the first). Returns false, counting it, for a refused report:
  /// figures an interval cannot hold, a sequence not above the last of the same
  /// incarnation (replayed, reordered), or a worker beyond max_workers.
  bool add_worker(const WorkerNodeReport& report);
  /// Whether every rank not yet silent has a report for grid interval `index` or a
  /// later one (THE GRID): closing it now leaves nobody's report behind.
  bool complete(std::uint64_t index) const;
  /// Closes grid interval `index`: each rank's latest report with interval_index ≤
  /// `index` counts (later ones wait for their close), then figures, then the events
  /// it raises (each named once when it starts, again only after it ended).
  std::vector<ClusterEvent> close_interval(std::uint64_t index);
  /// Closes the interval with every report taken so far (reports not on a grid).
  std::vector<ClusterEvent> close_interval() { return close_interval(UINT64_MAX); }
  const ClusterFigures& figures() const { return figures_; }

 private:
  struct RankState {
    std::optional<RankReport> current;  // the report counted in the close under way
    // Taken, not yet closed, by sequence (kMaxPending at most: the oldest is dropped).
    std::vector<RankReport> pending;
    std::optional<std::uint64_t> last_sequence;
    int slow_intervals = 0, silent_intervals = 0;
    std::uint64_t reports = 0;  // closed intervals it reported in (ClusterOptions::warmup)
    bool named_straggler = false, named_hung = false, named_silent = false;
  };
  ClusterOptions options_;
  std::vector<RankState> ranks_;
  struct WorkerState {
    std::optional<WorkerNodeReport> current;
    std::uint64_t incarnation = 0, last_sequence = 0;
    int silent_intervals = 0;
    std::optional<WorkerNodeFigures> last;  // its figures when it last reported
  };
  std::map<std::string, WorkerState> workers_;
  std::map<std::string, std::string> silent_workers_;  // name → host, named SILENT
  ClusterFigures figures_;
  // The slowest rank of each of the last `consecutive` + 1 intervals (none where not
  // every rank waited on data), oldest first.
  std::vector<std::optional<std::uint32_t>> slowest_history_;
  bool named_changing_ = false;
};

/// The figures in Prometheus' text exposition format (metric names brigade_*, labels
/// rank and host; the worker nodes' brigade_worker_node_* with label worker, and
/// brigade_worker_node_tasks_per_rank with labels worker and rank; SILENT ranks and
/// workers as brigade_rank_silent{rank} and brigade_worker_node_silent{worker,host}, 1
/// while silent).
std::string prometheus_text(const ClusterFigures& figures);

}  // namespace brigade::launch
