// bench_stats: what issue 24's statistics cost (one JSON line per measurement).
//
//   bench_stats [--ranks 4096] [--stages 4] [--workers 2] [--intervals 5]
//
// aggregator: rank 0's analyzer (launch/loader/cluster_stats.h) over --ranks generated
//   reports per interval, each read from its bytes first (launch/loader/stats_report.h,
//   as they arrive): cpu_s_per_interval (process CPU, the mean over --intervals; the
//   issue's goal: < 1 s for 4,096 ranks), split into decode and analysis.
// reporter: one rank's cost at the default interval (10 s): cpu_us_per_report (a
//   sample of a real engine pipeline's stats, the interval's report, its JSON line, its
//   Prometheus text and its bytes), cpu_us_per_s_idle (the reporter's thread polling
//   for 3 s with nothing due), and cpu_share = (per_report / 10 s + idle) as a share of
//   one core.
// worker_reporter: a worker node's reporter (`brigade worker --stats`,
//   stats_reporter.h WorkerStatsReporter) with 8 trainers served, its reports sent on a
//   real link to a collector in this process (which reads each): cpu_us_per_report
//   (process CPU, both ends: taking the figures, the process's CPU time, the report,
//   its bytes, the frame, the collector's read), cpu_us_per_s_idle (its thread on the
//   wall clock's grid for 3 s, nothing due), and cpu_share at 10 s and 0.5 s intervals
//   (per_report / interval + idle, of one core).
// link: the statistics link (transport/remote/report_link.h) on loopback, a sender and
//   rank 0's collector in this process: cpu_us_per_report (process CPU, both ends: the
//   frame's HMAC, the write, the collector's read, check and delivery), and
//   cpu_share = per_report / 10 s (the link idles in blocking waits).
#include <time.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "actors/pipeline.h"
#include "launch/loader/stats_report.h"
#include "launch/loader/stats_reporter.h"
#include "launch/stats_output.h"
#include "transport/remote/report_link.h"

namespace {

using namespace brigade;

double cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) / 1e9;
}

launch::RankReport generated(std::uint32_t rank, std::uint64_t k, int stages, int workers,
                             std::mt19937& random) {
  std::uniform_real_distribution<double> jitter(0.9, 1.1);
  const bool slow = rank % 97 == 5 && k >= 2;
  launch::RankReport r{.rank = rank,
                       .host = "node-" + std::to_string(rank / 8),
                       .sequence = k,
                       .interval_s = 10,
                       .at_s = 10.0 * double(k),
                       .samples = std::uint64_t((slow ? 2000 : 8000) * jitter(random)),
                       .exposed_wait_s = slow ? 6 : 0.2 * jitter(random),
                       .readiness = slow ? 0.2 : 0.97};
  const char* names[] = {"source", "read", "decode", "batch", "to_device", "extra"};
  for (int s = 0; s < stages; ++s) {
    r.stages.push_back({.name = names[s % 6],
                        .kind = "pipe",
                        .concurrency = 4,
                        .capacity = 8,
                        .tasks = 250,
                        .outputs = 250,
                        .mean_ms = 5 * jitter(random) * (slow && s == 2 ? 4 : 1),
                        .p50_ms = 5 * jitter(random) * (slow && s == 2 ? 4 : 1),
                        .occupancy = 0.5 * jitter(random),
                        .elapsed_s = 10});
  }
  r.stage_totals = r.stages;
  for (int w = 0; w < workers; ++w) {
    r.workers.push_back({.name = "10.0.0." + std::to_string(w) + ":4000",
                         .samples = 4000,
                         .busy_s = 4 * jitter(random),
                         .waited_s = 0.1});
  }
  return r;
}

void aggregator(std::uint32_t ranks, int stages, int workers, int intervals) {
  std::mt19937 random(1);
  launch::ClusterAnalyzer analyzer(ranks);
  double decode = 0, analysis = 0;
  std::size_t events = 0, bytes_per_report = 0;
  for (int k = 1; k <= intervals; ++k) {
    std::vector<std::vector<char>> wire;
    for (std::uint32_t r = 0; r < ranks; ++r)
      wire.push_back(
          launch::write_stats_report(generated(r, std::uint64_t(k), stages, workers, random)));
    bytes_per_report = wire[0].size();
    const double t0 = cpu_s();
    std::vector<launch::RankReport> reports;
    reports.reserve(ranks);
    for (const auto& b : wire) reports.push_back(launch::read_stats_report(b));
    const double t1 = cpu_s();
    for (const auto& r : reports) analyzer.add(r);
    events += analyzer.close_interval().size();
    const double t2 = cpu_s();
    decode += t1 - t0;
    analysis += t2 - t1;
  }
  std::printf(
      "{\"bench\":\"aggregator\",\"ranks\":%u,\"stages\":%d,\"workers\":%d,\"intervals\":%d,"
      "\"bytes_per_report\":%zu,\"cpu_s_per_interval\":%.4f,\"decode_cpu_s\":%.4f,"
      "\"analysis_cpu_s\":%.4f,\"events\":%zu}\n",
      ranks, stages, workers, intervals, bytes_per_report, (decode + analysis) / intervals,
      decode / intervals, analysis / intervals, events);
}

