#include "actors/detail/run.h"

#include <spdlog/spdlog.h>

namespace brigade::actors::detail {

namespace {
constexpr std::size_t kRecentFailures = 16;
}

RunShared::RunShared(const PipelineSpec& s, const BuildOptions& o, CommitState resume,
                     std::shared_ptr<LifetimeCounts> counts)
    : spec(s),
      options(o),
      clock(*o.clock),
      queue(static_cast<std::size_t>(*s.sink_buffer), clock),
      commits(std::move(resume)),
      lifetime(std::move(counts)) {
  for (const auto& stage : spec.stages) {
    counters.push_back(std::make_unique<StageCounters>(stage.options.name, kind_name(stage.kind),
                                                       stage.options.concurrency, stage.capacity(),
                                                       clock));
  }
}

void RunShared::add_actor(const caf::actor& actor) {
  std::lock_guard lock(mutex_);
  actors_.push_back(actor);
}

void RunShared::stop_all() {
  stop_source.request_stop();
  std::vector<caf::actor> actors;
  {
    std::lock_guard lock(mutex_);
    actors = actors_;
  }
  for (const auto& a : actors) caf::anon_send(a, stop_atom::value);
}

void RunShared::record_failure(SampleFailure record) {
  std::lock_guard lock(mutex_);
  recent_.push_back(std::move(record));
  if (recent_.size() > kRecentFailures) recent_.pop_front();
}

std::vector<SampleFailure> RunShared::recent_failures() const {
  std::lock_guard lock(mutex_);
  return {recent_.begin(), recent_.end()};
}

void RunShared::fail(const std::string& reason) {
  if (stopping.exchange(true)) return;  // the first failure or stop wins
  spdlog::error("brigade: pipeline failed: {}", reason);
  queue.close(std::make_exception_ptr(PipelineFailure(reason, recent_failures())));
  stop_all();
}

}  // namespace brigade::actors::detail
