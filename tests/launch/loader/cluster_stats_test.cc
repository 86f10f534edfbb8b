#include "launch/loader/cluster_stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace brigade::launch {
namespace {

std::string fmt_worker(std::uint32_t rank) { return "127.0.0.1:900" + std::to_string(rank); }

// One interval of 10 s for `rank`: `samples` delivered, the consumer blocked `wait_s`,
// a read and a decode stage whose decode p50 is `decode_ms`.
RankReport report(std::uint32_t rank, std::uint64_t sequence, std::uint64_t samples, double wait_s,
                  double decode_ms = 10) {
  RankReport r{.rank = rank,
               .host = "node" + std::to_string(rank),
               .sequence = sequence,
               .interval_s = 10,
               .samples = samples,
               .exposed_wait_s = wait_s,
               .since_last_request_s = 0.01,
               .last_sample_id = 1000 + rank};
  actors::StageStats read, decode;
  read.name = "read";
  read.p50_ms = 1;
  read.backpressured_s = 6;
  read.occupancy = 0.3;
  decode.name = "decode";
  decode.p50_ms = decode_ms;
  decode.occupancy = 0.95;
  r.stages = {read, decode};
  return r;
}

// Four ranks for `intervals` intervals; rank `slow` (if any) delivers `slow_samples`
// and waits `slow_wait` s; returns every event.
std::vector<ClusterEvent> run(ClusterAnalyzer& a, int intervals, int slow,
                              std::uint64_t slow_samples, double slow_wait,
                              double slow_decode_ms = 10, int first = 0) {
  std::vector<ClusterEvent> all;
  for (int k = first; k < first + intervals; ++k) {
    for (std::uint32_t r = 0; r < 4; ++r) {
      const bool is_slow = static_cast<int>(r) == slow;
      EXPECT_TRUE(a.add(is_slow ? report(r, k, slow_samples, slow_wait, slow_decode_ms)
                                : report(r, k, 1000, 0.2)));
    }
    for (auto& e : a.close_interval()) all.push_back(std::move(e));
  }
  return all;
}

TEST(ClusterStats, NamesTheStarvingRankAndItsStageAfterTwoIntervals) {
  ClusterAnalyzer a(4);
  auto first = run(a, 1, 2, 500, 5, 40);
  EXPECT_TRUE(first.empty());  // one interval is not yet a straggler
  auto events = run(a, 1, 2, 500, 5, 40, 1);
  ASSERT_EQ(events.size(), 1u);
  const auto& e = events[0];
  EXPECT_EQ(e.kind, ClusterEventKind::straggler);
  EXPECT_EQ(e.rank, 2u);
  EXPECT_EQ(e.host, "node2");
  EXPECT_EQ(e.stage, "decode");  // its decode p50 is 4x the others'
  EXPECT_DOUBLE_EQ(e.score, 0.5);
  EXPECT_NE(e.message.find("rank 2 (node2) straggling"), std::string::npos) << e.message;
  EXPECT_TRUE(run(a, 3, 2, 500, 5, 40, 2).empty());  // named once while it lasts
  EXPECT_DOUBLE_EQ(a.figures().ranks[2].score, 0.5);
  EXPECT_DOUBLE_EQ(a.figures().ranks[2].wait_share, 0.5);
}

TEST(ClusterStats, EqualRanksNameNobody) {
  ClusterAnalyzer a(4);
  EXPECT_TRUE(run(a, 20, -1, 0, 0).empty());
}

TEST(ClusterStats, ASlowRankThatNeverWaitsOnDataIsNotAStraggler) {
  ClusterAnalyzer a(4);  // its training step is slower: half the samples, no data wait
  EXPECT_TRUE(run(a, 5, 1, 500, 0.0).empty());
}

TEST(ClusterStats, WithoutAnOutlierStageTheFullUnbackpressuredStageIsNamed) {
  ClusterAnalyzer a(4);
  auto events = run(a, 2, 3, 300, 6, 10);  // every stage's time as the others'
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].stage, "decode");  // occupied 0.95, not backpressured; read is
}

TEST(ClusterStats, WhenEveryStageIsBackpressuredTheLeastHeldIsNamed) {
  // A rank stopped from outside (SIGSTOP): its consumer stops too, every stage waits on
  // the one downstream; the stage least held is where the time goes.
  ClusterAnalyzer a(4);
  std::vector<ClusterEvent> events;
  for (std::uint64_t k = 0; k < 2; ++k) {
    for (std::uint32_t r = 0; r < 4; ++r) {
      auto rep = r == 1 ? report(r, k, 300, 6) : report(r, k, 1000, 0.2);
      if (r == 1) rep.stages[1].backpressured_s = 2;  // read's: 6
      ASSERT_TRUE(a.add(rep));
    }
    for (auto& e : a.close_interval()) events.push_back(std::move(e));
  }
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].stage, "decode");
}

