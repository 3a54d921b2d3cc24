// The adaptive code rate: no coding on a clean path, coding when a
// retransmission round trip costs more than the repair overhead, the
// overhead cap, stronger codes for more loss and for bursts, and the loss
// meter's window.
#include "fec/policy.h"

#include <gtest/gtest.h>

#include <cmath>

namespace rowan::fec {
namespace {

// 1 Gbit/s, 1472-byte packets: 11.8 µs per packet.
constexpr Duration kPkt = Duration::from_ns(11776);

PathSample path(double loss, Duration rtt, double burst = 1.0, Duration pkt = kPkt) {
  return PathSample{loss, burst, rtt, pkt};
}

TEST(FecPolicy, NoCodingWithoutLoss) {
  EXPECT_FALSE(choose_code_rate(path(0, Duration::from_ms(50)), {}).enabled());
  EXPECT_FALSE(choose_code_rate(path(0, Duration::from_ms(500)), {}).enabled());
  // No RTT measured yet: nothing to weigh.
  EXPECT_FALSE(choose_code_rate(path(0.01, Duration::zero()), {}).enabled());
}

TEST(FecPolicy, CodesALossyLongPathWithinTheOverheadCap) {
  for (double loss : {0.001, 0.01, 0.03}) {
    const CodeRate r = choose_code_rate(path(loss, Duration::from_ms(50)), {});
    ASSERT_TRUE(r.enabled()) << loss;
    EXPECT_LE(r.overhead(), 0.15 + 1e-9) << loss;
    EXPECT_LT(expected_cost(path(loss, Duration::from_ms(50)), r.k, r.m, 1.0),
              expected_cost(path(loss, Duration::from_ms(50)), 1, 0, 1.0));
  }
  PolicyConfig tight;
  tight.max_overhead = 0.05;
  const CodeRate r = choose_code_rate(path(0.01, Duration::from_ms(50)), tight);
  ASSERT_TRUE(r.enabled());
  EXPECT_LE(r.overhead(), 0.05 + 1e-9);
}

TEST(FecPolicy, MoreLossBuysMoreRepair) {
  const Duration rtt = Duration::from_ms(50);
  const CodeRate low = choose_code_rate(path(0.001, rtt), {});
  const CodeRate mid = choose_code_rate(path(0.01, rtt), {});
  const CodeRate high = choose_code_rate(path(0.03, rtt), {});
  EXPECT_LT(low.overhead(), mid.overhead());
  EXPECT_LE(mid.overhead(), high.overhead());
}

TEST(FecPolicy, DoesNotCodeWhenTheRoundTripIsCheaperThanTheOverhead) {
  // A LAN-like path (10 µs RTT) at 1 % loss: a retransmission costs less
  // than the repair packets' link time.
  EXPECT_FALSE(choose_code_rate(path(0.01, Duration::from_us(10)), {}).enabled());
  // A tiny loss rate on a short path: not worth coding either.
  EXPECT_FALSE(choose_code_rate(path(1e-5, Duration::from_us(200)), {}).enabled());
  // The same loss on a long path is.
  EXPECT_TRUE(choose_code_rate(path(0.01, Duration::from_ms(50)), {}).enabled());
  // A zero delay weight says late delivery costs nothing: never code.
  PolicyConfig no_deadline;
  no_deadline.delay_weight = 0;
  EXPECT_FALSE(choose_code_rate(path(0.03, Duration::from_ms(50)), no_deadline).enabled());
}

TEST(FecPolicy, BurstsNeedRepairCoveringTheBurst) {
  const Duration rtt = Duration::from_ms(50);
  for (double loss : {0.001, 0.01, 0.03}) {
    const CodeRate bursty = choose_code_rate(path(loss, rtt, 3.0), {});
    ASSERT_TRUE(bursty.enabled());
    EXPECT_GE(bursty.m, 3) << loss;  // one burst of three must be survivable
    EXPECT_LE(bursty.overhead(), 0.15 + 1e-9);
  }
  // At a low loss rate independent losses need less repair than bursts.
  EXPECT_LT(choose_code_rate(path(0.001, rtt, 1.0), {}).m,
            choose_code_rate(path(0.001, rtt, 3.0), {}).m);
  // A single repair symbol is worthless against bursts of 4: a block with
  // m = 1 recovers no burst, so the residual equals the uncoded loss.
  const PathSample b4 = path(0.01, rtt, 4.0);
  EXPECT_GT(expected_cost(b4, 8, 1, 1.0), expected_cost(b4, 1, 0, 1.0));
}

TEST(FecLossMeter, RateAndBurstsOverTheWindow) {
  LossMeter meter(100);
  EXPECT_EQ(meter.loss_rate(), 0);
  EXPECT_EQ(meter.mean_burst(), 1);
  uint64_t pn = 0;
  // 150 packets: one burst of three losses; the window holds all of them.
  for (int i = 0; i < 150; ++i, ++pn) {
    meter.on_sent();
    if (i == 10 || i == 11 || i == 12) meter.on_lost(pn);
  }
  EXPECT_NEAR(meter.loss_rate(), 3.0 / 150, 1e-9);
  EXPECT_NEAR(meter.mean_burst(), 3.0, 1e-9);
  // 50 more: a second burst of three.
  for (int i = 150; i < 200; ++i, ++pn) {
    meter.on_sent();
    if (i == 10 || i == 11 || i == 12 || i == 150 || i == 151 || i == 152) meter.on_lost(pn);
  }
  // The window is the last full half (packets 100..199) plus the current
  // (empty) one: the second burst over 100 packets.
  EXPECT_NEAR(meter.loss_rate(), 3.0 / 100, 1e-9);
  EXPECT_NEAR(meter.planning_loss_rate(), (3.0 + 2 * std::sqrt(3.0)) / 100, 1e-9);
  EXPECT_NEAR(meter.mean_burst(), 3.0, 1e-9);
  // Clean packets push the losses out of the window.
  for (int i = 0; i < 200; ++i) meter.on_sent();
  EXPECT_EQ(meter.loss_rate(), 0);
  EXPECT_EQ(meter.planning_loss_rate(), 0);  // nothing lost: nothing to plan for
}

}  // namespace
}  // namespace rowan::fec
