#pragma once

#include <cstdint>
#include <random>

#include "actors/positions.h"

namespace brigade::actors::testing {

// A random committed state after the pipeline pulled `pulled` of `share` positions:
// a watermark below it and some of the positions between finished out of order.
inline CommitState random_commit(std::mt19937_64& rng, std::uint64_t share) {
  CommitState c;
  const std::uint64_t pulled = share == 0 ? 0 : rng() % (share + 1);
  c.watermark = pulled == 0 ? 0 : rng() % (pulled + 1);
  for (std::uint64_t p = c.watermark + 1; p < pulled; ++p) {
    if (rng() % 2) c.above.push_back(p);
  }
  return c;
}

}  // namespace brigade::actors::testing
