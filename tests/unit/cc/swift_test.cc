#include "swift/swift.h"

#include <gtest/gtest.h>

#include <cmath>

#include "cc_test_util.h"
#include "mini_sim.h"
#include "registry.h"
#include "tools/fake_clock.h"

namespace rowan::cc {
namespace {

constexpr Bytes kMss = 1000;
const Duration kBase = Duration::from_ms(1);

struct SwiftTest : ::testing::Test {
  rowan::test::FakeClock clock;
  PathHints hints{BitsPerSec::zero(), Duration::zero(), kMss};
  Swift::Config cfg;
};

TEST_F(SwiftTest, AdditiveIncreaseBelowTarget) {
  cfg.initial_cwnd_packets = 20;
  Swift s(clock, hints, cfg);
  test::AckDriver d(s, kMss, clock.now());
  d.ack(1, kBase);  // establishes min RTT
  const double start = s.cwnd_packets();
  for (int r = 0; r < 10; ++r) d.round_trip(kBase, BitsPerSec::zero(), 20);
  // ai = 1 packet per RTT (ai/cwnd per acked packet).
  EXPECT_NEAR(s.cwnd_packets() - start, 10.0, 1.0);
}

TEST_F(SwiftTest, TargetHasFlowScaling) {
  Swift s(clock, hints, cfg);
  test::AckDriver d(s, kMss, clock.now());
  d.ack(1, kBase);
  const Duration fixed = kBase + cfg.base_target + kBase.scaled(cfg.target_per_rtt);
  // At 10 packets: fs = α/√10 + β with fs(0.1) = 200 us, fs(100) = 0.
  const double alpha = 200e-6 / (1 / std::sqrt(0.1) - 1 / std::sqrt(100.0));
  const double w = s.cwnd_packets();  // ~10 (grew by ai/cwnd on the first ACK)
  const double fs10 = alpha / std::sqrt(w) - alpha / std::sqrt(100.0);
  EXPECT_NEAR((s.target_delay() - fixed).seconds(), fs10, 1e-8);
  // Large windows get no extra target.
  cfg.initial_cwnd_packets = 1000;
  Swift big(clock, hints, cfg);
  test::AckDriver d2(big, kMss, clock.now());
  d2.ack(1, kBase);
  EXPECT_NEAR((big.target_delay() - fixed).seconds(), 0, 1e-9);
}

TEST_F(SwiftTest, MultiplicativeDecreaseBoundedAndOncePerRtt) {
  cfg.initial_cwnd_packets = 100;
  Swift s(clock, hints, cfg);
  test::AckDriver d(s, kMss, clock.now());
  d.ack(1, kBase);
  const double w0 = s.cwnd_packets();
  const Duration target = s.target_delay();
  // Slightly above target: 1 - β·(d - t)/d.
  const Duration delay = target + Duration::from_us(200);
  d.advance(kBase);
  d.ack(1, delay);
  const double expect = w0 * (1 - 0.8 * (delay - target).seconds() / delay.seconds());
  EXPECT_NEAR(s.cwnd_packets(), expect, 1e-6);
  // Within the same RTT: no second decrease.
  d.advance(Duration::from_us(100));
  d.ack(1, delay * 10);
  EXPECT_NEAR(s.cwnd_packets(), expect, 1e-6);
  // A huge delay later: the cut is bounded by max_mdf (0.5).
  d.advance(delay * 10);
  d.ack(1, delay * 10);
  EXPECT_NEAR(s.cwnd_packets(), expect * 0.5, 1e-6);
}

TEST_F(SwiftTest, LossAndRto) {
  cfg.initial_cwnd_packets = 64;
  Swift s(clock, hints, cfg);
  test::AckDriver d(s, kMss, clock.now());
  d.ack(1, kBase);
  d.advance(kBase);
  d.ack(1, kBase, BitsPerSec::zero(), false, 1);
  EXPECT_NEAR(s.cwnd_packets(), 32, 0.1);
  for (int i = 0; i < 5; ++i) {
    d.advance(kBase * 3);
    s.on_rto(d.now());
  }
  EXPECT_NEAR(s.cwnd_packets(), cfg.min_cwnd, 1e-9) << "5 consecutive RTOs reset to min_cwnd";
  EXPECT_EQ(s.cwnd(), kMss);
}

TEST_F(SwiftTest, PacesBelowOnePacket) {
  cfg.initial_cwnd_packets = 1;
  Swift s(clock, hints, cfg);
  test::AckDriver d(s, kMss, clock.now());
  d.ack(0, kBase);  // an RTT sample without newly acked data
  d.advance(kBase * 2);
  d.ack(1, kBase * 20);  // far above target: halve
  ASSERT_NEAR(s.cwnd_packets(), 0.5, 1e-6);
  // One packet every RTT/cwnd = every 2 RTTs (srtt is the smoothed RTT).
  EXPECT_EQ(s.cwnd(), kMss);
  const double srtt_s = (kBase + (kBase * 20 - kBase) / 8).seconds();
  EXPECT_NEAR(static_cast<double>(s.pacing_rate().bps()), kMss * 8 * 0.5 / srtt_s, 100);
}

TEST_F(SwiftTest, ClosedLoopHoldsDelayNearTarget) {
  rowan::test::FakeClock c0{TimePoint::zero()};
  const BitsPerSec rate = BitsPerSec::from_mbps(100);
  const Duration rtt = Duration::from_ms(1);
  test::SimConfig sc{rate, 4 * rate.bytes_in(rtt), 0, kMss};
  test::MiniSim sim(sc, {test::SimFlowSpec{rtt}, test::SimFlowSpec{rtt}});
  // The gateway's configured base RTT anchors the target: the second flow
  // starts behind the first one's initial window and would otherwise take
  // that queue for propagation delay.
  hints.base_rtt = rtt;
  for (size_t i = 0; i < 2; ++i) sim.set_cc(i, std::make_unique<Swift>(c0, hints, cfg));
  sim.run(TimePoint::from_ns(Duration::from_s(3).ns()),
          TimePoint::from_ns(Duration::from_s(1).ns()));
  EXPECT_GT(sim.utilization(), 0.9);
  // Target ≈ 1 ms + 100 us + 50 us (+ flow scaling): queueing stays ~150-250 us.
  EXPECT_LT(sim.queue_delay_percentile(0.95), Duration::from_us(600));
  EXPECT_GT(sim.jain(), 0.95) << sim.throughput_gbps(0) << " " << sim.throughput_gbps(1);
}

TEST(SwiftParams, ParsesAndRejects) {
  rowan::test::FakeClock clock;
  PathHints hints;
  auto cc =
      Registry::create("swift", clock, hints, test::params({{"base_target", "50us"}, {"ai", "2"}}));
  EXPECT_EQ(cc->name(), "swift");
  EXPECT_THROW(Registry::create("swift", clock, hints, test::params({{"max_mdf", "0.95"}})),
               CcParamError);
  EXPECT_THROW(Registry::create("swift", clock, hints, test::params({{"base_target", "2s"}})),
               CcParamError);
  EXPECT_THROW(Registry::create("swift", clock, hints, test::params({{"hops", "3"}})),
               CcParamError);
}

}  // namespace
}  // namespace rowan::cc
