#include "actors/task.h"

#include <algorithm>

namespace brigade::actors {

void TaskContext::fail(std::uint64_t position, std::string message, std::error_code code) {
  const bool seen = std::any_of(failures_.begin(), failures_.end(), [&](const FailureRecord& r) {
    return r.positions.size() == 1 && r.positions.front() == position;
  });
  if (seen) return;
  failures_.push_back(FailureRecord{{}, Positions(position), std::move(message), code});
}

void TaskContext::fail(std::uint64_t position, const std::exception& error) {
  fail(position, error.what(), error_code_of(error));
}

std::error_code error_code_of(const std::exception& error) {
  if (const auto* system = dynamic_cast<const std::system_error*>(&error)) return system->code();
  return {};
}

}  // namespace brigade::actors