TEST(ClusterStats, AnEpochsRestartWithoutWaitKeepsTheSlowCount) {
  // Rank 2 is slow and waits; in its second interval its epoch restarts, and its wait
  // counts only the new epoch's part (none yet): the count is kept, not ended, and the
  // third slow interval names it. An interval that did not restart ends the count.
  ClusterAnalyzer a(4);
  std::vector<ClusterEvent> events;
  for (std::uint64_t k = 0; k < 3; ++k) {
    for (std::uint32_t r = 0; r < 4; ++r) {
      auto rep = r == 2 ? report(r, k, 300, 6) : report(r, k, 1000, 0.2);
      if (r == 2 && k == 1) {
        rep.exposed_wait_s = 0;
        rep.epoch_restarted = true;
      }
      ASSERT_TRUE(a.add(rep));
    }
    const auto closed = a.close_interval();
    EXPECT_EQ(closed.empty(), k < 2) << k;
    for (auto& e : closed) events.push_back(e);
  }
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].rank, 2u);
  ClusterAnalyzer b(4);
  for (std::uint64_t k = 0; k < 3; ++k) {
    for (std::uint32_t r = 0; r < 4; ++r) {
      auto rep = r == 2 ? report(r, k, 300, k == 1 ? 0 : 6) : report(r, k, 1000, 0.2);
      ASSERT_TRUE(b.add(rep));
    }
    EXPECT_TRUE(b.close_interval().empty()) << k;
  }
}

TEST(ClusterStats, NamesTheWorkerARemoteRankWaitsOnMost) {
  ClusterAnalyzer a(2);
  for (std::uint64_t k = 0; k < 2; ++k) {
    auto slow = report(1, k, 200, 7);
    slow.workers = {{.name = "10.0.0.5:7000", .samples = 100, .busy_s = 9, .waited_s = 6},
                    {.name = "10.0.0.6:7000", .samples = 100, .busy_s = 2, .waited_s = 1}};
    ASSERT_TRUE(a.add(report(0, k, 1000, 0.1)));
    ASSERT_TRUE(a.add(slow));
    auto events = a.close_interval();
    if (k == 1) {
      ASSERT_EQ(events.size(), 1u);
      EXPECT_EQ(events[0].worker, "10.0.0.5:7000");
      EXPECT_NE(events[0].message.find("waiting on worker 10.0.0.5:7000"), std::string::npos);
    }
  }
  // Demand: 1000 / 9.9 + 200 / 3 samples/s; workers: 200 samples in 11 busy s.
  EXPECT_EQ(a.figures().recommended_workers,
            static_cast<std::uint32_t>(std::ceil((1000 / 9.9 + 200 / 3.0) / (200 / 11.0))));
}

TEST(ClusterStats, AHungConsumerIsNotConsumingNotAStraggler) {
  ClusterAnalyzer a(4, {.hang_after_s = 30});
  std::vector<ClusterEvent> all;
  for (std::uint64_t k = 0; k < 4; ++k) {
    for (std::uint32_t r = 0; r < 4; ++r) {
      auto rep = report(r, k, 1000, 0.2);
      if (r == 3) {
        rep.samples = 0;
        rep.exposed_wait_s = 0;
        rep.pipeline_full = true;
        rep.since_last_request_s = 10.0 * (k + 1);
      }
      ASSERT_TRUE(a.add(rep));
    }
    for (auto& e : a.close_interval()) all.push_back(std::move(e));
  }
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].kind, ClusterEventKind::not_consuming);
  EXPECT_EQ(all[0].rank, 3u);
  EXPECT_EQ(all[0].last_sample_id, 1003u);
}

TEST(ClusterStats, ARankThatStopsReportingIsSilent) {
  ClusterAnalyzer a(2, {.silent_after = 2});
  std::vector<ClusterEvent> all;
  for (std::uint64_t k = 0; k < 4; ++k) {
    ASSERT_TRUE(a.add(report(0, k, 1000, 0.1)));
    if (k == 0) {
      ASSERT_TRUE(a.add(report(1, k, 1000, 0.1)));
    }
    for (auto& e : a.close_interval()) all.push_back(std::move(e));
  }
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].kind, ClusterEventKind::silent);
  EXPECT_EQ(all[0].rank, 1u);
  EXPECT_FALSE(a.figures().ranks[1].reported);
}

