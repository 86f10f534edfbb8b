// The statistics' outputs (launch/stats_output.h, launch/metrics_server.h): the JSON line's
// schema, the Prometheus text, the endpoint against good and bad requests and scraped by
// a real Prometheus server, and `brigade stats`'s page opened in headless Chromium.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "launch/loader/job_config.h"
#include "launch/metrics_server.h"
#include "launch/stats_output.h"
#include "tests/launch/process.h"

namespace brigade::launch::stats_test {  // its own: the tests of one target share a unity batch
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;

actors::StageStats stage(std::string name, std::uint64_t tasks, double mean_ms, double occupancy) {
  return {.name = std::move(name),
          .kind = "pipe",
          .concurrency = 2,
          .capacity = 4,
          .tasks = tasks,
          .outputs = tasks,
          .mean_ms = mean_ms,
          .p50_ms = mean_ms,
          .occupancy = occupancy,
          .elapsed_s = 1};
}

// Rank `rank`'s report of interval `k` (1 s each): rank 2 from interval 3 on decodes
// four times slower and its consumer waits most of each interval.
RankReport report(std::uint32_t rank, std::uint64_t k) {
  const bool slow = rank == 2 && k >= 3;
  RankReport r{.rank = rank,
               .host = "node-" + std::to_string(rank),
               .sequence = k,
               .interval_s = 1,
               .at_s = double(k),
               .samples = slow ? 200u : 800u,
               .samples_total = 800 * k,
               .batches = slow ? 6u : 25u,
               .exposed_wait_s = slow ? 0.7 : 0.02,
               .exposed_wait_total_s = 0.02 * double(k),
               .readiness = slow ? 0.1 : 0.98,
               .last_sample_id = 1000 * k + rank};
  r.stages = {stage("read", 25, 1, 0.3), stage("decode", 25, slow ? 40 : 10, slow ? 1 : 0.6)};
  r.stage_totals = r.stages;
  return r;
}

std::string http(std::uint16_t port, const std::string& request, bool close_write = true) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_port = htons(port);
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0) {
    ::close(fd);
    return "connect failed";
  }
  std::string_view rest = request;
  while (!rest.empty()) {
    const auto n = ::send(fd, rest.data(), rest.size(), MSG_NOSIGNAL);
    if (n <= 0) break;
    rest.remove_prefix(std::size_t(n));
  }
  if (close_write) ::shutdown(fd, SHUT_WR);
  std::string out;
  char buffer[4096];
  for (ssize_t n; (n = ::recv(fd, buffer, sizeof buffer, 0)) > 0;)
    out.append(buffer, std::size_t(n));
  ::close(fd);
  return out;
}

TEST(StatsOutput, TheJsonLineFollowsTheSchema) {
  ClusterAnalyzer analyzer(1);
  auto r = report(0, 4);
  r.rank = 0;
  r.workers = {{.name = "10.0.0.9:4000", .samples = 100, .busy_s = 0.5, .waited_s = 0.1}};
  r.interval_index = 882000123;
  analyzer.add(r);
  const auto events = analyzer.close_interval();
  const auto line = stats_json_line(r, &analyzer.figures(), events);
  ASSERT_EQ(line.find('\n'), std::string::npos);
  const auto o = json::parse(line);
  EXPECT_EQ(o["rank"], 0);
  EXPECT_EQ(o["host"], "node-0");
  EXPECT_EQ(o["sequence"], 4);
  EXPECT_EQ(o["interval_index"], 882000123);
  EXPECT_EQ(o["samples"], 800);
  EXPECT_DOUBLE_EQ(o["samples_per_s"].get<double>(), 800);
  EXPECT_DOUBLE_EQ(o["exposed_wait_share"].get<double>(), 0.02);
  EXPECT_DOUBLE_EQ(o["readiness"].get<double>(), 0.98);
  EXPECT_EQ(o["totals"]["samples"], 3200);
  ASSERT_EQ(o["stages"].size(), 2u);
  EXPECT_EQ(o["stages"][1]["name"], "decode");
  EXPECT_DOUBLE_EQ(o["stages"][1]["interval"]["occupancy"].get<double>(), 0.6);
  EXPECT_EQ(o["stages"][1]["total"]["tasks"], 25);
  // The same keys as `brigade run --json`'s stages.
  for (const auto& f : actors::stage_figures()) {
    EXPECT_TRUE(o["stages"][0]["interval"].contains(std::string(f.key))) << f.key;
  }
  EXPECT_EQ(o["workers"][0]["name"], "10.0.0.9:4000");
  EXPECT_EQ(o["cluster"]["ranks"][0]["score"], 1.0);
  EXPECT_TRUE(o["cluster"]["events"].is_array());
  EXPECT_TRUE(o["cluster"]["silent_workers"].is_array());
  EXPECT_FALSE(json::parse(stats_json_line(r)).contains("cluster"));
}

