#include "actors/positions.h"

#include <gtest/gtest.h>

namespace brigade::actors {
namespace {

TEST(Positions, InlineThenHeap) {
  Positions p;
  EXPECT_TRUE(p.empty());
  p.push_back(5);
  EXPECT_EQ(p.size(), 1u);
  EXPECT_EQ(p.front(), 5u);
  p.push_back(9);
  p.append(Positions{1, 2});
  EXPECT_EQ(p, (Positions{5, 9, 1, 2}));
  Positions q(3);
  q.append(Positions(4));
  EXPECT_EQ(q, (Positions{3, 4}));
  q.clear();
  EXPECT_TRUE(q.empty());
  q.append(Positions(8));
  EXPECT_EQ(q, Positions(8));
}

}  // namespace
}  // namespace brigade::actors
