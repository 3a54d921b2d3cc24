// The interval set: merging adds, splitting removes.
#include "transport/interval_set.h"

#include <gtest/gtest.h>

namespace rowan::transport {
namespace {

TEST(IntervalSet, AddMergesAndRemoveSplits) {
  IntervalSet s;
  s.add(10, 20);
  s.add(30, 40);
  s.add(20, 30);  // bridges
  ASSERT_EQ(s.range_count(), 1U);
  EXPECT_EQ(s.front().lo, 10U);
  EXPECT_EQ(s.front().hi, 40U);
  s.remove(15, 25);
  ASSERT_EQ(s.range_count(), 2U);
  EXPECT_TRUE(s.contains(14));
  EXPECT_FALSE(s.contains(15));
  EXPECT_TRUE(s.contains(25));
  s.add(0, 5);
  s.add(50, 60);
  s.add(3, 12);
  EXPECT_EQ(s.front().lo, 0U);
  EXPECT_EQ(s.front().hi, 15U);
  EXPECT_TRUE(s.covers(26, 40));
  EXPECT_FALSE(s.covers(26, 41));
  s.remove_below(30);
  EXPECT_EQ(s.front().lo, 30U);
  EXPECT_EQ(s.first_at_or_after(45), 1U);
}

}  // namespace
}  // namespace rowan::transport
