#include <spdlog/spdlog.h>

#include "actors/detail/run.h"

namespace brigade::actors::detail {
namespace {

struct SourceState {
  SourceState() = default;
  static inline const char* name = "brigade.source";
  std::unique_ptr<SourceCursor> cursor;
  std::uint64_t next_position = 0;
};

// The source runs on a thread of its own (detached): a sampler may take a while at
// the start of an epoch (a 10 M-id permutation takes ~0.2 s) and must not stall a
// scheduler thread meanwhile. Blocking work (reading files) belongs in an io stage.
source_actor::behavior_type source_main(source_actor::stateful_pointer<SourceState> self,
                                        std::shared_ptr<RunShared> run,
                                        downstream_actor downstream) {
  try {
    self->state.cursor = run->spec.source->open();
  } catch (const std::exception& e) {
    run->fail(std::string("the source failed to open: ") + e.what());
  }
  return {
      [=](demand_atom, std::uint32_t n) {
        auto& st = self->state;
        if (run->stopping.load(std::memory_order_relaxed) || !st.cursor) {
          self->quit();
          return;
        }
        auto items = std::make_shared<std::vector<Item>>();
        items->reserve(n);
        bool exhausted = false;
        try {
          for (std::uint32_t i = 0; i < n; ++i) {
            AnyValue value;
            std::uint64_t position = st.next_position;
            if (!st.cursor->next(value, position)) {
              exhausted = true;
              break;
            }
            st.next_position = position + 1;
            items->push_back(Item{std::move(value), Positions(position)});
          }
        } catch (const std::exception& e) {
          run->fail("the source threw after position " + std::to_string(st.next_position) + ": " +
                    e.what());
          self->quit();
          return;
        }
        run->source_items.fetch_add(items->size(), std::memory_order_relaxed);
        if (!items->empty()) self->send(downstream, items_atom::value, ItemBatch{items});
        if (exhausted) {
          self->send(downstream, end_atom::value);
          self->quit();
        }
      },
      [=](stop_atom) { self->quit(); },
  };
}

struct SinkState {
  SinkState() = default;  // not an aggregate: CAF probes State(self)
  static inline const char* name = "brigade.sink";
  upstream_actor upstream;
};

sink_actor::behavior_type sink_main(sink_actor::stateful_pointer<SinkState> self,
                                    std::shared_ptr<RunShared> run) {
  // Credit is granted in batches of at least half the buffer: the consumer wakes the
  // sink once per half buffer it drains, not once per item.
  const std::size_t min_grant = std::max<std::size_t>(1, run->queue.capacity() / 2);
  auto grant = [=] {
    if (!self->state.upstream) return;
    if (auto n = run->queue.reserve(min_grant); n > 0) {
      self->send(self->state.upstream, demand_atom::value, static_cast<std::uint32_t>(n));
    }
  };
  return {
      [=](connect_atom, upstream_actor up) {
        self->state.upstream = std::move(up);
        grant();
      },
      [=](items_atom, ItemBatch& batch) {
        run->queue.push(*batch.items);
        grant();  // grants what is free now, or arms the consumer's wake-up
      },
      [=](wake_atom) { grant(); },
      [=](end_atom) {
        run->queue.close();
        self->quit();
      },
      [=](stop_atom) { self->quit(); },
  };
}

}  // namespace

source_actor spawn_source(caf::actor_system& system, std::shared_ptr<RunShared> run,
                          downstream_actor downstream) {
  return system.spawn<caf::detached>(source_main, std::move(run), std::move(downstream));
}

sink_actor spawn_sink(caf::actor_system& system, std::shared_ptr<RunShared> run) {
  return system.spawn(sink_main, std::move(run));
}

caf::actor spawn_stats_reporter(caf::actor_system& system, std::shared_ptr<RunShared> run,
                                std::function<PipelineStats()> snapshot) {
  // Detached: the user's callback never occupies a scheduler thread.
  return system.spawn<caf::detached>([run, snapshot](caf::event_based_actor* self) {
    const auto interval = run->options.stats_interval;
    self->delayed_send(self, interval, tick_atom::value);
    return caf::behavior{
        [=](tick_atom) {
          if (run->stopping.load()) return;
          try {
            run->options.on_stats(snapshot());
          } catch (const std::exception& e) {
            spdlog::warn("brigade: the statistics callback threw: {}", e.what());
          }
          self->delayed_send(self, interval, tick_atom::value);
        },
        [=](stop_atom) { self->quit(); },
    };
  });
}

}  // namespace brigade::actors::detail
