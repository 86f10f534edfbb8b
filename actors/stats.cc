#include "actors/stats.h"

#include <fmt/format.h>

#include <array>

namespace brigade::actors {

std::span<const Figure<StageStats>> stage_figures() {
  using S = StageStats;
  static const std::array<Figure<S>, 18> figures{{
      {"name", &S::name, "stage", 14},
      {"kind", &S::kind},
      {"concurrency", &S::concurrency, "conc", 4},
      {"capacity", &S::capacity},
      {"tasks", &S::tasks, "tasks", 9},
      {"failures", &S::failures, "fail", 6},
      {"filtered", &S::filtered, "filter", 7},
      {"retries", &S::retries},
      {"outputs", &S::outputs},
      {"mean_ms", &S::mean_ms, "mean_ms", 8, 3},
      {"p50_ms", &S::p50_ms, "p50_ms", 8, 3},
      {"p90_ms", &S::p90_ms, "p90_ms", 8, 3},
      {"p99_ms", &S::p99_ms, "p99_ms", 8, 3},
      {"starved_s", &S::starved_s, "starve_s", 8, 2},
      {"backpressured_s", &S::backpressured_s, "bkpr_s", 8, 2},
      {"occupancy", &S::occupancy, "occ", 5, 2},
      {"items_per_s", &S::items_per_s, "items/s", 10, 0},
      {"elapsed_s", &S::elapsed_s},
  }};
  return figures;
}

std::span<const Figure<SinkStats>> sink_figures() {
  using S = SinkStats;
  static const std::array<Figure<S>, 6> figures{{
      {"buffer_size", &S::buffer_size},
      {"delivered", &S::delivered},
      {"requests", &S::requests},
      {"ready", &S::ready},
      {"data_readiness", &S::data_readiness},
      {"consumer_wait_s", &S::consumer_wait_s},
  }};
  return figures;
}

std::span<const Figure<PipelineStats>> pipeline_figures() {
  using S = PipelineStats;
  static const std::array<Figure<S>, 3> figures{{
      {"source_items", &S::source_items},
      {"failures", &S::failures},
      {"elapsed_s", &S::elapsed_s},
  }};
  return figures;
}

namespace {

// One cell: text left-aligned, numbers right-aligned (doubles with their precision).
template <class T>
std::string cell(const Figure<StageStats>& f, const T& value, bool first) {
  std::string out = first ? "" : " ";
  if constexpr (std::is_same_v<T, std::string>) {
    out += fmt::format("{:<{}}", value, f.width);
  } else if constexpr (std::is_same_v<T, double>) {
    out += fmt::format("{:>{}.{}f}", value, f.width, f.precision);
  } else {
    out += fmt::format("{:>{}}", value, f.width);
  }
  return out;
}

}  // namespace

std::string format_stats_table(const PipelineStats& stats) {
  std::string out;
  bool first = true;
  for (const auto& f : stage_figures()) {
    if (f.column.empty()) continue;
    const bool text = std::holds_alternative<std::string StageStats::*>(f.member);
    out += first ? "" : " ";
    out +=
        text ? fmt::format("{:<{}}", f.column, f.width) : fmt::format("{:>{}}", f.column, f.width);
    first = false;
  }
  out += '\n';
  for (const auto& s : stats.stages) {
    first = true;
    for (const auto& f : stage_figures()) {
      if (f.column.empty()) continue;
      std::visit([&](auto member) { out += cell(f, s.*member, first); }, f.member);
      first = false;
    }
    out += '\n';
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
