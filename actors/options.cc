#include "actors/options.h"

#include <sstream>

namespace brigade::actors {

FailureBudget FailureBudget::rate(double max_rate, std::uint64_t min_tasks) {
  FailureBudget b;
  b.max_rate_ = max_rate;
  b.min_tasks_ = min_tasks;
  return b;
}

bool FailureBudget::exceeded(std::uint64_t failures, std::uint64_t tasks) const {
  if (max_count_ >= 0 && failures > static_cast<std::uint64_t>(max_count_)) return true;
  if (max_rate_ >= 0 && tasks >= min_tasks_ && tasks > 0) {
    return static_cast<double>(failures) / static_cast<double>(tasks) > max_rate_;
  }
  return false;
}

std::string FailureBudget::describe() const {
  std::ostringstream out;
  if (max_count_ >= 0) out << "at most " << max_count_ << " failures";
  if (max_rate_ >= 0) {
    out << "at most " << max_rate_ * 100 << "% failed tasks after " << min_tasks_ << " tasks";
  }
  if (is_unlimited()) out << "unlimited";
  return out.str();
}

}  // namespace brigade::actors