TEST(ClusterStats, TheSlowestChangingEveryIntervalIsReportedOnce) {
  ClusterAnalyzer a(3);
  std::vector<ClusterEvent> all;
  for (std::uint64_t k = 0; k < 6; ++k) {
    for (std::uint32_t r = 0; r < 3; ++r) {
      const bool slowest = r == k % 3;
      ASSERT_TRUE(a.add(report(r, k, slowest ? 900 : 1000, 3)));  // all wait 30%
    }
    for (auto& e : a.close_interval()) all.push_back(std::move(e));
  }
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].kind, ClusterEventKind::slowest_keeps_changing);
  EXPECT_FALSE(all[0].rank.has_value());
}

TEST(ClusterStats, RefusesReplayedForeignAndMalformedReports) {
  ClusterAnalyzer a(2);
  EXPECT_TRUE(a.add(report(0, 5, 1000, 0.1)));
  EXPECT_FALSE(a.add(report(0, 5, 10, 9)));  // replayed
  EXPECT_FALSE(a.add(report(0, 4, 10, 9)));  // out of order
  EXPECT_FALSE(a.add(report(7, 0, 10, 9)));  // no such rank
  auto bad = report(1, 0, 10, 11);           // waited longer than the interval
  EXPECT_FALSE(a.add(bad));
  bad = report(1, 0, 10, 1);
  bad.interval_s = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(a.add(bad));
  bad = report(1, 0, 10, 1);
  bad.stages[1].p50_ms = -3;
  EXPECT_FALSE(a.add(bad));
  EXPECT_EQ(a.figures().refused_reports, 6u);
  a.close_interval();
  EXPECT_DOUBLE_EQ(a.figures().ranks[0].samples_per_s, 100);  // the first report's
}

TEST(ClusterStats, TheScoreIsAgainstTheMedianOfTheOthersNotTheFastest) {
  // Rank 3 runs twice as fast (less contention on its node); rank 1 is 20% below the
  // rest. Against the fastest rank 1 would score 0.4 and be named; against the others'
  // median (1000) it scores 0.8.
  ClusterAnalyzer a(4);
  std::vector<ClusterEvent> events;
  for (std::uint64_t k = 0; k < 4; ++k) {
    ASSERT_TRUE(a.add(report(0, k, 1000, 2)));
    ASSERT_TRUE(a.add(report(1, k, 800, 2)));
    ASSERT_TRUE(a.add(report(2, k, 1000, 2)));
    ASSERT_TRUE(a.add(report(3, k, 2000, 2)));
    for (auto& e : a.close_interval()) events.push_back(std::move(e));
  }
  EXPECT_TRUE(events.empty());
  EXPECT_DOUBLE_EQ(a.figures().ranks[1].score, 0.8);
  EXPECT_DOUBLE_EQ(a.figures().ranks[3].score, 1.0);  // at most 1
}

TEST(ClusterStats, AnIntervalWithoutAReportKeepsTheSlowCount) {
  // Rank 2's report of the second interval arrived after rank 0 closed it (reporters'
  // phases differ): its third slow report still makes two in a row.
  ClusterAnalyzer a(4);
  EXPECT_TRUE(run(a, 1, 2, 400, 5).empty());
  for (std::uint32_t r : {0u, 1u, 3u}) ASSERT_TRUE(a.add(report(r, 1, 1000, 0.2)));
  EXPECT_TRUE(a.close_interval().empty());
  const auto events = run(a, 1, 2, 400, 5, 10, 2);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].rank, 2u);
}

