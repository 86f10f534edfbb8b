// bench_dispatch: one trainer's RemotePool dispatcher driven past this machine, against
// simulated workers (transport/remote/remote.h, DISPATCH).
//
//   bench_dispatch [--workers 8,64,512] [--callers 0,128] [--tasks 20000]
//                  [--delay-ms 2] [--threads 1] [--window 0] [--result-bytes 64]
//
// The simulated workers are transport::SimulatedWorkers (transport/remote/
// simulated_workers.h): ONE extra actor system of this process, each worker on a port of
// its own on 127.0.0.1, holding each task for --delay-ms on one of its --threads slots
// (a timer, no CPU) and answering with a result of --result-bytes whose first 8 bytes
// are the task's residence on the worker (arrival to result sent, ns).
// The RemotePool is the real one (its own system, connected to every port: CAF keeps
// one BASP connection per pair of nodes, so the pool's N links share one TCP
// connection; every link is still its own session with its own window and table).
//
// Per configuration (workers × callers; callers 0 means window × workers, every slot
// of every worker kept full), after a warm-up of a tenth of --tasks: caller threads
// call() until --tasks are done. One JSON line each:
//   tasks_per_s, ideal_tasks_per_s (workers × threads / delay), efficiency (ratio);
//   overhead p50/p99: a call's round trip in its caller thread minus its residence on
//   the worker — what the pool, CAF and the loopback link add to a task (the queue of
//   calls waiting for a free window slot, the dispatch, both transfers, the caller's
//   wake-up);
//   worker idle share (mean, p99 over workers): 1 − busy / (threads × wall), the share
//   of a worker's slot time spent waiting for work;
//   cpu_us_per_task: the whole process (pool, callers and simulated workers) over the
//   tasks.
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "transport/remote/remote.h"
#include "transport/remote/simulated_workers.h"

namespace {

using namespace brigade::transport;
using Clock = std::chrono::steady_clock;

const Security kSecurity{.token = "bench_dispatch's token"};
const OperationVersion kSim{"bench.sim", 1};

struct Args {
  std::vector<std::size_t> workers{8, 64, 512};
  std::vector<std::size_t> callers{0, 128};
  std::size_t tasks = 20000;
  SimulatedWorkerOptions sim{.security = kSecurity};
};

std::vector<std::size_t> parse_list(const char* s) {
  std::vector<std::size_t> out;
  for (std::string item; *s; ++s) {
    if (*s != ',') item += *s;
    if (*s == ',' || s[1] == '\0') {
      out.push_back(std::stoul(item));
      item.clear();
    }
  }
  return out;
}

Args parse_args(int argc, char** argv) {
  Args a;
  std::uint32_t window = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* v = argv[i + 1];
    if (flag == "--workers")
      a.workers = parse_list(v);
    else if (flag == "--callers")
      a.callers = parse_list(v);
    else if (flag == "--tasks")
      a.tasks = std::stoul(v);
    else if (flag == "--delay-ms")
      a.sim.delay = std::chrono::microseconds(std::lround(1000 * std::stod(v)));
    else if (flag == "--threads")
      a.sim.threads = static_cast<std::uint32_t>(std::stoul(v));
    else if (flag == "--window")
      window = static_cast<std::uint32_t>(std::stoul(v));
    else if (flag == "--result-bytes")
      a.sim.result_bytes = std::stoul(v);
    else
      throw std::invalid_argument("unknown flag " + flag);
  }
  a.sim.window = window ? window : 2 * a.sim.threads;
  return a;
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))];
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

struct Phase {
  double wall_s = 0, cpu_s = 0;
  std::size_t failed = 0;
  std::vector<double> overhead_us, round_trip_us;
};

// `callers` threads call() until `tasks` are done.
Phase drive(RemotePool& pool, std::size_t callers, std::size_t tasks) {
  std::atomic<std::int64_t> left{static_cast<std::int64_t>(tasks)};
  std::vector<Phase> per(callers);
  const auto cpu0 = cpu_seconds();
  const auto t0 = Clock::now();
  {
    std::vector<std::jthread> threads;
    for (std::size_t c = 0; c < callers; ++c) {
      threads.emplace_back([&, c] {
        auto& mine = per[c];
        while (left.fetch_sub(1) > 0) {
          const auto sent = Clock::now();
          auto r = pool.call(kSim.name, std::vector<char>(16), {});
          const double rt = std::chrono::duration<double, std::micro>(Clock::now() - sent).count();
          if (r.status != CallStatus::done || r.bytes.size() < 8) {
            ++mine.failed;
            continue;
          }
          std::int64_t residence = 0;
          std::memcpy(&residence, r.bytes.data(), sizeof residence);
          mine.round_trip_us.push_back(rt);
          mine.overhead_us.push_back(rt - 1e-3 * static_cast<double>(residence));
        }
      });
    }
  }
  Phase all;
  all.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  all.cpu_s = cpu_seconds() - cpu0;
  for (auto& p : per) {
    all.failed += p.failed;
    all.overhead_us.insert(all.overhead_us.end(), p.overhead_us.begin(), p.overhead_us.end());
    all.round_trip_us.insert(all.round_trip_us.end(), p.round_trip_us.begin(),
                             p.round_trip_us.end());
  }
  return all;
}

