#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "actors/positions.h"

namespace brigade::actors {

/// Bad use of the builder, thrown by `build()`: no source, no sink, zero
/// concurrency, aggregate size 0, a stage after the sink, retry on a cpu stage.
class PipelineBuildError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// One recorded failure: of a whole task (its function threw), or of one sample of a
/// task's input (reported through TaskContext::fail).
struct FailureRecord {
  std::string stage;
  Positions positions;  // the failed sample's, or the whole task input's
  std::string message;  // what() of the exception, or the message given to fail()
  /// The typed cause when the error carried one (a std::system_error such as
  /// media::MediaError, or the code given to fail()); empty otherwise.
  std::error_code code{};
};

/// Whether retrying may help: `code` is equivalent to one of the generic conditions
/// resource_unavailable_try_again, timed_out, connection_reset, connection_aborted,
/// connection_refused, host_unreachable, network_unreachable, network_down or
/// interrupted. Corrupt data (bad_data, illegal_byte_sequence, …), missing files and
/// errors without a code are not transient. Retry policies use this by default.
bool is_transient(const std::error_code& code);

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