TEST(ClusterStats, PrometheusTextNamesRanksAndEscapesLabels) {
  ClusterAnalyzer a(2);
  auto r = report(1, 0, 500, 1);
  r.host = "we\"ird\\host";
  ASSERT_TRUE(a.add(report(0, 0, 1000, 0.1)));
  ASSERT_TRUE(a.add(r));
  a.close_interval();
  const auto text = prometheus_text(a.figures());
  EXPECT_NE(text.find("# TYPE brigade_rank_samples_per_second gauge"), std::string::npos);
  EXPECT_NE(text.find("brigade_rank_samples_per_second{rank=\"0\",host=\"node0\"} 100\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("brigade_rank_score{rank=\"1\",host=\"we\\\"ird\\\\host\"} 0.5\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("brigade_refused_reports_total 0\n"), std::string::npos);
}

// A worker node's report of one 10 s interval: `tasks` served, split over `trainers`.
WorkerNodeReport node(std::string name, std::uint64_t sequence, std::uint64_t tasks,
                      std::vector<TrainerServed> trainers = {}, double p50_ms = 50) {
  return {.name = std::move(name),
          .host = "workerhost",
          .incarnation = 7,
          .sequence = sequence,
          .interval_s = 10,
          .threads = 4,
          .tasks = tasks,
          .busy_s = 20,
          .task_p50_ms = p50_ms,
          .task_p99_ms = 2 * p50_ms,
          .queued = 5,
          .running = 4,
          .cpu_s = 30,
          .trainers = std::move(trainers)};
}

TEST(ClusterStats, WorkerNodesAreShownWithTheTasksTheyServedEachRank) {
  ClusterAnalyzer a(2);
  ASSERT_TRUE(a.add(report(0, 0, 1000, 0.1)));
  ASSERT_TRUE(a.add(report(1, 0, 1000, 0.1)));
  ASSERT_TRUE(a.add_worker(node("10.0.0.5:7000", 1, 400,
                                {{.name = "rank 0 of 2 (pid 1)", .rank = 0, .tasks = 300},
                                 {.name = "rank 1 of 2 (pid 2)", .rank = 1, .tasks = 100}})));
  ASSERT_TRUE(a.add_worker(node("10.0.0.6:7000", 1, 40)));
  a.close_interval();
  const auto& w = a.figures().workers;
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].name, "10.0.0.5:7000");
  EXPECT_DOUBLE_EQ(w[0].tasks_per_s, 40);
  EXPECT_DOUBLE_EQ(w[0].busy_share, 0.5);  // 20 s of 4 threads × 10 s
  EXPECT_DOUBLE_EQ(w[0].cpu_share, 0.75);  // 30 s of 40
  EXPECT_EQ(w[0].queued, 5u);
  ASSERT_EQ(w[0].trainers.size(), 2u);
  EXPECT_EQ(w[0].trainers[1].rank, 1u);
  EXPECT_EQ(w[0].trainers[1].tasks, 100u);
  const auto text = prometheus_text(a.figures());
  EXPECT_NE(text.find("brigade_worker_node_tasks_per_second{worker=\"10.0.0.5:7000\","
                      "host=\"workerhost\"} 40\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("brigade_worker_node_tasks_per_rank{worker=\"10.0.0.5:7000\",rank=\"1\"} "
                      "100\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("brigade_worker_node_queued_tasks{worker=\"10.0.0.6:7000\""),
            std::string::npos);
  // A worker that stops reporting leaves the figures after silent_after intervals.
  for (int k = 1; k <= 3; ++k) {
    ASSERT_TRUE(a.add_worker(node("10.0.0.5:7000", 1 + k, 400)));
    a.close_interval();
  }
  ASSERT_EQ(a.figures().workers.size(), 1u);
  EXPECT_EQ(a.figures().workers[0].name, "10.0.0.5:7000");
}

TEST(ClusterStats, AStragglersEventNamesTheWorkerWithItsOwnFigures) {
  ClusterAnalyzer a(3);
  for (std::uint64_t k = 0; k < 2; ++k) {
    for (std::uint32_t r = 0; r < 3; ++r) {
      auto rep = r == 2 ? report(r, k, 300, 6) : report(r, k, 1000, 0.1);
      rep.workers = {{.name = fmt_worker(r), .waited_s = r == 2 ? 40.0 : 5.0, .tasks = 30}};
      ASSERT_TRUE(a.add(rep));
      ASSERT_TRUE(a.add_worker(node(fmt_worker(r), k + 1, 30, {}, r == 2 ? 900 : 50)));
    }
    const auto events = a.close_interval();
    if (k == 0) {
      EXPECT_TRUE(events.empty());
      continue;
    }
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].rank, 2u);
    EXPECT_EQ(events[0].worker, "127.0.0.1:9002");
    EXPECT_NE(events[0].message.find("waiting on worker 127.0.0.1:9002 (its tasks p50 900.0 ms"),
              std::string::npos)
        << events[0].message;
  }
}

TEST(ClusterStats, RefusesReplayedMalformedAndExcessWorkerReports) {
  ClusterAnalyzer a(1, {.max_workers = 2});
  ASSERT_TRUE(a.add_worker(node("w:1", 5, 10)));
  EXPECT_FALSE(a.add_worker(node("w:1", 5, 10)));  // replayed
  EXPECT_FALSE(a.add_worker(node("w:1", 4, 10)));  // out of order
  auto restarted = node("w:1", 1, 10);
  restarted.incarnation = 8;  // a new process of the same name starts anew
  EXPECT_TRUE(a.add_worker(restarted));
  auto bad = node("w:2", 1, 10);
  bad.busy_s = std::numeric_limits<double>::infinity();
  EXPECT_FALSE(a.add_worker(bad));
  auto nameless = node("", 1, 10);
  EXPECT_FALSE(a.add_worker(nameless));
  EXPECT_TRUE(a.add_worker(node("w:2", 1, 10)));
  EXPECT_FALSE(a.add_worker(node("w:3", 1, 10)));  // beyond max_workers
  a.close_interval();
  EXPECT_EQ(a.figures().refused_reports, 5u);
  EXPECT_EQ(a.figures().workers.size(), 2u);
}

TEST(ClusterStats, RecommendedWorkersComeFromTheNodesCapacity) {
  ClusterAnalyzer a(2);
  // Each rank accepted 100 tasks in 10 s and waited 5 s: 20 tasks/s each with data
  // always ready, 40 in all; a node does 30 tasks in 20 busy s on 4 threads: 6 tasks/s.
  for (std::uint32_t r = 0; r < 2; ++r) {
    auto rep = report(r, 0, 1000, 5);
    rep.workers = {{.name = "w:1", .waited_s = 50, .tasks = 100}};
    ASSERT_TRUE(a.add(rep));
  }
  ASSERT_TRUE(a.add_worker(node("w:1", 1, 30)));
  a.close_interval();
  EXPECT_EQ(a.figures().recommended_workers, 7u);  // ceil(40 / 6)
}

// THE GRID and DETECTION LATENCY (cluster_stats.h), as rank 0 drives the analyzer
// (launch/run_statistics.h): it closes grid interval n once complete(n).
RankReport on_grid(std::uint32_t rank, std::uint64_t index, bool slow) {
  auto r = slow ? report(rank, index, 400, 5, 40) : report(rank, index, 1000, 0.2);
  r.interval_index = index;
  return r;
}

TEST(ClusterStats, ARankSlowedFromIntervalTIsNamedAtTheCloseOfTPlusOne) {
  ClusterAnalyzer a(4, {.warmup = 2});  // rank 0's options
  constexpr std::uint64_t t = 1003;     // slowed from interval t on; 1000, 1001 warm-up
  std::vector<std::pair<std::uint64_t, ClusterEvent>> named;
  for (std::uint64_t n = 1000; n <= t + 3; ++n) {
    // Ranks 0, 1, 3 report n; rank 2's report of n arrives after rank 1's report of n + 1
    // (a report ahead of the close: it waits for its own interval's close).
    for (std::uint32_t r : {0u, 3u}) ASSERT_TRUE(a.add(on_grid(r, n, false)));
    if (n == 1000) {
      ASSERT_TRUE(a.add(on_grid(1, n, false)));
    }
    EXPECT_FALSE(a.complete(n)) << n;  // rank 2's report of n is still out
    ASSERT_TRUE(a.add(on_grid(1, n + 1, false)));
    ASSERT_TRUE(a.add(on_grid(2, n, n >= t)));
    ASSERT_TRUE(a.complete(n)) << n;
    for (auto& e : a.close_interval(n)) named.emplace_back(n, std::move(e));
    EXPECT_TRUE(a.figures().ranks[1].reported);
    EXPECT_DOUBLE_EQ(a.figures().ranks[1].samples_per_s, 100);  // its report of n, not n + 1
  }
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0].first, t + 1);  // K = 2: at the close of t + 1
  EXPECT_EQ(named[0].second.kind, ClusterEventKind::straggler);
  EXPECT_EQ(named[0].second.rank, 2u);
  EXPECT_EQ(named[0].second.stage, "decode");
}

