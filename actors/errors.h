#pragma once

#include <cstdint>
#include <optional>
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

/// One failed sample (or task), as the engine keeps it: from a stage function that
/// threw (the whole task input failed), or from TaskContext::fail (one sample of it).
/// The same record reaches the statistics (PipelineStats::recent_failures), the
/// consumer's PipelineFailure, the remote wire (a worker's failed samples) and Python
/// (DecodeError's fields): a sample's identity is never recovered from text.
struct SampleFailure {
  std::string stage{};                // set by the engine: the stage that reported it
  Positions positions{};              // set by the engine: the failed sample's, or the task input's
  std::optional<std::uint64_t> id{};  // the sample's id, when the reporter knows it
  std::string path{};                 // the sample's file (or name), when known
  /// The typed cause when the error carried one (a std::system_error such as
  /// media::MediaError, or the code given to fail()); empty otherwise.
  std::error_code code{};
  std::string cause{};  // for humans: what went wrong, without the sample's name
  /// For humans: "sample <id> (<path>): <cause>" when the id is known, else the cause.
  std::string message() const;
};

/// The record's former name.
using FailureRecord [[deprecated("use SampleFailure")]] = SampleFailure;

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
  PipelineFailure(const std::string& reason, std::vector<SampleFailure> recent);
  const std::vector<SampleFailure>& recent() const { return recent_; }

 private:
  std::vector<SampleFailure> recent_;
};

}  // namespace brigade::actors
