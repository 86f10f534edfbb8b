#include <spdlog/spdlog.h>

#include <optional>
#include <string>

#include "actors/detail/run.h"

namespace brigade::actors::detail {
namespace {

struct SourceState {
  SourceState() = default;
  static inline const char* name = "brigade.source";
  std::unique_ptr<SourceCursor> cursor;
  std::uint64_t next_position = 0;
  std::optional<Item> first;  // drawn before the actor started (see spawn_source)
  bool exhausted = false;     // the cursor has ended
};

// What spawn_source prepares on the calling thread: the open cursor and its first item.
struct SourceStart {
  std::unique_ptr<SourceCursor> cursor;
  std::optional<Item> first;
  std::uint64_t next_position = 0;
  bool exhausted = false;
  std::string error;  // non-empty: the run fails with it
};

// Draws the source's next item; false when it has ended.
bool draw(SourceCursor& cursor, std::uint64_t& next_position, Item& out) {
  AnyValue value;
  std::uint64_t position = next_position;
  if (!cursor.next(value, position)) return false;
  next_position = position + 1;
  out = Item{std::move(value), Positions(position)};
  return true;
}

SourceStart open_source(const RunShared& run) {
  SourceStart start;
  try {
    start.cursor = run.spec.source->open();
  } catch (const std::exception& e) {
    start.error = std::string("the source failed to open: ") + e.what();
    return start;
  }
  try {
    Item item;
    if (draw(*start.cursor, start.next_position, item)) {
      start.first = std::move(item);
    } else {
      start.exhausted = true;
    }
  } catch (const std::exception& e) {
    start.error = "the source threw after position 0: " + std::string(e.what());
  }
  return start;
}

// The source runs on the scheduler like the stages: a detached thread of its own
// costs a futex wake-up and two context switches per demand message (measured: 35% of
// bench_engine's context switches, a third of its rate). What may take long is the
// start of an epoch (opening the cursor, a sampler's 10 M-id permutation: ~0.2 s):
// spawn_source does that on the thread that starts the run (the consumer, which
// waits for the first item anyway) by drawing the first item before the actor exists.
// Later draws are expected to be cheap; blocking work belongs in an io stage.
source_actor::behavior_type source_main(source_actor::stateful_pointer<SourceState> self,
                                        std::shared_ptr<RunShared> run, downstream_actor downstream,
                                        std::shared_ptr<SourceStart> start) {
  if (!start->error.empty()) {
    run->fail(start->error);
    self->quit();
    return {[=](demand_atom, std::uint32_t) {}, [=](stop_atom) {}};
  }
  self->state.cursor = std::move(start->cursor);
  self->state.first = std::move(start->first);
  self->state.next_position = start->next_position;
  self->state.exhausted = start->exhausted;
  return {
      [=](demand_atom, std::uint32_t n) {
        auto& st = self->state;
        if (run->stopping.load(std::memory_order_relaxed) || !st.cursor) {
          self->quit();
          return;
        }
        auto items = std::make_shared<std::vector<Item>>();
        items->reserve(n);
        if (st.first && n > 0) {
          items->push_back(std::move(*st.first));
          st.first.reset();
        }
        try {
          while (!st.exhausted && items->size() < n) {
            Item item;
            if (!draw(*st.cursor, st.next_position, item)) {
              st.exhausted = true;
              break;
            }
            items->push_back(std::move(item));
          }
        } catch (const std::exception& e) {
          run->fail("the source threw after position " + std::to_string(st.next_position) + ": " +
                    e.what());
          self->quit();
          return;
        }
        run->source_items.fetch_add(items->size(), std::memory_order_relaxed);
        if (!items->empty()) self->send(downstream, items_atom::value, ItemBatch{std::move(items)});
        if (st.exhausted) {
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
  auto start = std::make_shared<SourceStart>(open_source(*run));
  return system.spawn(source_main, std::move(run), std::move(downstream), std::move(start));
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
