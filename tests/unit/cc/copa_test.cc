#include "copa/copa.h"

#include <gtest/gtest.h>

#include "cc_test_util.h"
#include "mini_sim.h"
#include "registry.h"
#include "tools/fake_clock.h"

namespace rowan::cc {
namespace {

constexpr Bytes kMss = 1000;
const Duration kRtt = Duration::from_ms(10);

struct CopaTest : ::testing::Test {
  rowan::test::FakeClock clock;
  PathHints hints{BitsPerSec::zero(), Duration::zero(), kMss};
  Copa::Config cfg;
};

TEST_F(CopaTest, SlowStartDoublesOncePerRttWithoutQueue) {
  Copa c(clock, hints, cfg);
  test::AckDriver d(c, kMss, clock.now());
  EXPECT_EQ(c.cwnd(), 10 * kMss);
  d.round_trip(kRtt, BitsPerSec::zero(), 10);
  EXPECT_EQ(c.cwnd(), 20 * kMss);
  d.round_trip(kRtt, BitsPerSec::zero(), 10);
  EXPECT_EQ(c.cwnd(), 40 * kMss);
  EXPECT_TRUE(c.in_slow_start());
}

TEST_F(CopaTest, DecreasesWhenRateAboveTargetAndLeavesSlowStart) {
  Copa c(clock, hints, cfg);
  test::AckDriver d(c, kMss, clock.now());
  for (int i = 0; i < 4; ++i) d.round_trip(kRtt, BitsPerSec::zero(), 10);
  const Bytes w = c.cwnd();  // 160 packets
  // A standing queue of 5 ms: target 1/(0.5·5 ms) = 400 pkt/s, far below
  // 160 pkts / 15 ms.
  const Duration q = kRtt + Duration::from_ms(5);
  d.round_trip(q, BitsPerSec::zero(), 10);
  d.round_trip(q, BitsPerSec::zero(), 10);
  EXPECT_FALSE(c.in_slow_start());
  EXPECT_LT(c.cwnd(), w);
  EXPECT_NEAR(c.standing_rtt().seconds(), q.seconds(), 1e-9);
  EXPECT_EQ(c.min_rtt(), kRtt);
}

TEST_F(CopaTest, VelocityDoublesAfterThreeRoundsSameDirection) {
  Copa c(clock, hints, cfg);
  test::AckDriver d(c, kMss, clock.now());
  d.round_trip(kRtt, BitsPerSec::zero(), 10);
  // Leave slow start with one queued round, then keep the queue empty: the
  // window increases every RTT, and v doubles after 3 RTTs.
  d.round_trip(kRtt + Duration::from_ms(5), BitsPerSec::zero(), 10);
  ASSERT_FALSE(c.in_slow_start());
  for (int i = 0; i < 8; ++i) d.round_trip(kRtt, BitsPerSec::zero(), 10);
  EXPECT_GE(c.velocity(), 4u);
  // A direction change resets it.
  d.round_trip(kRtt + Duration::from_ms(8), BitsPerSec::zero(), 10);
  EXPECT_EQ(c.velocity(), 1u);
}

TEST_F(CopaTest, IgnoresLossButNotRto) {
  Copa c(clock, hints, cfg);
  test::AckDriver d(c, kMss, clock.now());
  d.round_trip(kRtt);
  const Bytes w = c.cwnd();
  d.advance(kRtt);
  d.ack(1, kRtt, BitsPerSec::zero(), false, 3);
  EXPECT_GE(c.cwnd(), w);
  c.on_rto(d.now());
  EXPECT_EQ(c.cwnd(), 2 * kMss);
  EXPECT_TRUE(c.in_slow_start());
}

TEST_F(CopaTest, ClosedLoopShortQueueAndFair) {
  rowan::test::FakeClock c0{TimePoint::zero()};
  const BitsPerSec rate = BitsPerSec::from_mbps(100);
  test::SimConfig sc{rate, 4 * rate.bytes_in(kRtt), 0, kMss};
  test::MiniSim sim(sc, {test::SimFlowSpec{kRtt}, test::SimFlowSpec{kRtt}});
  for (size_t i = 0; i < 2; ++i) sim.set_cc(i, std::make_unique<Copa>(c0, hints, cfg));
  sim.run(TimePoint::from_ns(Duration::from_s(6).ns()),
          TimePoint::from_ns(Duration::from_s(2).ns()));
  EXPECT_GT(sim.utilization(), 0.85);
  // Equilibrium queue ≈ 2/δ = 4 packets (0.3 ms at 100 Mbit/s), with oscillation.
  EXPECT_LT(sim.queue_delay_percentile(0.95), Duration::from_ms(3));
  EXPECT_GT(sim.jain(), 0.9) << sim.throughput_gbps(0) << " " << sim.throughput_gbps(1);
}

TEST(CopaParams, ParsesAndRejects) {
  rowan::test::FakeClock clock;
  PathHints hints;
  EXPECT_EQ(Registry::create("copa", clock, hints, test::params({{"delta", "0.1"}}))->name(),
            "copa");
  EXPECT_THROW(Registry::create("copa", clock, hints, test::params({{"delta", "0"}})),
               CcParamError);
  EXPECT_THROW(Registry::create("copa", clock, hints, test::params({{"mode", "competitive"}})),
               CcParamError);
}

}  // namespace
}  // namespace rowan::cc