TEST(StatsOutput, RankZerosLineShowsEachWorkerNodeWithTheTasksItServedEachRank) {
  ClusterAnalyzer analyzer(2);
  analyzer.add(report(0, 1));
  analyzer.add(report(1, 1));
  analyzer.add_worker({.name = "10.0.0.9:4000",
                       .host = "w9",
                       .sequence = 1,
                       .interval_s = 1,
                       .threads = 2,
                       .tasks = 30,
                       .busy_s = 1.5,
                       .task_p50_ms = 40,
                       .task_p99_ms = 90,
                       .queued = 3,
                       .cpu_s = 1,
                       .trainers = {{.name = "rank 1 of 2 (pid 3)", .rank = 1, .tasks = 30}}});
  const auto events = analyzer.close_interval();
  const auto o = json::parse(stats_json_line(report(0, 1), &analyzer.figures(), events));
  const auto& w = o["cluster"]["workers"];
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0]["worker"], "10.0.0.9:4000");
  EXPECT_EQ(w[0]["host"], "w9");
  EXPECT_DOUBLE_EQ(w[0]["tasks_per_s"].get<double>(), 30);
  EXPECT_DOUBLE_EQ(w[0]["task_p99_ms"].get<double>(), 90);
  EXPECT_EQ(w[0]["queued"], 3);
  EXPECT_DOUBLE_EQ(w[0]["busy_share"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(w[0]["cpu_share"].get<double>(), 0.5);
  EXPECT_EQ(w[0]["trainers"][0]["rank"], 1);
  EXPECT_EQ(w[0]["trainers"][0]["tasks"], 30);
  const auto text = prometheus_text(analyzer.figures());
  EXPECT_NE(text.find("brigade_worker_node_task_p99_ms{worker=\"10.0.0.9:4000\",host=\"w9\"} 90\n"),
            std::string::npos)
      << text;
  // It stops reporting: a SILENT event with the worker and no rank, then the list.
  std::vector<ClusterEvent> silent;
  for (std::uint64_t k = 2; k <= 4; ++k) {
    analyzer.add(report(0, k));
    analyzer.add(report(1, k));
    for (auto& e : analyzer.close_interval()) silent.push_back(std::move(e));
  }
  ASSERT_EQ(silent.size(), 1u);
  const auto after = json::parse(stats_json_line(report(0, 4), &analyzer.figures(), silent));
  EXPECT_EQ(after["cluster"]["events"][0]["kind"], "silent");
  EXPECT_TRUE(after["cluster"]["events"][0]["rank"].is_null());
  EXPECT_EQ(after["cluster"]["events"][0]["worker"], "10.0.0.9:4000");
  EXPECT_EQ(after["cluster"]["silent_workers"][0]["worker"], "10.0.0.9:4000");
  EXPECT_EQ(after["cluster"]["silent_workers"][0]["host"], "w9");
  EXPECT_TRUE(after["cluster"]["workers"].empty());
  EXPECT_NE(event_log_line(silent[0]).find("statistics: silent rank=- host=w9 stage=- "
                                           "worker=10.0.0.9:4000"),
            std::string::npos)
      << event_log_line(silent[0]);
}

TEST(StatsOutput, AnEventIsOneLogLineOfFixedFields) {
  ClusterAnalyzer analyzer(4);
  std::vector<ClusterEvent> events;
  for (std::uint64_t k = 1; k <= 4 && events.empty(); ++k) {
    for (std::uint32_t rank = 0; rank < 4; ++rank) analyzer.add(report(rank, k));
    events = analyzer.close_interval();
  }
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(event_log_line(events[0]),
            "statistics: straggler rank=2 host=node-2 stage=decode worker=- score=0.25 "
            "wait_share=0.70 last_sample=0: " +
                events[0].message);
  const ClusterEvent hung{.kind = ClusterEventKind::not_consuming,
                          .rank = 1,
                          .host = "node-1",
                          .last_sample_id = 4242,
                          .message = "rank 1 (node-1) not consuming"};
  EXPECT_EQ(event_log_line(hung),
            "statistics: not_consuming rank=1 host=node-1 stage=- worker=- score=0.00 "
            "wait_share=0.00 last_sample=4242: rank 1 (node-1) not consuming");
  const ClusterEvent changing{.kind = ClusterEventKind::slowest_keeps_changing, .message = "m"};
  EXPECT_EQ(event_log_line(changing),
            "statistics: slowest_keeps_changing rank=- host=- stage=- worker=- score=0.00 "
            "wait_share=0.00 last_sample=0: m");
}

TEST(StatsOutput, PrometheusTextHasStableNamesAndLabels) {
  auto r = report(2, 5);
  r.host = "a\"b";
  r.workers = {{.name = "w:1", .samples = 7}};
  const auto text = prometheus_text(r);
  EXPECT_NE(text.find("brigade_samples_per_second{rank=\"2\",host=\"a\\\"b\"} 200\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("brigade_stage_task_ms{rank=\"2\",host=\"a\\\"b\",stage=\"decode\"} 40\n"),
            std::string::npos);
  EXPECT_NE(text.find("brigade_worker_samples{rank=\"2\",host=\"a\\\"b\",worker=\"w:1\"} 7\n"),
            std::string::npos);
  EXPECT_NE(text.find("# TYPE brigade_exposed_wait_seconds_total counter\n"), std::string::npos);
  // Every sample line is NAME{LABELS} VALUE with a brigade_ name.
  std::istringstream lines(text);
  for (std::string l; std::getline(lines, l);) {
    if (l.starts_with("#")) continue;
    EXPECT_TRUE(l.starts_with("brigade_")) << l;
    EXPECT_NE(l.find("} "), std::string::npos) << l;
  }
}

TEST(MetricsServer, AnswersMetricsAndRefusesBadRequests) {
  MetricsServer server("127.0.0.1", 0, [] { return std::string("brigade_up 1\n"); });
  const auto port = server.port();
  ASSERT_GT(port, 0);
  const auto ok = http(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(ok.starts_with("HTTP/1.1 200 OK\r\n")) << ok;
  EXPECT_NE(ok.find("Content-Length: 13\r\n"), std::string::npos);
  EXPECT_TRUE(ok.ends_with("\r\n\r\nbrigade_up 1\n"));
  EXPECT_TRUE(http(port, "HEAD /metrics HTTP/1.0\r\n\r\n").ends_with("\r\n\r\n"));
  EXPECT_TRUE(http(port, "GET /other HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
  EXPECT_TRUE(http(port, "POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
  EXPECT_TRUE(http(port, "garbage\r\n\r\n").starts_with("HTTP/1.1 400"));
  EXPECT_TRUE(http(port, "GET /metrics SMTP/9\r\n\r\n").starts_with("HTTP/1.1 400"));
  // A head that never ends: refused once past 8 KiB, whatever follows.
  EXPECT_TRUE(http(port, "GET /metrics HTTP/1.1\r\nX: " + std::string(20000, 'a'))
                  .starts_with("HTTP/1.1 431"));
  // Random bytes, a client that leaves at once, one that sends nothing (served after
  // its 2 s): the server still answers the next.
  std::mt19937 random(5);
  for (int i = 0; i < 20; ++i) {
    std::string junk(random() % 3000, '\0');
    for (auto& c : junk) c = char(random());
    http(port, junk);
  }
  http(port, "");
  http(port, "GET /metr", /*close_write=*/true);
  EXPECT_TRUE(http(port, "GET /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 200 OK"));
  // A client that connects and sends nothing, holding its connection: dropped after its
  // 2 s, the next is answered.
  const int silent = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_port = htons(port);
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(silent, reinterpret_cast<sockaddr*>(&at), sizeof at), 0);
  EXPECT_TRUE(http(port, "GET /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 200 OK"));
  char byte;
  EXPECT_EQ(::recv(silent, &byte, 1, 0), 0);  // closed without an answer
  ::close(silent);
  EXPECT_THROW(MetricsServer("127.0.0.1", port, [] { return std::string(); }), std::system_error);
  EXPECT_THROW(MetricsServer("not-an-address", 0, [] { return std::string(); }), std::system_error);
}

// A free TCP port on loopback (bound then closed).
std::uint16_t free_port() {
  MetricsServer probe("127.0.0.1", 0, [] { return std::string(); });
  return probe.port();
}

TEST(Prometheus, ARealServerScrapesTheEndpoint) {
  const fs::path binary = "/usr/bin/prometheus";
  if (!fs::exists(binary))
    GTEST_SKIP() << "no Prometheus server (" << binary << "): apt-get install prometheus";
  const auto r = report(1, 3);
  MetricsServer server("127.0.0.1", 0, [&] { return prometheus_text(r); });
  const auto dir = fs::temp_directory_path() / ("brigade-prom-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "data");
  std::ofstream(dir / "prometheus.yml") << "global:\n  scrape_interval: 200ms\n"
                                           "scrape_configs:\n  - job_name: brigade\n"
                                           "    scrape_interval: 200ms\n    scrape_timeout: 150ms\n"
                                           "    static_configs:\n      - targets: ['127.0.0.1:"
                                        << server.port() << "']\n";
  const auto api = free_port();
  test::Subprocess prometheus(
      {binary.string(), "--config.file=" + (dir / "prometheus.yml").string(),
       "--storage.tsdb.path=" + (dir / "data").string(),
       "--web.listen-address=127.0.0.1:" + std::to_string(api)},
      {}, dir / "stdout", dir / "stderr");
  // Until the API answers with the series (the server starts, scrapes at 200 ms).
  std::string answer;
  const bool found = test::wait_until(
      [&] {
        answer = http(api,
                      "GET /api/v1/query?query=brigade_samples_per_second HTTP/1.1\r\n"
                      "Host: 127.0.0.1\r\nConnection: close\r\n\r\n",
                      false);
        return answer.find("\"host\":\"node-1\"") != std::string::npos;
      },
      60s);
  EXPECT_TRUE(found) << answer << "\n" << test::read_text(dir / "stderr");
  EXPECT_NE(answer.find("\"__name__\":\"brigade_samples_per_second\""), std::string::npos);
  EXPECT_NE(answer.find("\"rank\":\"1\""), std::string::npos);
  EXPECT_NE(answer.find("\"800\""), std::string::npos);
  // A per-stage series with its stage label.
  const auto stage = http(api,
                          "GET /api/v1/query?query=brigade_stage_task_ms%7Bstage%3D%22decode%22%7D "
                          "HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
                          false);
  EXPECT_NE(stage.find("\"stage\":\"decode\""), std::string::npos) << stage;
  prometheus.signal(SIGTERM);
  prometheus.wait_for(20s);
  fs::remove_all(dir);
}

// Four ranks over 6 intervals through the analyzer, as rank 0 writes them.
std::string cluster_lines() {
  ClusterAnalyzer analyzer(4);
  std::string out;
  for (std::uint64_t k = 1; k <= 6; ++k) {
    std::vector<RankReport> reports;
    for (std::uint32_t rank = 0; rank < 4; ++rank) {
      reports.push_back(report(rank, k));
      EXPECT_TRUE(analyzer.add(reports.back()));
    }
    const auto events = analyzer.close_interval();
    for (const auto& r : reports) {
      out += stats_json_line(r, r.rank == 0 ? &analyzer.figures() : nullptr,
                             r.rank == 0 ? std::span<const ClusterEvent>(events)
                                         : std::span<const ClusterEvent>()) +
             "\n";
    }
  }
  return out;
}

TEST(StatsPage, NamesTheStragglerOnItsCharts) {
  const auto lines = cluster_lines();
  ASSERT_NE(lines.find("\"kind\":\"straggler\""), std::string::npos);
  const auto page = render_stats_html(lines, "test <run>");
  EXPECT_TRUE(page.starts_with("<!DOCTYPE html>"));
  EXPECT_NE(page.find("<title>test &lt;run&gt;</title>"), std::string::npos);
  EXPECT_NE(page.find("straggler: rank 2 (decode)"), std::string::npos);
  EXPECT_NE(page.find("rank 2 (node-2) straggling"), std::string::npos);
  EXPECT_EQ(page.find("<script"), std::string::npos);  // self-contained, static
  EXPECT_EQ(page.find("http://"), page.find("http://www.w3.org/2000/svg"));
  EXPECT_THROW(render_stats_html("{\"rank\": 0}\nnot json\n", "x"), ConfigError);
}

TEST(StatsPage, RendersInHeadlessChromium) {
  const fs::path chromium = "/usr/bin/chromium";
  if (!fs::exists(chromium))
    GTEST_SKIP() << "no Chromium (" << chromium << "): apt-get install chromium";
  const auto dir = fs::temp_directory_path() / ("brigade-page-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "stats.jsonl") << cluster_lines();
  const std::string command = "'" BRIGADE_BINARY "' stats '" + (dir / "stats.jsonl").string() +
                              "' -o '" + (dir / "stats.html").string() + "'";
  ASSERT_EQ(std::system(command.c_str()), 0);
  test::Subprocess browser(
      {chromium.string(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
       "--enable-logging=stderr", "--v=0", "--user-data-dir=" + (dir / "profile").string(),
       "--dump-dom", "file://" + (dir / "stats.html").string()},
      {}, dir / "dom", dir / "log");
  ASSERT_EQ(browser.wait_for(120s), 0) << test::read_text(dir / "log");
  const auto dom = test::read_text(dir / "dom");
  const auto log = test::read_text(dir / "log");
  EXPECT_NE(dom.find("straggler: rank 2 (decode)"), std::string::npos) << dom.substr(0, 2000);
  EXPECT_NE(dom.find("<svg"), std::string::npos);
  EXPECT_EQ(log.find("Uncaught"), std::string::npos) << log;
  EXPECT_EQ(log.find("CONSOLE"), std::string::npos) << log;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace brigade::launch::stats_test