void run_config(const Args& a, std::size_t workers, std::size_t callers) {
  SimulatedWorkers sim(workers, a.sim);
  PoolOptions po;
  po.workers = sim.endpoints();
  po.security = kSecurity;
  po.operations = {kSim};
  po.name = "bench_dispatch";
  const auto connect0 = Clock::now();
  auto pool = std::make_unique<RemotePool>(po);
  while (pool->live_workers() < workers && Clock::now() - connect0 < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const double connect_s = std::chrono::duration<double>(Clock::now() - connect0).count();
  const auto live = pool->live_workers();
  drive(*pool, callers, std::max<std::size_t>(callers, a.tasks / 10));  // warm-up
  sim.reset_figures();
  const auto p = drive(*pool, callers, a.tasks);
  std::vector<double> idle;
  for (const auto& f : sim.figures()) {
    const double slot_s = p.wall_s * a.sim.threads;
    idle.push_back(1 - 1e-9 * static_cast<double>(f.busy_ns) / slot_s);
  }
  double idle_mean = 0;
  for (double x : idle) idle_mean += x / static_cast<double>(idle.size());
  const double delay_s = std::chrono::duration<double>(a.sim.delay).count();
  const double rate = static_cast<double>(a.tasks - p.failed) / p.wall_s;
  const double ideal = static_cast<double>(workers * a.sim.threads) / delay_s;
  std::printf(
      "{\"bench\":\"dispatch\",\"workers\":%zu,\"live\":%zu,\"callers\":%zu,\"threads\":%u,"
      "\"window\":%u,\"delay_ms\":%.3f,\"tasks\":%zu,\"failed\":%zu,\"connect_s\":%.3f,"
      "\"seconds\":%.3f,\"tasks_per_s\":%.1f,\"ideal_tasks_per_s\":%.1f,\"efficiency\":%.4f,"
      "\"round_trip_p50_us\":%.1f,\"overhead_p50_us\":%.1f,\"overhead_p99_us\":%.1f,"
      "\"worker_idle_share_mean\":%.4f,\"worker_idle_share_p99\":%.4f,\"cpu_us_per_task\":%.2f}\n",
      workers, live, callers, a.sim.threads, a.sim.window, 1e3 * delay_s, a.tasks, p.failed,
      connect_s, p.wall_s, rate, ideal, rate / ideal, quantile(p.round_trip_us, 0.5),
      quantile(p.overhead_us, 0.5), quantile(p.overhead_us, 0.99), idle_mean, quantile(idle, 0.99),
      1e6 * p.cpu_s / static_cast<double>(a.tasks));
  std::fflush(stdout);
  std::fprintf(stderr, "%8zu %8zu %10.0f %10.0f %6.1f%% %9.1f %9.1f %9.1f %8.1f%% %8.1f%% %8.1f\n",
               workers, callers, rate, ideal, 100 * rate / ideal, quantile(p.round_trip_us, 0.5),
               quantile(p.overhead_us, 0.5), quantile(p.overhead_us, 0.99), 100 * idle_mean,
               100 * quantile(idle, 0.99), 1e6 * p.cpu_s / static_cast<double>(a.tasks));
  pool.reset();
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);  // not a line per worker coming live
  Args a;
  try {
    a = parse_args(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_dispatch: %s\n", e.what());
    return 2;
  }
  std::fprintf(stderr, "%8s %8s %10s %10s %7s %9s %9s %9s %9s %9s %8s\n", "workers", "callers",
               "tasks/s", "ideal/s", "eff", "rt p50us", "ovh p50", "ovh p99", "idle mean",
               "idle p99", "cpu us");
  for (auto w : a.workers) {
    std::vector<std::size_t> done;  // callers 0 and an equal count are one configuration
    for (auto c : a.callers) {
      if (c == 0) c = w * a.sim.window;
      if (std::find(done.begin(), done.end(), c) != done.end()) continue;
      done.push_back(c);
      run_config(a, w, c);
    }
  }
  return 0;
}
