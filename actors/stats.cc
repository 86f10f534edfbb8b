#include "actors/stats.h"

#include <fmt/format.h>

namespace brigade::actors {

std::string format_stats_table(const PipelineStats& stats) {
  std::string out = fmt::format(
      "{:<14} {:>4} {:>9} {:>6} {:>7} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>5} {:>10}\n", "stage",
      "conc", "tasks", "fail", "filter", "mean_ms", "p50_ms", "p90_ms", "p99_ms", "starve_s",
      "bkpr_s", "occ", "items/s");
  for (const auto& s : stats.stages) {
    out += fmt::format(
        "{:<14} {:>4} {:>9} {:>6} {:>7} {:>8.3f} {:>8.3f} {:>8.3f} {:>8.3f} {:>8.2f} "
        "{:>8.2f} {:>5.2f} {:>10.0f}\n",
        s.name, s.concurrency, s.tasks, s.failures, s.filtered, s.mean_ms, s.p50_ms, s.p90_ms,
        s.p99_ms, s.starved_s, s.backpressured_s, s.occupancy, s.items_per_s);
  }
  const auto& k = stats.sink;
  out += fmt::format(
      "sink: buffer {}, delivered {}, data readiness {:.1f}% ({} of {} requests ready), "
      "consumer waited {:.3f} s; source yielded {}, failures {}, elapsed {:.2f} s",
      k.buffer_size, k.delivered, 100 * k.data_readiness, k.ready, k.requests, k.consumer_wait_s,
      stats.source_items, stats.failures, stats.elapsed_s);
  return out;
}

}  // namespace brigade::actors
