#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "actors/positions.h"

namespace brigade::actors {

/// Bad use of the builder, thrown by `build()`: no source, no sink, zero
/// concurrency, aggregate size 0, a stage after the sink, retry on a cpu stage.
class PipelineBuildError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// One recorded failure of a task.
struct FailureRecord {
  std::string stage;
  Positions positions;  // of the item whose task failed
  std::string message;  // what() of the exception the stage function threw
};

/// Thrown to the consumer, once, when a failure budget is exceeded or the source
/// throws. Items already in the sink buffer are delivered first. `recent()` holds
/// the most recent causes (at most 16), oldest first.
class PipelineFailure : public std::runtime_error {
 public:
  PipelineFailure(const std::string& reason, std::vector<FailureRecord> recent);
  const std::vector<FailureRecord>& recent() const { return recent_; }

 private:
  std::vector<FailureRecord> recent_;
};

}  // namespace brigade::actors
