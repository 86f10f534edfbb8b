// A rank's statistics report: the reporter's figures from the engine's (on a manual
// clock, interval by interval) and the codec against valid, mutated and hostile bytes
// (run under AddressSanitizer by scripts/test.sh).
#include "launch/loader/stats_report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <utility>

#include "launch/loader/stats_reporter.h"
#include "tests/transport/wire/mutations.h"
#include "transport/remote/remote.h"

namespace brigade::launch {
namespace {

using namespace std::chrono_literals;
using transport::RemoteError;

actors::StageStats stage(std::string name, std::uint64_t tasks, double mean_ms, double elapsed_s,
                         double occupancy, double backpressured_s = 0) {
  return {.name = std::move(name),
          .kind = "pipe",
          .concurrency = 2,
          .capacity = 4,
          .tasks = tasks,
          .outputs = tasks,
          .mean_ms = mean_ms,
          .p50_ms = mean_ms,
          .p90_ms = mean_ms * 2,
          .p99_ms = mean_ms * 3,
          .backpressured_s = backpressured_s,
          .occupancy = occupancy,
          .elapsed_s = elapsed_s};
}

RankReport full_report() {
  RankReport r{.rank = 3,
               .host = "node-3",
               .sequence = 17,
               .interval_s = 10,
               .at_s = 170,
               .samples = 640,
               .samples_total = 10880,
               .batches = 20,
               .exposed_wait_s = 2.5,
               .exposed_wait_total_s = 40,
               .readiness = 0.75,
               .since_last_request_s = 0,
               .pipeline_full = true,
               .last_sample_id = 123456789,
               .epoch_restarted = true,
               .stages = {stage("read", 640, 1.5, 10, 0.5), stage("decode", 640, 20, 10, 1, 3)},
               .stage_totals = {stage("read", 10880, 1.4, 170, 0.4)},
               .workers = {{.name = "10.0.0.7:4000", .samples = 320, .busy_s = 4, .waited_s = 1}},
               .interval_index = 176400123};
  r.stages[1].failures = 2;
  r.stages[1].retries = 1;
  r.stages[1].filtered = 3;
  r.stages[1].starved_s = 0.25;
  r.stages[1].items_per_s = 64;
  return r;
}

void expect_same(const actors::StageStats& a, const actors::StageStats& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.concurrency, b.concurrency);
  EXPECT_EQ(a.capacity, b.capacity);
  EXPECT_EQ(a.tasks, b.tasks);
  EXPECT_EQ(a.failures, b.failures);
  EXPECT_EQ(a.filtered, b.filtered);
  EXPECT_EQ(a.retries, b.retries);
  EXPECT_EQ(a.outputs, b.outputs);
  EXPECT_EQ(a.mean_ms, b.mean_ms);
  EXPECT_EQ(a.p50_ms, b.p50_ms);
  EXPECT_EQ(a.p90_ms, b.p90_ms);
  EXPECT_EQ(a.p99_ms, b.p99_ms);
  EXPECT_EQ(a.starved_s, b.starved_s);
  EXPECT_EQ(a.backpressured_s, b.backpressured_s);
  EXPECT_EQ(a.occupancy, b.occupancy);
  EXPECT_EQ(a.items_per_s, b.items_per_s);
  EXPECT_EQ(a.elapsed_s, b.elapsed_s);
}

TEST(StatsReport, RoundTripsEveryField) {
  const auto r = full_report();
  const auto bytes = write_stats_report(r);
  const auto back = read_stats_report(bytes);
  EXPECT_EQ(back.rank, r.rank);
  EXPECT_EQ(back.host, r.host);
  EXPECT_EQ(back.sequence, r.sequence);
  EXPECT_EQ(back.interval_s, r.interval_s);
  EXPECT_EQ(back.at_s, r.at_s);
  EXPECT_EQ(back.samples, r.samples);
  EXPECT_EQ(back.samples_total, r.samples_total);
  EXPECT_EQ(back.batches, r.batches);
  EXPECT_EQ(back.exposed_wait_s, r.exposed_wait_s);
  EXPECT_EQ(back.exposed_wait_total_s, r.exposed_wait_total_s);
  EXPECT_EQ(back.readiness, r.readiness);
  EXPECT_EQ(back.since_last_request_s, r.since_last_request_s);
  EXPECT_EQ(back.pipeline_full, r.pipeline_full);
  EXPECT_EQ(back.last_sample_id, r.last_sample_id);
  EXPECT_EQ(back.epoch_restarted, r.epoch_restarted);
  EXPECT_EQ(back.interval_index, r.interval_index);
  ASSERT_EQ(back.stages.size(), 2u);
  expect_same(back.stages[0], r.stages[0]);
  expect_same(back.stages[1], r.stages[1]);
  ASSERT_EQ(back.stage_totals.size(), 1u);
  expect_same(back.stage_totals[0], r.stage_totals[0]);
  ASSERT_EQ(back.workers.size(), 1u);
  EXPECT_EQ(back.workers[0].name, r.workers[0].name);
  EXPECT_EQ(back.workers[0].samples, r.workers[0].samples);
  EXPECT_EQ(back.workers[0].busy_s, r.workers[0].busy_s);
  EXPECT_EQ(back.workers[0].waited_s, r.workers[0].waited_s);
}

TEST(StatsReport, RefusesFiguresNoIntervalHolds) {
  auto nan = full_report();
  nan.exposed_wait_s = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(read_stats_report(write_stats_report(nan)), RemoteError);
  auto negative = full_report();
  negative.stages[0].occupancy = -1;
  EXPECT_THROW(read_stats_report(write_stats_report(negative)), RemoteError);
  auto many = full_report();
  many.stages.resize(65, many.stages[0]);
  EXPECT_THROW(read_stats_report(write_stats_report(many)), RemoteError);
  auto long_host = full_report();
  long_host.host.assign(257, 'h');
  EXPECT_THROW(read_stats_report(write_stats_report(long_host)), RemoteError);
  EXPECT_THROW(read_stats_report({}), RemoteError);
}

TEST(StatsReport, MutatedBytesGiveAReportOrARemoteError) {
  const auto valid = write_stats_report(full_report());
  std::mt19937 random(24);
  int rejected = 0, read = 0;
  for (int round = 0; round < 2000; ++round) {
    const auto bytes = transport::test::mutated(valid, round, random);
    try {
      const auto r = read_stats_report(bytes);
      // What it returns holds what the reader promised.
      EXPECT_LE(r.host.size(), 256u);
      EXPECT_LE(r.stages.size(), 64u);
      EXPECT_TRUE(std::isfinite(r.interval_s) && r.interval_s >= 0);
      for (const auto& s : r.stages) EXPECT_TRUE(std::isfinite(s.occupancy) && s.occupancy >= 0);
      ++read;
    } catch (const RemoteError&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
  EXPECT_GT(read, 0);
}

// -- the reporter ------------------------------------------------------------------

struct Script {
  RankSample now{};
  int sampled = 0;
};

actors::PipelineStats engine(double elapsed_s, std::uint64_t tasks, double mean_ms,
                             double occupancy, std::uint64_t requests, std::uint64_t ready,
                             double wait_s, double backpressured_s = 0) {
  actors::PipelineStats p;
  p.elapsed_s = elapsed_s;
  p.stages = {stage("read", tasks, 1, elapsed_s, 0.25),
              stage("decode", tasks, mean_ms, elapsed_s, occupancy, backpressured_s)};
  p.sink.requests = requests;
  p.sink.ready = ready;
  p.sink.delivered = requests;
  p.sink.consumer_wait_s = wait_s;
  return p;
}

struct Fixture {
  std::shared_ptr<actors::ManualClock> clock = std::make_shared<actors::ManualClock>();
  Script script;
  std::vector<RankReport> reports;
  StatsReporter reporter{[this] {
                           ++script.sampled;
                           return script.now;
                         },
                         [this](const RankReport& r) { reports.push_back(r); },
                         {.interval_s = 2, .rank = 1, .host = "node-1", .clock = clock}};
};

TEST(StatsReporter, ReportsEachIntervalWithItsDeltas) {
  Fixture f;
  f.script.now = {.stats = engine(1, 10, 4, 0.5, 10, 5, 0.5),
                  .samples = 320,
                  .batches = 10,
                  .last_sample_id = 9};
  f.clock->advance(1999ms);
  EXPECT_FALSE(f.reporter.poll());  // not an interval yet
  f.clock->advance(1ms);
  ASSERT_TRUE(f.reporter.poll());
  ASSERT_EQ(f.reports.size(), 1u);
  // The first interval: everything since the engine started (the construction's sample
  // had no run).
  EXPECT_EQ(f.reports[0].sequence, 1u);
  EXPECT_EQ(f.reports[0].samples, 320u);
  EXPECT_DOUBLE_EQ(f.reports[0].exposed_wait_s, 0.5);

  // The second: tasks 10 → 30 at a mean of 4 ms then 10 ms over the 30 → the interval's
  // 20 took 13 ms each; occupancy 0.5 over 1 s then 0.8 over 3 s → 0.95 over those 2 s.
  f.script.now = {.stats = engine(3, 30, 10, 0.8, 26, 21, 1.25),
                  .samples = 832,
                  .batches = 26,
                  .last_sample_id = 40};
  f.clock->advance(2500ms);
  ASSERT_TRUE(f.reporter.poll());
  const auto& r = f.reports.at(1);
  EXPECT_EQ(r.rank, 1u);
  EXPECT_EQ(r.host, "node-1");
  EXPECT_EQ(r.sequence, 2u);
  EXPECT_DOUBLE_EQ(r.interval_s, 2.5);
  EXPECT_DOUBLE_EQ(r.at_s, 4.5);
  EXPECT_EQ(r.samples, 512u);
  EXPECT_EQ(r.samples_total, 832u);
  EXPECT_EQ(r.batches, 16u);
  EXPECT_DOUBLE_EQ(r.exposed_wait_s, 0.75);
  EXPECT_DOUBLE_EQ(r.exposed_wait_total_s, 1.25);
  EXPECT_DOUBLE_EQ(r.readiness, 1.0);  // 16 requests, 16 ready
  EXPECT_FALSE(r.epoch_restarted);
  EXPECT_EQ(r.last_sample_id, 40u);
  ASSERT_EQ(r.stages.size(), 2u);
  EXPECT_EQ(r.stages[1].tasks, 20u);
  EXPECT_DOUBLE_EQ(r.stages[1].mean_ms, 13);
  EXPECT_DOUBLE_EQ(r.stages[1].occupancy, 0.95);
  EXPECT_DOUBLE_EQ(r.stages[1].items_per_s, 8);
  EXPECT_EQ(r.stage_totals.at(1).tasks, 30u);  // the epoch's
  EXPECT_FALSE(r.pipeline_full);
}

TEST(StatsReporter, ANewEpochRestartsTheDeltas) {
  Fixture f;
  f.script.now = {.stats = engine(8, 80, 5, 0.5, 40, 40, 1), .samples = 1000, .batches = 40};
  f.clock->advance(2s);
  ASSERT_TRUE(f.reporter.poll());
  // The engine's figures restart: the next interval counts the new run's from zero.
  f.script.now = {.stats = engine(1, 6, 5, 0.5, 3, 1, 0.25), .samples = 1100, .batches = 44};
  f.clock->advance(2s);
  ASSERT_TRUE(f.reporter.poll());
  const auto& r = f.reports.at(1);
  EXPECT_EQ(r.stages.at(1).tasks, 6u);
  EXPECT_EQ(r.batches, 4u);  // the consumer's count: the last epoch's end included
  EXPECT_DOUBLE_EQ(r.exposed_wait_s, 0.25);
  EXPECT_NEAR(r.readiness, 1.0 / 3, 1e-12);
  EXPECT_EQ(r.samples, 100u);
  EXPECT_DOUBLE_EQ(r.exposed_wait_total_s, 1.25);
  EXPECT_TRUE(r.epoch_restarted);
}

TEST(StatsReporter, AConsumerThatStopsAskingIsTimedAndAFullPipelineSeen) {
  Fixture f;
  f.script.now = {.stats = engine(2, 20, 5, 1, 10, 10, 0)};
  f.clock->advance(2s);
  ASSERT_TRUE(f.reporter.poll());
  EXPECT_EQ(f.reports.back().since_last_request_s, 0);
  // No request since: the last stage backpressured the whole interval (sink full).
  for (int i = 1; i <= 3; ++i) {
    f.script.now.stats = engine(2 + 2 * i, 20, 5, 1, 10, 10, 0, 2.0 * i);
    f.clock->advance(2s);
    ASSERT_TRUE(f.reporter.poll());
    EXPECT_DOUBLE_EQ(f.reports.back().since_last_request_s, 2.0 * i);
    EXPECT_TRUE(f.reports.back().pipeline_full);
  }
  // It asks again.
  f.script.now.stats = engine(10, 24, 5, 1, 12, 12, 0, 6);
  f.clock->advance(2s);
  ASSERT_TRUE(f.reporter.poll());
  EXPECT_EQ(f.reports.back().since_last_request_s, 0);
  EXPECT_FALSE(f.reports.back().pipeline_full);
}

TEST(StatsReporter, StopReportsTheIntervalInProgressOnce) {
  Fixture f;
  f.reporter.start();
  f.script.now = {.stats = engine(1, 4, 5, 0.5, 2, 2, 0), .samples = 64};
  f.clock->advance(700ms);  // less than an interval: only stop() reports it
  f.reporter.stop();
  f.reporter.stop();
  ASSERT_EQ(f.reports.size(), 1u);
  EXPECT_DOUBLE_EQ(f.reports[0].interval_s, 0.7);
  EXPECT_EQ(f.reports[0].samples, 64u);
  EXPECT_FALSE(f.reporter.flush());  // no time passed since
}

TEST(StatsReporter, AWorkersFiguresAreTheIntervalsDeltasByName) {
  Fixture f;
  f.script.now = {.stats = engine(2, 20, 5, 1, 10, 10, 0),
                  .workers = {{.name = "w:1", .waited_s = 3, .tasks = 10},
                              {.name = "w:2", .waited_s = 1, .tasks = 4}}};
  f.clock->advance(2s);
  ASSERT_TRUE(f.reporter.poll());
  f.script.now.stats = engine(4, 40, 5, 1, 20, 20, 0);
  f.script.now.workers = {{.name = "w:1", .waited_s = 7.5, .tasks = 25},
                          {.name = "w:2", .waited_s = 1, .tasks = 4},  // no task since
                          {.name = "w:3", .waited_s = 0.5, .tasks = 2}};
  f.clock->advance(2s);
  ASSERT_TRUE(f.reporter.poll());
  const auto& w = f.reports.at(1).workers;
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].name, "w:1");
  EXPECT_EQ(w[0].tasks, 15u);
  EXPECT_DOUBLE_EQ(w[0].waited_s, 4.5);
  EXPECT_EQ(w[1].name, "w:3");  // new: all of it
  EXPECT_EQ(w[1].tasks, 2u);
}

// -- a worker node's report ------------------------------------------------------------

WorkerNodeReport full_worker_report() {
  return {.name = "10.0.0.7:4000",
          .host = "gpu-node-7",
          .incarnation = 0x1234567890abcdefull,
          .sequence = 9,
          .interval_s = 10,
          .at_s = 90,
          .threads = 8,
          .tasks = 400,
          .failed = 1,
          .busy_s = 70,
          .task_p50_ms = 150,
          .task_p99_ms = 420,
          .queued = 12,
          .running = 8,
          .cpu_s = 65,
          .trainers = {{.name = "rank 3 of 4 (pid 77)", .tasks = 300, .busy_s = 50},
                       {.name = "a notebook", .tasks = 100, .busy_s = 20}},
          .interval_index = 88200061};
}

TEST(WorkerReport, RoundTripsEveryFieldAndReadsTheRankFromTheTrainersName) {
  const auto r = full_worker_report();
  const auto back = read_worker_report(write_worker_report(r));
  EXPECT_EQ(back.name, r.name);
  EXPECT_EQ(back.host, r.host);
  EXPECT_EQ(back.incarnation, r.incarnation);
  EXPECT_EQ(back.sequence, r.sequence);
  EXPECT_EQ(back.interval_s, r.interval_s);
  EXPECT_EQ(back.at_s, r.at_s);
  EXPECT_EQ(back.threads, r.threads);
  EXPECT_EQ(back.tasks, r.tasks);
  EXPECT_EQ(back.failed, r.failed);
  EXPECT_EQ(back.busy_s, r.busy_s);
  EXPECT_EQ(back.task_p50_ms, r.task_p50_ms);
  EXPECT_EQ(back.task_p99_ms, r.task_p99_ms);
  EXPECT_EQ(back.queued, r.queued);
  EXPECT_EQ(back.running, r.running);
  EXPECT_EQ(back.cpu_s, r.cpu_s);
  EXPECT_EQ(back.interval_index, r.interval_index);
  ASSERT_EQ(back.trainers.size(), 2u);
  EXPECT_EQ(back.trainers[0].name, "rank 3 of 4 (pid 77)");
  EXPECT_EQ(back.trainers[0].rank, 3u);
  EXPECT_EQ(back.trainers[0].tasks, 300u);
  EXPECT_EQ(back.trainers[0].busy_s, 50);
  EXPECT_EQ(back.trainers[1].rank, std::nullopt);
  EXPECT_EQ(rank_of_trainer("rank 12 of 16 (pid 1)"), 12u);
  EXPECT_EQ(rank_of_trainer("rank x of 16"), std::nullopt);
  EXPECT_EQ(rank_of_trainer("rank 1"), std::nullopt);
  EXPECT_EQ(rank_of_trainer("rank 99999999999 of 2"), std::nullopt);  // out of range
}

TEST(WorkerReport, RefusesFiguresNoIntervalHoldsAndMutatedBytesNeverCrash) {
  auto nan = full_worker_report();
  nan.cpu_s = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(read_worker_report(write_worker_report(nan)), RemoteError);
  auto negative = full_worker_report();
  negative.trainers[0].busy_s = -1;
  EXPECT_THROW(read_worker_report(write_worker_report(negative)), RemoteError);
  auto long_name = full_worker_report();
  long_name.trainers[1].name.assign(257, 'n');
  EXPECT_THROW(read_worker_report(write_worker_report(long_name)), RemoteError);
  EXPECT_THROW(read_worker_report({}), RemoteError);
  const auto valid = write_worker_report(full_worker_report());
  std::mt19937 random(25);
  int rejected = 0, read = 0;
  for (int round = 0; round < 2000; ++round) {
    const auto bytes = transport::test::mutated(valid, round, random);
    try {
      const auto r = read_worker_report(bytes);
      EXPECT_LE(r.name.size(), 256u);
      EXPECT_LE(r.trainers.size(), 4096u);
      EXPECT_TRUE(std::isfinite(r.busy_s) && r.busy_s >= 0);
      ++read;
    } catch (const RemoteError&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
  EXPECT_GT(read, 0);
}

TEST(WorkerStatsReporter, ReportsWhatTheWorkerServedEachIntervalWithItsCpu) {
  auto clock = std::make_shared<actors::ManualClock>();
  transport::WorkerServed next{};
  double cpu = 5;
  std::vector<WorkerNodeReport> reports;
  WorkerStatsReporter reporter(
      [&] { return std::exchange(next, {}); },
      [&](const WorkerNodeReport& r) { reports.push_back(r); },
      {.interval_s = 1, .name = "127.0.0.1:4000", .host = "w", .clock = clock, .cpu_seconds = [&] {
         return cpu;
       }});
  next = {.trainers = {{.name = "rank 1 of 2 (pid 5)", .tasks = 6, .busy_s = 0.6}},
          .tasks = 6,
          .busy_s = 0.6,
          .p50_ms = 100,
          .p99_ms = 180,
          .queued = 3,
          .running = 1,
          .threads = 2};
  cpu = 5.75;
  clock->advance(999ms);
  EXPECT_FALSE(reporter.poll());
  clock->advance(1ms);
  ASSERT_TRUE(reporter.poll());
  ASSERT_EQ(reports.size(), 1u);
  const auto r = reports[0];  // a copy: the next report reallocates `reports`
  EXPECT_EQ(r.name, "127.0.0.1:4000");
  EXPECT_EQ(r.sequence, 1u);
  EXPECT_DOUBLE_EQ(r.interval_s, 1);
  EXPECT_EQ(r.tasks, 6u);
  EXPECT_DOUBLE_EQ(r.cpu_s, 0.75);
  EXPECT_EQ(r.queued, 3u);
  EXPECT_EQ(r.threads, 2u);
  ASSERT_EQ(r.trainers.size(), 1u);
  EXPECT_EQ(r.trainers[0].rank, 1u);
  // The next interval: nothing served; stop() reports the part in progress, once.
  cpu = 6;
  clock->advance(400ms);
  reporter.stop();
  reporter.stop();
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[1].sequence, 2u);
  EXPECT_EQ(reports[1].incarnation, r.incarnation);
  EXPECT_DOUBLE_EQ(reports[1].interval_s, 0.4);
  EXPECT_EQ(reports[1].tasks, 0u);
  EXPECT_DOUBLE_EQ(reports[1].cpu_s, 0.25);
}

TEST(StatsReporter, OnAGridEachReportEndsAGridIntervalWhateverItsStart) {
  // Interval 50 of a 1 s grid started 300 ms before the reporter did.
  auto clock = std::make_shared<actors::ManualClock>();
  const ReportGrid grid{.origin = clock->now() - 300ms, .index = 50};
  std::vector<RankReport> reports;
  StatsReporter reporter([] { return RankSample{}; },
                         [&](const RankReport& r) { reports.push_back(r); },
                         {.interval_s = 1, .rank = 2, .clock = clock, .grid = grid});
  clock->advance(699ms);
  EXPECT_FALSE(reporter.poll());
  clock->advance(1ms);  // the end of 50: the first report covers its last 700 ms
  ASSERT_TRUE(reporter.poll());
  EXPECT_FALSE(reporter.poll());
  clock->advance(1500ms);  // polled late, halfway through 52
  ASSERT_TRUE(reporter.poll());
  clock->advance(400ms);
  EXPECT_FALSE(reporter.poll());  // 52 is still in progress
  clock->advance(100ms);
  ASSERT_TRUE(reporter.poll());
  ASSERT_EQ(reports.size(), 3u);
  EXPECT_EQ(reports[0].interval_index, 50u);
  EXPECT_NEAR(reports[0].interval_s, 0.7, 1e-9);
  EXPECT_EQ(reports[1].interval_index, 51u);  // the last interval ended
  EXPECT_NEAR(reports[1].interval_s, 1.5, 1e-9);
  EXPECT_EQ(reports[2].interval_index, 52u);
  EXPECT_NEAR(reports[2].interval_s, 0.5, 1e-9);
  // A worker node's reporter on the same grid ends the same intervals.
  std::vector<WorkerNodeReport> nodes;
  WorkerStatsReporter worker([] { return transport::WorkerServed{}; },
                             [&](const WorkerNodeReport& r) { nodes.push_back(r); },
                             {.interval_s = 1, .name = "w:1", .clock = clock, .grid = grid});
  clock->advance(999ms);
  EXPECT_FALSE(worker.poll());
  clock->advance(1ms);
  ASSERT_TRUE(worker.poll());
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].interval_index, 53u);
}

TEST(StatsReporter, TheWallClocksGridIsTheMultiplesOfTheIntervalSinceTheUnixEpoch) {
  const auto before =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const auto grid = wall_clock_grid(2, *actors::Clock::steady());
  const auto after =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_GE(grid.index, static_cast<std::uint64_t>(before / 2));
  EXPECT_LE(grid.index, static_cast<std::uint64_t>(after / 2));
  EXPECT_LE(grid.origin, actors::Clock::steady()->now());
}

}  // namespace
}  // namespace brigade::launch
