#include "actors/detail/spec.h"

#include <algorithm>

namespace brigade::actors::detail {

int StageSpec::capacity() const {
  if (kind == StageKind::aggregate) {
    if (aggregate_size > 0) return static_cast<int>(2 * aggregate_size);
    return options.queue_capacity > 0 ? options.queue_capacity : 16;
  }
  const int queue = options.queue_capacity > 0 ? options.queue_capacity : 2 * options.concurrency;
  return options.concurrency + queue;
}

const char* kind_name(StageKind kind) {
  switch (kind) {
    case StageKind::pipe:
      return "pipe";
    case StageKind::generate:
      return "generate";
    case StageKind::disaggregate:
      return "disaggregate";
    case StageKind::aggregate:
      return "aggregate";
  }
  return "?";
}

}  // namespace brigade::actors::detail
