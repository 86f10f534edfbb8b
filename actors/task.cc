#include "actors/task.h"

#include <algorithm>

namespace brigade::actors {

void TaskContext::fail(std::uint64_t position, SampleFailure failure) {
  const bool seen = std::any_of(failures_.begin(), failures_.end(), [&](const SampleFailure& r) {
    return r.positions.size() == 1 && r.positions.front() == position;
  });
  if (seen) return;
  failure.stage.clear();
  failure.positions = Positions(position);
  failures_.push_back(std::move(failure));
}

void TaskContext::fail(std::uint64_t position, std::string cause, std::error_code code) {
  fail(position, SampleFailure{.code = code, .cause = std::move(cause)});
}

void TaskContext::fail(std::uint64_t position, const std::exception& error) {
  fail(position, error.what(), error_code_of(error));
}

std::error_code error_code_of(const std::exception& error) {
  if (const auto* system = dynamic_cast<const std::system_error*>(&error)) return system->code();
  return {};
}

}  // namespace brigade::actors
