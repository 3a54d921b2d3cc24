// BusyMeter on a fake timeline: passes with work count as busy, passes
// without (and the sleep after them) as idle; the ratio covers the last window.
#include <gtest/gtest.h>

#include "datapath/busy_meter.h"

namespace rowan::gw {
namespace {

TEST(BusyMeter, SplitsTheLoopsTimeByWhetherAPassWorked) {
  BusyMeter m;
  TimePoint t = TimePoint::from_ns(5'000'000'000);
  bool worked = false;
  // 0.5 s of passes: 3 ms busy, then 7 ms idle, repeated.
  for (int i = 0; i < 50; ++i) {
    m.on_pass(t, worked);
    worked = true;
    t = t + Duration::from_ms(3);
    m.on_pass(t, worked);
    worked = false;
    t = t + Duration::from_ms(7);
  }
  m.on_pass(t, worked);
  EXPECT_EQ(m.busy(), Duration::from_ms(150));
  EXPECT_EQ(m.idle(), Duration::from_ms(350));
  EXPECT_EQ(m.busy_ratio(), 0);  // no full window yet
  // Another 0.6 s, all busy: the first full window is (150 + 500) / 1000 busy.
  for (int i = 0; i < 60; ++i) {
    t = t + Duration::from_ms(10);
    m.on_pass(t, true);
  }
  EXPECT_NEAR(m.busy_ratio(), 0.65, 1e-9);
  EXPECT_EQ(m.busy() + m.idle(), Duration::from_ms(1100));
  // A second window: its first 100 ms busy (above), then nothing but sleep.
  for (int i = 0; i < 10; ++i) {
    m.on_pass(t, false);
    t = t + Duration::from_ms(100);
  }
  m.on_pass(t, false);
  EXPECT_NEAR(m.busy_ratio(), 0.1, 1e-9);
}

}  // namespace
}  // namespace rowan::gw
