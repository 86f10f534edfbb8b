#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "actors/errors.h"

namespace brigade::actors {

/// Statistics of one stage for one run (epoch). Times are wall-clock.
struct StageStats {
  std::string name;
  std::string kind;  // "pipe", "generate", "disaggregate", "aggregate"
  int concurrency = 0;
  int capacity = 0;         // items the stage may hold (running + queued + finished)
  std::uint64_t tasks = 0;  // tasks finished (each input item is one task)
  std::uint64_t failures = 0;
  std::uint64_t filtered =
      0;  // inputs that produced no output (filter, empty generator, dropped tail)
  std::uint64_t retries = 0;
  std::uint64_t outputs = 0;                               // items sent downstream
  double mean_ms = 0, p50_ms = 0, p90_ms = 0, p99_ms = 0;  // task time
  double starved_s = 0;        // time with an idle worker and no input queued
  double backpressured_s = 0;  // time with finished items waiting for downstream credit
  double occupancy = 0;        // time-averaged share of capacity in use, 0..1
  double items_per_s = 0;      // outputs / elapsed
  double elapsed_s = 0;
};

/// The consumer's side: the sink buffer and the thread that iterates.
struct SinkStats {
  int buffer_size = 0;
  std::uint64_t delivered = 0;  // items handed to the consumer
  std::uint64_t requests = 0;   // consumer calls that asked for an item
  std::uint64_t ready = 0;      // … that found one already waiting
  double data_readiness = 0;    // ready / requests (1 = the consumer never waited)
  double consumer_wait_s = 0;   // total time the consumer waited for items
};

struct PipelineStats {
  std::vector<StageStats> stages;  // in pipeline order
  SinkStats sink;
  std::uint64_t source_items = 0;              // items the source yielded
  std::uint64_t failures = 0;                  // over all stages
  double elapsed_s = 0;                        // since the run started
  std::vector<FailureRecord> recent_failures;  // at most 16, oldest first
};

// ONE DESCRIPTION. Every figure of a record, described once: its key (the JSON key of
// `brigade run --json`, the Python Loader's stats() dict key, the cluster report's),
// the member it reads, and its column in the human table (if any). Every serializer
// iterates the description, so a new figure is one line here.
template <class Record>
struct Figure {
  std::string_view key;
  std::variant<std::string Record::*, int Record::*, std::uint64_t Record::*, double Record::*>
      member;
  std::string_view column{};  // header in format_stats_table; empty: not a column
  int width = 0;
  int precision = 0;  // digits after the point (doubles)
};
std::span<const Figure<StageStats>> stage_figures();
std::span<const Figure<SinkStats>> sink_figures();
/// The pipeline's own figures (source_items, failures, elapsed_s): not stages, sink or
/// recent_failures.
std::span<const Figure<PipelineStats>> pipeline_figures();

/// Calls f(key, value) for every figure of `record` in the description's order; value
/// is a const std::string&, int, std::uint64_t or double.
template <class Record, class F>
void for_each_figure(const Record& record, std::span<const Figure<Record>> figures, F&& f) {
  for (const auto& figure : figures) {
    std::visit([&](auto member) { f(figure.key, record.*member); }, figure.member);
  }
}

/// A fixed-width table of `stats`, one row per stage (the columns of stage_figures())
/// plus a line for the sink, for logs.
std::string format_stats_table(const PipelineStats& stats);

}  // namespace brigade::actors
