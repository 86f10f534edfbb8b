// A deliberate data race between two actors, built only in the ThreadSanitizer build
// (target tsan_race_canary, tests/actors/CMakeLists.txt) and run expecting TSan to report
// it: the CTest entry TsanCanary.RaceBetweenTwoActorsIsReported passes only when this
// program exits non-zero with a "data race" report naming bump_shared_tally. It proves
// that TSan sees through CAF in that build: with Debian's uninstrumented libcaf and the
// old blanket suppressions (every report with a caf:: frame), this race went unreported.
//
// Two detached actors (each on its own thread) add to one plain counter, and nothing
// orders one actor's writes against the other's. So that the report does not depend on
// timing, each actor, after its first write, waits for the other's first write through
// a relaxed atomic (which TSan, rightly, does not count as synchronization): the two
// loops then overlap, and neither can have synchronized with the other's end first.

#include <atomic>
#include <caf/all.hpp>
#include <cstdio>
#include <thread>

namespace {

struct SharedTally {
  long bumps = 0;  // deliberately unsynchronized: the race under test
  std::atomic<int> started{0};
};

[[gnu::noinline]] void bump_shared_tally(SharedTally* tally, int rounds) {
  ++tally->bumps;
  tally->started.fetch_add(1, std::memory_order_relaxed);
  while (tally->started.load(std::memory_order_relaxed) < 2) std::this_thread::yield();
  for (int i = 1; i < rounds; ++i) ++tally->bumps;
}

caf::behavior bumper(caf::event_based_actor* self, SharedTally* tally) {
  return {[=](int rounds) {
    bump_shared_tally(tally, rounds);
    self->quit();
    return rounds;
  }};
}

}  // namespace

int main() {
  caf::actor_system_config cfg;
  caf::actor_system system{cfg};
  SharedTally tally;
  const auto first = system.spawn<caf::detached>(bumper, &tally);
  const auto second = system.spawn<caf::detached>(bumper, &tally);
  caf::scoped_actor self{system};
  constexpr int kRounds = 100000;
  self->send(first, kRounds);
  self->send(second, kRounds);
  int replies = 0;
  self->receive_for(replies, 2)([](int) {});  // main reads the tally after both loops
  std::printf("bumps: %ld (of %d without the race)\n", tally.bumps, 2 * kRounds);
}
