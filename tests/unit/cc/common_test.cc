#include <gtest/gtest.h>

#include "base/units.h"
#include "common/ewma.h"
#include "common/windowed_filter.h"

namespace rowan::cc {
namespace {

TEST(WindowedFilter, MaxTracksBestWithinWindow) {
  RoundMaxFilter<uint64_t> f(10, 0, 0);
  EXPECT_TRUE(f.empty());
  EXPECT_EQ(f.get(), 0u);
  f.update(100, 0);
  EXPECT_EQ(f.get(), 100u);
  f.update(50, 1);
  EXPECT_EQ(f.get(), 100u);
  f.update(200, 2);
  EXPECT_EQ(f.get(), 200u);
  for (uint64_t r = 3; r <= 12; ++r) f.update(60, r);
  EXPECT_EQ(f.get(), 200u) << "best sample at round 2 is still inside a 10-round window at 12";
  f.update(60, 13);
  EXPECT_LT(f.get(), 200u) << "expired after the window";
  EXPECT_GE(f.get(), 60u);
}

TEST(WindowedFilter, MaxFallsBackToSecondBest) {
  RoundMaxFilter<uint64_t> f(10, 0, 0);
  f.update(1000, 0);
  // Decreasing samples; after the window the best must be a recent sample,
  // not the expired 1000 and not the minimum.
  for (uint64_t r = 1; r <= 30; ++r) f.update(1000 - r * 10, r);
  EXPECT_LE(f.get(), 1000u - 20 * 10);
  EXPECT_GE(f.get(), 1000u - 30 * 10);
}

TEST(WindowedFilter, MinOverTime) {
  TimeMinFilter<Duration, TimePoint, Duration> f(Duration::from_s(10), Duration::infinite(),
                                                 TimePoint::zero());
  TimePoint t = TimePoint::from_ns(1);
  f.update(Duration::from_ms(50), t);
  f.update(Duration::from_ms(40), t + Duration::from_s(1));
  f.update(Duration::from_ms(45), t + Duration::from_s(2));
  EXPECT_EQ(f.get(), Duration::from_ms(40));
  f.update(Duration::from_ms(60), t + Duration::from_s(10));
  EXPECT_EQ(f.get(), Duration::from_ms(40));
  f.update(Duration::from_ms(60), t + Duration::from_s(11) + Duration::from_ns(1));
  EXPECT_GT(f.get(), Duration::from_ms(40)) << "the 40 ms sample is older than 10 s";
  f.update(Duration::from_ms(70), t + Duration::from_s(40));
  EXPECT_EQ(f.get(), Duration::from_ms(70)) << "everything older than the window is gone";
}

TEST(WindowedFilter, ResetAndClear) {
  RoundMaxFilter<uint64_t> f(10, 0, 0);
  f.update(500, 1);
  f.reset(7, 2);
  EXPECT_EQ(f.get(), 7u);
  f.clear();
  EXPECT_TRUE(f.empty());
  f.update(3, 3);
  EXPECT_EQ(f.get(), 3u) << "first sample after clear is taken even if worse";
}

TEST(Ewma, ConvergesWithWeight) {
  Ewma e(3);  // 1/8
  EXPECT_FALSE(e.valid());
  e.update(800);
  EXPECT_EQ(e.get(), 800);
  e.update(0);
  EXPECT_EQ(e.get(), 700);  // 800 - 800/8
  for (int i = 0; i < 200; ++i) e.update(80);
  EXPECT_NEAR(e.get(), 80, 1);
  e.reset();
  EXPECT_FALSE(e.valid());
}

TEST(Ewma, KeepsPrecisionForSmallSteps) {
  Ewma e(4);  // 1/16
  e.update(0);
  for (int i = 0; i < 400; ++i) e.update(5);
  EXPECT_GE(e.get(), 4);  // without scaling, (5-0)>>4 == 0 would stick at 0
}

}  // namespace
}  // namespace rowan::cc
