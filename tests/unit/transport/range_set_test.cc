// The B-tree range set of stream offsets: merging adds, splitting removes,
// and the same answers as a plain bitmap under random operations.
#include "transport/range_set.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace rowan::transport {
namespace {

std::vector<RangeSet::Range> all(const RangeSet& s) {
  std::vector<RangeSet::Range> v;
  RangeSet::Range r{};
  uint64_t x = 0;
  while (s.first_at_or_after(x, &r)) {
    v.push_back(r);
    x = r.hi;
  }
  return v;
}

TEST(RangeSet, AddMergesAndRemoveSplits) {
  RangeSet s;
  EXPECT_TRUE(s.empty());
  s.add(10, 20);
  s.add(30, 40);
  s.add(20, 30);  // bridges both
  ASSERT_EQ(s.range_count(), 1U);
  EXPECT_EQ(s.front().lo, 10U);
  EXPECT_EQ(s.front().hi, 40U);
  s.remove(15, 25);  // splits
  ASSERT_EQ(s.range_count(), 2U);
  EXPECT_TRUE(s.contains(14));
  EXPECT_FALSE(s.contains(15));
  EXPECT_FALSE(s.contains(24));
  EXPECT_TRUE(s.contains(25));
  s.add(0, 5);
  s.add(50, 60);
  s.add(3, 12);  // overlaps two
  EXPECT_EQ(s.front().lo, 0U);
  EXPECT_EQ(s.front().hi, 15U);
  EXPECT_EQ(s.back().lo, 50U);
  EXPECT_TRUE(s.covers(26, 40));
  EXPECT_FALSE(s.covers(26, 41));
  EXPECT_TRUE(s.covers(7, 7));
  RangeSet::Range r{};
  ASSERT_TRUE(s.first_at_or_after(45, &r));
  EXPECT_EQ(r.lo, 50U);
  ASSERT_TRUE(s.first_at_or_after(27, &r));  // the range holding it
  EXPECT_EQ(r.lo, 25U);
  EXPECT_FALSE(s.first_at_or_after(60, &r));
  s.remove(0, 100);
  EXPECT_TRUE(s.empty());
}

TEST(RangeSet, RemoveAtARangesEdges) {
  RangeSet s;
  s.add(10, 20);
  s.remove(10, 12);  // its start
  EXPECT_EQ(s.front().lo, 12U);
  s.remove(18, 30);  // its end, and beyond
  EXPECT_EQ(s.front().hi, 18U);
  s.remove(12, 18);  // exactly it
  EXPECT_TRUE(s.empty());
  s.add(10, 20);
  s.remove(10, 15);  // from its start, inside it
  ASSERT_EQ(s.range_count(), 1U);
  EXPECT_EQ(s.front().lo, 15U);
  EXPECT_EQ(s.front().hi, 20U);
  s.add(5, 8);
  s.pop_front();
  EXPECT_EQ(s.front().lo, 15U);
}

// Random adds and removes (clustered, as packets of several paths land)
// against a bitmap: the same members, and ranges that are sorted, disjoint
// and never adjacent.
TEST(RangeSet, MatchesABitmapUnderRandomOperations) {
  constexpr uint64_t kSpace = 4096;
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    RangeSet s;
    std::vector<bool> bits(kSpace, false);
    for (int op = 0; op < 2000; ++op) {
      const uint64_t lo = rng() % kSpace;
      const uint64_t hi = std::min<uint64_t>(kSpace, lo + 1 + rng() % 64);
      if (rng() % 3 == 0) {
        s.remove(lo, hi);
        for (uint64_t x = lo; x < hi; ++x) bits[x] = false;
      } else {
        s.add(lo, hi);
        for (uint64_t x = lo; x < hi; ++x) bits[x] = true;
      }
      if (op % 50 != 0) continue;
      for (uint64_t x = 0; x < kSpace; ++x) ASSERT_EQ(s.contains(x), bits[x]) << seed << " " << x;
      const auto v = all(s);
      ASSERT_EQ(v.size(), s.range_count());
      for (size_t i = 0; i < v.size(); ++i) {
        ASSERT_LT(v[i].lo, v[i].hi);
        if (i > 0) {
          ASSERT_GT(v[i].lo, v[i - 1].hi) << "ranges overlap or touch";
        }
      }
    }
  }
}

// Many open ranges (one path's holes among many paths' data): a million
// interleaved inserts fill the holes in any order and end in one range.
TEST(RangeSet, FillsAMillionHolesInAnyOrder) {
  RangeSet s;
  constexpr uint64_t kN = 1 << 20;
  for (uint64_t i = 0; i < kN; i += 2) s.add(i * 10, i * 10 + 10);
  EXPECT_EQ(s.range_count(), kN / 2);
  std::mt19937_64 rng(7);
  std::vector<uint64_t> holes;
  for (uint64_t i = 1; i < kN; i += 2) holes.push_back(i);
  std::shuffle(holes.begin(), holes.end(), rng);
  for (uint64_t i : holes) s.add(i * 10, i * 10 + 10);
  ASSERT_EQ(s.range_count(), 1U);
  EXPECT_EQ(s.front().lo, 0U);
  EXPECT_EQ(s.front().hi, kN * 10);
}

}  // namespace
}  // namespace rowan::transport
