// bench_engine: the engine's own overhead and scaling, against a plain loop, in one run.
//
// Prints one JSON object per configuration on stdout; a human table goes to stderr.
//   noop:      3 no-op stages over instrumented int-like items, concurrency 1 and 4,
//              input and completion order, --items N (default 1,000,000)
//   spin200us: the middle stage spins 200 µs per item, 20,000 items, concurrency 1, 2
// --concurrency C / --order O / --no-loop run one configuration alone (for a profiler);
// --spin-items 0 skips the spin workload.
// Each workload also runs as the same three functions in a plain loop ("impl":"loop"),
// and each brigade row carries its ratio to that loop. `max_live_items` is measured by
// the item type itself (live payloads), `bound` is Pipeline::item_bound().
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "actors/pipeline.h"

namespace {

using namespace brigade::actors;
using Clock = std::chrono::steady_clock;

std::atomic<std::int64_t> g_live{0};
std::atomic<std::int64_t> g_max_live{0};

// An int-like item that counts live payloads (a moved-from shell holds none).
class Tracked {
 public:
  explicit Tracked(std::int64_t v) : value_(v), owns_(true) { acquire(); }
  Tracked(Tracked&& o) noexcept : value_(o.value_), owns_(std::exchange(o.owns_, false)) {}
  Tracked& operator=(Tracked&& o) noexcept {
    release();
    value_ = o.value_;
    owns_ = std::exchange(o.owns_, false);
    return *this;
  }
  Tracked(const Tracked&) = delete;
  ~Tracked() { release(); }
  std::int64_t value() const { return value_; }

 private:
  static void acquire() {
    const auto now = g_live.fetch_add(1, std::memory_order_relaxed) + 1;
    auto max = g_max_live.load(std::memory_order_relaxed);
    while (now > max && !g_max_live.compare_exchange_weak(max, now)) {
    }
  }
  void release() {
    if (owns_) g_live.fetch_sub(1, std::memory_order_relaxed);
    owns_ = false;
  }
  std::int64_t value_;
  bool owns_;
};

Tracked noop(Tracked t) { return t; }

Tracked spin200(Tracked t) {
  const auto until = Clock::now() + std::chrono::microseconds(200);
  while (Clock::now() < until) {
  }
  return t;
}

struct Row {
  std::string impl, workload, order;
  int concurrency = 0;
  std::int64_t items = 0;
  double seconds = 0;
  std::int64_t max_live = -1;
  std::size_t bound = 0;
  double ratio = 0;
};

double run_loop(std::int64_t n, bool spin) {
  const auto t0 = Clock::now();
  std::int64_t sum = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    Tracked t(i);
    t = noop(std::move(t));
    t = spin ? spin200(std::move(t)) : noop(std::move(t));
    t = noop(std::move(t));
    sum += t.value();
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (sum != n * (n - 1) / 2) std::abort();
  return s;
}

Row run_brigade(std::int64_t n, bool spin, int concurrency, Order order, int buffer) {
  g_live = 0;
  g_max_live = 0;
  auto pipeline = PipelineBuilder()
                      .add_source([i = std::int64_t{0}, n]() mutable -> std::optional<Tracked> {
                        if (i >= n) return std::nullopt;
                        return Tracked(i++);
                      })
                      .pipe(noop, {.concurrency = concurrency, .output_order = order, .name = "a"})
                      .pipe(spin ? spin200 : noop,
                            {.concurrency = concurrency, .output_order = order, .name = "b"})
                      .pipe(noop, {.concurrency = concurrency, .output_order = order, .name = "c"})
                      .add_sink(buffer)
                      .build({.num_threads = 2,
                              .log_stats_at_end = std::getenv("BRIGADE_BENCH_STATS") != nullptr});
  const auto t0 = Clock::now();
  std::int64_t count = 0, sum = 0;
  for (auto& item : pipeline) {
    ++count;
    sum += item.value();
  }
  Row r;
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (count != n || sum != n * (n - 1) / 2) {
    fmt::print(stderr, "bench_engine: lost items ({} of {})\n", count, n);
    std::exit(1);
  }
  r.impl = "brigade";
  r.workload = spin ? "spin200us" : "noop";
  r.concurrency = concurrency;
  r.order = order == Order::input ? "input" : "completion";
  r.items = n;
  r.max_live = g_max_live.load();
  r.bound = pipeline.item_bound();
  return r;
}

void print(const Row& r) {
  const double rate = r.items / r.seconds;
  std::string json = fmt::format(
      R"({{"bench":"engine","impl":"{}","workload":"{}","stages":3,"concurrency":{},"order":"{}","items":{},"seconds":{:.4f},"items_per_s":{:.0f})",
      r.impl, r.workload, r.concurrency, r.order, r.items, r.seconds, rate);
  if (r.impl == "brigade") {
    json += fmt::format(R"(,"max_live_items":{},"bound":{},"ratio_to_loop":{:.4f})", r.max_live,
                        r.bound, r.ratio);
  }
  fmt::print("{}}}\n", json);
  std::fflush(stdout);
  fmt::print(stderr, "{:<8} {:<10} conc {:>2} {:<10} {:>9} items {:>8.3f} s {:>11.0f} items/s{}\n",
             r.impl, r.workload, r.concurrency, r.order, r.items, r.seconds, rate,
             r.impl == "brigade"
                 ? fmt::format("  live {}/{}  ratio {:.3f}", r.max_live, r.bound, r.ratio)
                 : "");
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t items = 1'000'000;
  std::int64_t spin_items = 20'000;
  int buffer = 64;
  int only_concurrency = 0;  // 0 = every configuration
  std::string only_order;    // "" = both orders
  bool loops = true;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--items") && i + 1 < argc) {
      items = std::atoll(argv[++i]);
    } else if (!std::strcmp(argv[i], "--spin-items") && i + 1 < argc) {
      spin_items = std::atoll(argv[++i]);
    } else if (!std::strcmp(argv[i], "--buffer") && i + 1 < argc) {
      buffer = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--concurrency") && i + 1 < argc) {
      only_concurrency = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--order") && i + 1 < argc) {
      only_order = argv[++i];
    } else if (!std::strcmp(argv[i], "--no-loop")) {
      loops = false;
    } else {
      fmt::print(stderr,
                 "usage: bench_engine [--items N] [--spin-items N] [--buffer B] "
                 "[--concurrency C] [--order input|completion] [--no-loop]\n");
      return 2;
    }
  }
  for (bool spin : {false, true}) {
    const std::int64_t n = spin ? spin_items : items;
    Row loop;
    loop.impl = "loop";
    loop.workload = spin ? "spin200us" : "noop";
    loop.concurrency = 1;
    loop.order = "input";
    loop.items = n;
    if (n == 0) continue;
    if (loops) {
      loop.seconds = run_loop(n, spin);
      print(loop);
    }
    for (int c : spin ? std::vector<int>{1, 2} : std::vector<int>{1, 4}) {
      if (only_concurrency != 0 && c != only_concurrency) continue;
      for (Order order : {Order::input, Order::completion}) {
        if (!only_order.empty() && only_order != (order == Order::input ? "input" : "completion")) {
          continue;
        }
        Row r = run_brigade(n, spin, c, order, buffer);
        r.ratio = loops ? loop.seconds / r.seconds : 0;
        print(r);
      }
    }
  }
  return 0;
}