double thread_cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) / 1e9;
}

// The CPU of one report, sampling a real engine pipeline while it runs (the sampling
// thread's own CPU time); the pipeline and its threads are gone when it returns.
double report_cpu_s(std::size_t& bytes) {
  auto pipeline = actors::PipelineBuilder()
                      .add_source([i = 0]() mutable -> std::optional<int> {
                        if (i >= 400'000) return std::nullopt;
                        return i++;
                      })
                      .pipe([](int x) { return x + 1; }, {.concurrency = 2, .name = "read"})
                      .pipe([](int x) { return x * 2; }, {.concurrency = 2, .name = "decode"})
                      .pipe([](int x) { return x - 1; }, {.name = "batch"})
                      .add_sink(8)
                      .build({.num_threads = 2});
  std::atomic<std::uint64_t> seen{0};
  std::thread consumer([&] {
    for (auto& item : pipeline) {
      (void)item;
      seen.fetch_add(1);
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  constexpr int kReports = 2000;
  launch::RankSample before{.stats = pipeline.stats()};
  const double t0 = thread_cpu_s();
  for (int i = 0; i < kReports; ++i) {
    launch::RankSample now{.stats = pipeline.stats(), .samples = seen.load()};
    auto report = launch::report_between(before, now, 10, 0);
    bytes += launch::stats_json_line(report).size() + launch::prometheus_text(report).size() +
             launch::write_stats_report(report).size();
    before = std::move(now);
  }
  const double per_report = (thread_cpu_s() - t0) / kReports;
  consumer.join();
  bytes /= kReports;
  return per_report;
}

void reporter() {
  std::size_t bytes = 0;
  const double per_report = report_cpu_s(bytes);

  // Idle: the reporter's thread polling with nothing due, nothing else running.
  launch::StatsReporter idle([] { return launch::RankSample{}; }, [](const auto&) {},
                             {.interval_s = 10});
  idle.start();
  const double t2 = cpu_s();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const double idle_per_s = (cpu_s() - t2) / 3;
  idle.stop();
  std::printf(
      "{\"bench\":\"reporter\",\"interval_s\":10,\"cpu_us_per_report\":%.1f,"
      "\"cpu_us_per_s_idle\":%.2f,\"cpu_share\":%.6f,\"output_bytes_per_report\":%zu}\n",
      per_report * 1e6, idle_per_s * 1e6, per_report / 10 + idle_per_s, bytes);
}

// Rank 0's collector on loopback, counting the reports it delivers (each decoded by
// `decode`, as rank 0 does).
class CountingCollector {
 public:
  explicit CountingCollector(void (*decode)(std::span<const char>))
      : collector_({"127.0.0.1", 0}, {.token = "bench-token", .world_size = 2},
                   [this, decode](std::uint32_t, std::uint64_t, std::span<const char> bytes) {
                     decode(bytes);
                     std::lock_guard lock(mutex_);
                     ++delivered_;
                     done_.notify_all();
                   }) {}
  std::uint16_t port() const { return collector_.port(); }
  /// Waits for `count` reports since the last reset (at most `timeout`); returns how many.
  int wait(int count, std::chrono::seconds timeout = std::chrono::seconds(60)) {
    std::unique_lock lock(mutex_);
    done_.wait_for(lock, timeout, [&] { return delivered_ >= count; });
    return delivered_;
  }
  void reset() {
    std::lock_guard lock(mutex_);
    delivered_ = 0;
  }

 private:
  std::mutex mutex_;
  std::condition_variable done_;
  int delivered_ = 0;
  transport::ReportCollector collector_;  // last: its callback uses the members above
};

void link() {
  launch::RankReport report{.rank = 1, .host = "node-1", .interval_s = 10, .samples = 4000};
  for (const char* name : {"read", "decode", "batch", "copy"})
    report.stages.push_back({.name = name, .kind = "pipe", .tasks = 4000, .p50_ms = 2});
  report.stage_totals = report.stages;
  constexpr int kReports = 5000;
  CountingCollector collector([](std::span<const char> b) { (void)launch::read_stats_report(b); });
  transport::ReportSender sender({"127.0.0.1", collector.port()}, "bench-token", 1);
  const auto bytes = launch::write_stats_report(report);
  sender.send(bytes);  // connected before the clock starts
  collector.wait(1);
  collector.reset();
  const double t0 = cpu_s();
  for (int i = 0; i < kReports; ++i) {
    sender.send(launch::write_stats_report(report));
    sender.drain(std::chrono::seconds(10));  // one at a time, as a rank sends them
  }
  const int delivered = collector.wait(kReports);
  const double per_report = (cpu_s() - t0) / kReports;
  std::printf(
      "{\"bench\":\"link\",\"interval_s\":10,\"reports\":%d,\"delivered\":%d,"
      "\"bytes_per_report\":%zu,\"cpu_us_per_report\":%.1f,\"cpu_share\":%.7f}\n",
      kReports, delivered, bytes.size(), per_report * 1e6, per_report / 10);
}

void worker_reporter() {
  constexpr int kReports = 2000;
  CountingCollector collector([](std::span<const char> b) { (void)launch::read_worker_report(b); });
  transport::ReportSender sender({"127.0.0.1", collector.port()}, "bench-token",
                                 transport::kWorkerSender);
  transport::WorkerServed served{.tasks = 4000,
                                 .busy_s = 9,
                                 .p50_ms = 2,
                                 .p99_ms = 9,
                                 .queued = 3,
                                 .running = 4,
                                 .threads = 4};
  for (int t = 0; t < 8; ++t) {
    served.trainers.push_back(
        {.name = "rank " + std::to_string(t) + " of 8 (pid 1000)", .tasks = 500, .busy_s = 1});
  }
  auto clock = std::make_shared<actors::ManualClock>();
  launch::WorkerStatsReporter reporter(
      [&] { return served; },
      [&](const launch::WorkerNodeReport& r) {
        sender.send(launch::write_worker_report(r));
        sender.drain(std::chrono::seconds(10));  // one at a time, as a worker sends them
      },
      {.interval_s = 10,
       .name = "127.0.0.1:4000",
       .host = "bench",
       .clock = clock,
       .cpu_seconds = [] { return cpu_s(); },
       .grid = launch::ReportGrid{.origin = clock->now(), .index = 1}});
  clock->advance(std::chrono::seconds(10));
  reporter.poll();  // connected before the clock starts
  collector.wait(1);
  collector.reset();
  const double t0 = cpu_s();
  for (int i = 0; i < kReports; ++i) {
    clock->advance(std::chrono::seconds(10));
    reporter.poll();
  }
  const int delivered = collector.wait(kReports);
  const double per_report = (cpu_s() - t0) / kReports;
  // Idle: its thread on the wall clock's grid, nothing due for 3 s.
  launch::WorkerStatsReporter idle(
      [] { return transport::WorkerServed{}; }, [](const auto&) {},
      {.interval_s = 10, .grid = launch::wall_clock_grid(10, *actors::Clock::steady())});
  idle.start();
  const double t1 = cpu_s();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const double idle_per_s = (cpu_s() - t1) / 3;
  std::printf(
      "{\"bench\":\"worker_reporter\",\"trainers\":8,\"reports\":%d,\"delivered\":%d,"
      "\"cpu_us_per_report\":%.1f,\"cpu_us_per_s_idle\":%.2f,\"cpu_share_10s\":%.7f,"
      "\"cpu_share_0_5s\":%.6f}\n",
      kReports, delivered, per_report * 1e6, idle_per_s * 1e6, per_report / 10 + idle_per_s,
      per_report / 0.5 + idle_per_s);
}

}  // namespace

int main(int argc, char** argv) {
  std::uint32_t ranks = 4096;
  int stages = 4, workers = 2, intervals = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (flag == "--ranks") ranks = std::uint32_t(v);
    if (flag == "--stages") stages = v;
    if (flag == "--workers") workers = v;
    if (flag == "--intervals") intervals = v;
  }
  aggregator(ranks, stages, workers, intervals);
  reporter();
  worker_reporter();
  link();
}
