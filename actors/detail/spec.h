#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/detail/any_value.h"
#include "actors/options.h"
#include "actors/positions.h"
#include "actors/task.h"

namespace brigade::actors::detail {

/// One item in flight: its payload and the source positions it carries.
struct Item {
  AnyValue value;
  Positions positions;
};

/// A source opened for one run. `next` returns false at the end; it is called by one
/// actor at a time (never concurrently). `position` defaults to the running index.
class SourceCursor {
 public:
  virtual ~SourceCursor() = default;
  virtual bool next(AnyValue& value, std::uint64_t& position) = 0;
};

struct SourceSpec {
  std::function<std::unique_ptr<SourceCursor>()> open;  // called once per run
};

/// An aggregator instance for one run; lives in its stage's coordinator.
class ErasedAggregator {
 public:
  virtual ~ErasedAggregator() = default;
  virtual std::optional<AnyValue> accumulate(AnyValue&& value) = 0;
  virtual std::optional<AnyValue> flush() = 0;
};

enum class StageKind { pipe, generate, disaggregate, aggregate };

/// A stage with its types erased. For pipe/generate/disaggregate, `fn` appends the
/// task's outputs to `out` (none: filtered) and throws on failure; it is called
/// concurrently by up to `options.concurrency` workers. With `keep_input` it works on
/// a copy and leaves `in` intact, so that a failed attempt can be retried. `task`
/// carries the stop token and collects failed samples (TaskContext::fail).
struct StageSpec {
  StageKind kind = StageKind::pipe;
  StageOptions options;
  std::function<void(AnyValue& in, std::vector<AnyValue>& out, bool keep_input, TaskContext& task)>
      fn;
  std::function<std::unique_ptr<ErasedAggregator>()> make_aggregator;
  std::size_t aggregate_size = 0;  // fixed-size aggregate (0: custom aggregator)

  int capacity() const;  // items the stage may hold, in its own input units
};

struct PipelineSpec {
  std::optional<SourceSpec> source;
  std::vector<StageSpec> stages;
  std::optional<int> sink_buffer;
  std::vector<std::string> errors;  // bad use found while building; thrown by build()
};

const char* kind_name(StageKind kind);

}  // namespace brigade::actors::detail
