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
  EXPECT_EQ(meter.planning_loss_rate(), 0);
  EXPECT_EQ(meter.mean_burst(), 1);
  uint64_t pn = 0;
  auto send = [&](int n, int lose_every, int burst) {
    for (int i = 0; i < n; ++i, ++pn) {
      meter.on_sent();
      if (lose_every > 0 && i % lose_every < burst) meter.on_lost(pn);
    }
  };
  // 3 % loss in bursts of 3: a half fills after 100 packets (9 losses).
  send(100, 100, 3);  // 3 losses
  send(100, 50, 3);   // 6 losses: the first half (100 packets, 3 losses) is still short
  EXPECT_NEAR(meter.loss_rate(), 9.0 / 200, 1e-9);
  EXPECT_NEAR(meter.mean_burst(), 3.0, 1e-9);
  EXPECT_NEAR(meter.planning_loss_rate(), (9.0 + 2 * std::sqrt(9.0)) / 200, 1e-9);
  // 1 loss per 1000: halves stretch until they hold kMinLosses losses.
  send(8000, 1000, 1);
  EXPECT_NEAR(meter.loss_rate(), 0.001, 0.0003);
  EXPECT_NEAR(meter.mean_burst(), 1.0, 1e-9);
  // A clean path: the losses age out after at most 2 x 32 windows.
  send(2 * LossMeter::kMaxWindows * 100, 0, 0);
  EXPECT_EQ(meter.loss_rate(), 0);
  EXPECT_EQ(meter.planning_loss_rate(), 0);  // nothing lost: nothing to plan for
}

}  // namespace
}  // namespace rowan::fec