TEST(ClusterStats, AReportLaterThanItsCloseCountsInTheNextUnlessItsOwnArrives) {
  ClusterAnalyzer a(2);
  ASSERT_TRUE(a.add(on_grid(0, 10, false)));
  EXPECT_FALSE(a.complete(10));
  a.close_interval(10);  // the grace ended without rank 1's report
  EXPECT_FALSE(a.figures().ranks[1].reported);
  auto late = on_grid(1, 10, true);  // rank 1's report of 10, after 10 closed
  ASSERT_TRUE(a.add(late));
  ASSERT_TRUE(a.add(on_grid(0, 11, false)));
  EXPECT_FALSE(a.complete(11));  // a report of 10 is not one of 11
  a.close_interval(11);
  EXPECT_DOUBLE_EQ(a.figures().ranks[1].samples_per_s, 40);  // the late one counted in 11
  ASSERT_TRUE(a.add(on_grid(1, 12, true)));
  ASSERT_TRUE(a.add(on_grid(0, 12, false)));
  late = on_grid(1, 13, false);
  late.sequence = 13;
  ASSERT_TRUE(a.add(late));
  a.close_interval(12);
  EXPECT_DOUBLE_EQ(a.figures().ranks[1].samples_per_s, 40);  // 12's, 13's waits
  ASSERT_TRUE(a.add(on_grid(0, 13, false)));
  EXPECT_TRUE(a.complete(13));
  a.close_interval(13);
  EXPECT_DOUBLE_EQ(a.figures().ranks[1].samples_per_s, 100);
}

