#include "cubic/cubic.h"

#include <gtest/gtest.h>

#include <cmath>

#include "cc_test_util.h"
#include "registry.h"
#include "tools/fake_clock.h"

namespace rowan::cc {
namespace {

constexpr Bytes kMss = 1000;
const Duration kRtt = Duration::from_ms(10);

struct CubicTest : ::testing::Test {
  rowan::test::FakeClock clock;
  PathHints hints{BitsPerSec::zero(), Duration::zero(), kMss};
  Cubic::Config cfg;
  Cubic make() { return Cubic(clock, hints, cfg); }
};

TEST_F(CubicTest, SlowStartDoublesPerRound) {
  cfg.hystart = false;
  Cubic c = make();
  test::AckDriver d(c, kMss, clock.now());
  EXPECT_EQ(c.cwnd(), 10 * kMss);
  EXPECT_TRUE(c.in_slow_start());
  d.round_trip(kRtt);
  EXPECT_EQ(c.cwnd(), 20 * kMss);
  d.round_trip(kRtt);
  EXPECT_EQ(c.cwnd(), 40 * kMss);
}

TEST_F(CubicTest, LossCutsByBetaOncePerRound) {
  cfg.hystart = false;
  Cubic c = make();
  test::AckDriver d(c, kMss, clock.now());
  for (int i = 0; i < 4; ++i) d.round_trip(kRtt);
  const Bytes before = c.cwnd();
  ASSERT_EQ(before, 160 * kMss);
  d.advance(Duration::from_ms(1));
  d.ack(1, kRtt, BitsPerSec::zero(), false, 1);
  EXPECT_EQ(c.cwnd(), static_cast<Bytes>(0.7 * static_cast<double>(before)));
  EXPECT_EQ(c.ssthresh(), c.cwnd());
  EXPECT_EQ(c.w_max(), before);
  // More losses reported for packets sent before the reduction: same event.
  const Bytes after = c.cwnd();
  d.advance(Duration::from_ms(1));
  d.ack(1, kRtt, BitsPerSec::zero(), false, 3);
  EXPECT_EQ(c.cwnd(), after);
  // Once packets sent after the reduction are acked, a new loss cuts again.
  d.advance(kRtt * 2);
  d.ack(1, kRtt, BitsPerSec::zero(), false, 0);
  d.advance(Duration::from_ms(1));
  d.ack(1, kRtt, BitsPerSec::zero(), false, 1);
  EXPECT_LT(c.cwnd(), after);
  // Fast convergence: second loss below the old W_max lowers W_max further.
  EXPECT_LT(c.w_max(), after);
}

TEST_F(CubicTest, WindowFollowsRfcCubicCurve) {
  cfg.hystart = false;
  Cubic c = make();
  test::AckDriver d(c, kMss, clock.now());
  // A long RTT so the cubic curve, not the Reno-friendly W_est, governs.
  const Duration rtt = Duration::from_ms(100);
  // Grow to 1280 packets then lose: W_max = 1280 pkts, cwnd_epoch = 896.
  for (int i = 0; i < 7; ++i) d.round_trip(rtt);
  ASSERT_EQ(c.cwnd(), 1280 * kMss);
  d.advance(Duration::from_ms(1));
  d.ack(1, rtt, BitsPerSec::zero(), false, 1);
  const double w_max = 1280.0;
  const double cwnd_epoch = 896.0;
  // First ACK after recovery starts the epoch.
  d.advance(rtt * 2);
  d.ack(1, rtt);
  const TimePoint epoch = d.now();
  const double k_expected = std::cbrt((w_max - cwnd_epoch) / 0.4);
  EXPECT_NEAR(c.k().seconds(), k_expected, 0.01);
  // Drive ACKs for 2·K seconds at one window per RTT and compare with
  // W_cubic(t + RTT) (the RFC's target) at a few points.
  const double k = c.k().seconds();
  for (double frac : {0.25, 0.5, 1.0, 1.5}) {
    while ((d.now() - epoch).seconds() < frac * k) d.round_trip(rtt, BitsPerSec::zero(), 50);
    const double t = (d.now() - epoch).seconds();
    const double expect =
        0.4 * std::pow(t + rtt.seconds() - k, 3) + w_max;  // packets, one RTT ahead
    EXPECT_NEAR(static_cast<double>(c.cwnd()) / kMss, expect, 0.03 * expect) << "t=" << t;
  }
  // Near K the window is back at W_max (plateau).
  EXPECT_GT(static_cast<double>(c.cwnd()) / kMss, w_max);
}

TEST_F(CubicTest, RenoFriendlyRegionAtSmallWindows) {
  // With a tiny W_max the cubic curve is slower than Reno; W_est governs and
  // grows by ~alpha_cubic = 3(1-b)/(1+b) segments per RTT.
  cfg.hystart = false;
  cfg.initial_cwnd_packets = 20;
  Cubic c = make();
  test::AckDriver d(c, kMss, clock.now());
  d.ack(1, kRtt, BitsPerSec::zero(), false, 1);  // cwnd 14 pkts
  d.advance(kRtt * 2);
  d.ack(1, kRtt);
  const Bytes start = c.cwnd();
  const Duration long_rtt = Duration::from_ms(200);  // slow cubic clock, many RTTs
  for (int i = 0; i < 5; ++i) d.round_trip(long_rtt, BitsPerSec::zero(), 14);
  const double grown = static_cast<double>(c.cwnd() - start) / kMss;
  EXPECT_GE(grown, 5 * 0.5);
  EXPECT_LE(grown, 5 * 1.2 + 1);
}

TEST_F(CubicTest, RtoCollapsesWindow) {
  cfg.hystart = false;
  Cubic c = make();
  test::AckDriver d(c, kMss, clock.now());
  d.round_trip(kRtt);
  c.on_rto(d.now());
  EXPECT_EQ(c.cwnd(), 2 * kMss);
  EXPECT_EQ(c.ssthresh(), 14 * kMss);
  d.round_trip(kRtt);  // acks of packets sent before the RTO: no growth
  EXPECT_EQ(c.cwnd(), 2 * kMss);
  d.advance(kRtt);
  d.round_trip(kRtt);
  EXPECT_GT(c.cwnd(), 2 * kMss) << "slow start again up to ssthresh";
}

TEST_F(CubicTest, SpuriousLossUndoesReduction) {
  cfg.hystart = false;
  Cubic c = make();
  test::AckDriver d(c, kMss, clock.now());
  for (int i = 0; i < 3; ++i) d.round_trip(kRtt);
  const Bytes before = c.cwnd();
  d.ack(1, kRtt, BitsPerSec::zero(), false, 1);
  ASSERT_LT(c.cwnd(), before);
  c.on_spurious_loss(d.now());
  EXPECT_EQ(c.cwnd(), before + 0);
  EXPECT_TRUE(c.in_slow_start());
}

TEST_F(CubicTest, HystartLeavesSlowStartOnRttGrowth) {
  Cubic c = make();
  test::AckDriver d(c, kMss, clock.now());
  Duration rtt = Duration::from_ms(50);
  for (int i = 0; i < 3; ++i) d.round_trip(rtt, BitsPerSec::zero(), 20);
  EXPECT_TRUE(c.in_slow_start());
  EXPECT_FALSE(c.in_css());
  // Queue builds: RTT +10 ms (threshold is clamp(50/8, 4, 16) = 6.25 ms).
  rtt = Duration::from_ms(60);
  d.round_trip(rtt, BitsPerSec::zero(), 20);
  EXPECT_TRUE(c.in_css());
  const Bytes css_start = c.cwnd();
  d.round_trip(rtt, BitsPerSec::zero(), 20);
  const double growth = static_cast<double>(c.cwnd() - css_start) / static_cast<double>(css_start);
  EXPECT_NEAR(growth, 0.25, 0.05) << "CSS grows by 1/4 of acked";
  for (int i = 0; i < 6; ++i) d.round_trip(rtt, BitsPerSec::zero(), 20);
  EXPECT_FALSE(c.in_slow_start()) << "after 5 CSS rounds: congestion avoidance without a loss";
}

TEST_F(CubicTest, NoGrowthWhenAppLimited) {
  cfg.hystart = false;
  Cubic c = make();
  test::AckDriver d(c, kMss, clock.now());
  d.set_in_flight(2 * kMss);  // far below cwnd
  d.round_trip(kRtt);
  EXPECT_EQ(c.cwnd(), 10 * kMss);
}

TEST_F(CubicTest, PacingRateFromCwndAndSrtt) {
  cfg.hystart = false;
  Cubic c = make();
  test::AckDriver d(c, kMss, clock.now());
  d.ack(1, kRtt);
  const double expect = 2.0 * static_cast<double>(c.cwnd()) * 8 / kRtt.seconds();
  EXPECT_NEAR(static_cast<double>(c.pacing_rate().bps()), expect, expect * 0.01);
}

TEST(CubicParams, ParsesAndRejects) {
  rowan::test::FakeClock clock;
  PathHints hints;
  CcParams ok = test::params({{"beta", "0.8"}, {"hystart", "false"}});
  auto cc = Registry::create("cubic", clock, hints, ok);
  EXPECT_EQ(cc->name(), "cubic");
  EXPECT_THROW(Registry::create("cubic", clock, hints, test::params({{"beta", "1.5"}})),
               CcParamError);
  EXPECT_THROW(Registry::create("cubic", clock, hints, test::params({{"betta", "0.7"}})),
               CcParamError);
  EXPECT_THROW(Registry::create("cubic", clock, hints, test::params({{"hystart", "maybe"}})),
               CcParamError);
}

}  // namespace
}  // namespace rowan::cc
