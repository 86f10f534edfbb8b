#include "actors/clock.h"

namespace brigade::actors {
namespace {

class SteadyClock final : public Clock {
 public:
  time_point now() const override { return std::chrono::steady_clock::now(); }
};

}  // namespace

std::shared_ptr<const Clock> Clock::steady() {
  static const auto clock = std::make_shared<const SteadyClock>();
  return clock;
}

}  // namespace brigade::actors