TEST(ClusterStats, ASilentRankIsNeitherWaitedForNorAStraggler) {
  ClusterAnalyzer a(3, {.silent_after = 2});
  std::vector<ClusterEvent> all;
  for (std::uint64_t n = 1; n <= 6; ++n) {
    ASSERT_TRUE(a.add(on_grid(0, n, false)));
    ASSERT_TRUE(a.add(on_grid(1, n, false)));
    // Rank 2 is slow in 1 and 2, then stops reporting (its process stopped for good).
    if (n <= 2) {
      ASSERT_TRUE(a.add(on_grid(2, n, true)));
    }
    // Waited for until it is named silent, at the close of 4.
    EXPECT_EQ(a.complete(n), n <= 2 || n > 4) << n;
    for (auto& e : a.close_interval(n)) all.push_back(std::move(e));
  }
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].kind, ClusterEventKind::straggler);  // named at 2: it was slow
  EXPECT_EQ(all[1].kind, ClusterEventKind::silent);
  EXPECT_EQ(all[1].rank, 2u);
  EXPECT_TRUE(a.figures().ranks[2].silent);
  EXPECT_NE(prometheus_text(a.figures()).find("brigade_rank_silent{rank=\"2\"} 1\n"),
            std::string::npos);
}

TEST(ClusterStats, AWorkerNodeThatStopsReportingIsNamedSilentOnceUntilItReturns) {
  ClusterAnalyzer a(1, {.silent_after = 3});
  std::vector<ClusterEvent> all;
  std::uint64_t sequence = 0;
  const auto interval = [&](bool worker_reports) {
    ASSERT_TRUE(a.add(report(0, sequence, 1000, 0.1)));
    if (worker_reports) {
      ASSERT_TRUE(a.add_worker(node("10.0.0.5:7000", sequence, 40)));
    }
    ++sequence;
    for (auto& e : a.close_interval()) all.push_back(std::move(e));
  };
  interval(true);
  for (int k = 0; k < 2; ++k) interval(false);
  EXPECT_TRUE(all.empty());  // 2 intervals without: not yet
  interval(false);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].kind, ClusterEventKind::silent);
  EXPECT_FALSE(all[0].rank.has_value());
  EXPECT_EQ(all[0].worker, "10.0.0.5:7000");
  EXPECT_EQ(all[0].host, "workerhost");
  EXPECT_NE(all[0].message.find("worker 10.0.0.5:7000 (workerhost) silent"), std::string::npos)
      << all[0].message;
  EXPECT_TRUE(a.figures().workers.empty());
  EXPECT_EQ(a.figures().silent_workers.count("10.0.0.5:7000"), 1u);
  EXPECT_NE(
      prometheus_text(a.figures())
          .find("brigade_worker_node_silent{worker=\"10.0.0.5:7000\",host=\"workerhost\"} 1\n"),
      std::string::npos);
  for (int k = 0; k < 3; ++k) interval(false);
  EXPECT_EQ(all.size(), 1u);  // named once
  interval(true);             // it reports again: shown, no longer silent
  EXPECT_TRUE(a.figures().silent_workers.empty());
  ASSERT_EQ(a.figures().workers.size(), 1u);
  for (int k = 0; k < 3; ++k) interval(false);
  ASSERT_EQ(all.size(), 2u);  // silent again: named again
  EXPECT_EQ(all[1].worker, "10.0.0.5:7000");
}

}  // namespace
}  // namespace brigade::launch
