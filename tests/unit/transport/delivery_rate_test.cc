// The delivery-rate sampler (tcp_rate.c): samples, compressed ACKs, rounds,
// app-limited marking and the telemetry max.
#include "transport/delivery_rate.h"

#include <gtest/gtest.h>

#include <vector>

namespace rowan::transport {
namespace {

constexpr Bytes kPkt = 1000;

struct Sent {
  DeliveryStamp stamp;
  TimePoint at;
};

// Sends `n` packets every `gap` from `t`, with `in_flight` before the first.
std::vector<Sent> send_n(DeliveryRateSampler& s, TimePoint t, Duration gap, int n,
                         Bytes in_flight) {
  std::vector<Sent> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(Sent{s.on_sent(t, in_flight), t});
    in_flight += kPkt;
    t = t + gap;
  }
  return out;
}

cc::AckEvent ack(DeliveryRateSampler& s, const std::vector<Sent>& pkts, size_t from, size_t to,
                 TimePoint now, Duration min_rtt) {
  s.begin_ack();
  for (size_t i = from; i < to; ++i) s.on_acked(pkts[i].stamp, pkts[i].at, kPkt, now);
  cc::AckEvent ev;
  s.end_ack(min_rtt, ev);
  return ev;
}

TEST(DeliveryRate, PacedFlightGivesItsSendRate) {
  const TimePoint t0 = TimePoint::from_ns(1'000'000'000);
  DeliveryRateSampler s(t0);
  // 1000 bytes every 100 us = 80 Mbit/s over a 10 ms RTT: packet i leaves at
  // i x 100 us and is acked 10 ms later, interleaved as on a real path.
  const Duration gap = Duration::from_us(100);
  const Duration rtt = Duration::from_ms(10);
  const int per_rtt = 100;
  std::vector<Sent> pkts;
  std::vector<double> mbps;
  int round_starts = 0;
  Bytes in_flight = 0;
  for (int i = 0; i < 1000; ++i) {
    const TimePoint now = t0 + gap * i;
    if (i >= per_rtt) {
      const cc::AckEvent ev = ack(s, pkts, static_cast<size_t>(i - per_rtt),
                                  static_cast<size_t>(i - per_rtt + 1), now, rtt);
      EXPECT_EQ(ev.largest_acked_sent_time, pkts[static_cast<size_t>(i - per_rtt)].at);
      in_flight -= kPkt;
      round_starts += ev.round_start ? 1 : 0;
      if (ev.rate.valid()) mbps.push_back(static_cast<double>(ev.rate.rate().bps()) * 1e-6);
    }
    pkts.push_back(Sent{s.on_sent(now, in_flight), now});
    in_flight += kPkt;
  }
  ASSERT_GT(mbps.size(), 800U);
  EXPECT_NEAR(mbps.back(), 80.0, 1.0);
  EXPECT_EQ(s.delivered(), 900 * kPkt);
  EXPECT_NEAR(static_cast<double>(s.btlbw().bps()) * 1e-6, 80.0, 2.0);
  // 9 RTTs of acks: one round per RTT.
  EXPECT_GE(round_starts, 8);
  EXPECT_LE(round_starts, 10);
}

TEST(DeliveryRate, CompressedAckIsNoSample) {
  const TimePoint t0 = TimePoint::from_ns(1'000'000'000);
  DeliveryRateSampler s(t0);
  // A burst: 10 packets at one instant, acked together 1 ms later, with a
  // 10 ms min RTT: the interval (1 ms) is below min RTT, so no sample.
  const auto pkts = send_n(s, t0, Duration::zero(), 10, 0);
  const cc::AckEvent ev = ack(s, pkts, 0, 10, t0 + Duration::from_ms(1), Duration::from_ms(10));
  EXPECT_FALSE(ev.rate.valid());
  EXPECT_EQ(ev.rate.delivered, 10 * kPkt);  // delivered is still reported
  EXPECT_TRUE(s.btlbw().is_zero());
}

TEST(DeliveryRate, RoundsArePacketTimed) {
  const TimePoint t0 = TimePoint::from_ns(1'000'000'000);
  DeliveryRateSampler s(t0);
  const Duration rtt = Duration::from_ms(10);
  // Round 1: 4 packets; acking them one by one starts one round only.
  auto r1 = send_n(s, t0, Duration::from_us(10), 4, 0);
  int starts = 0;
  for (size_t i = 0; i < 4; ++i) starts += ack(s, r1, i, i + 1, r1[i].at + rtt, rtt).round_start;
  EXPECT_EQ(starts, 1);
  // Round 2: packets sent after round 1's end was acked.
  const TimePoint t1 = r1[3].at + rtt;
  auto r2 = send_n(s, t1, Duration::from_us(10), 4, 0);
  starts = 0;
  for (size_t i = 0; i < 4; ++i) starts += ack(s, r2, i, i + 1, r2[i].at + rtt, rtt).round_start;
  EXPECT_EQ(starts, 1);
  EXPECT_EQ(s.round_count(), 2U);
}

TEST(DeliveryRate, AppLimitedMarksPacketsUntilTheirDataIsAcked) {
  const TimePoint t0 = TimePoint::from_ns(1'000'000'000);
  DeliveryRateSampler s(t0);
  const Duration rtt = Duration::from_ms(10);
  auto a = send_n(s, t0, Duration::from_us(100), 4, 0);
  EXPECT_FALSE(a[3].stamp.app_limited);
  s.on_app_limited(4 * kPkt);  // nothing more to send with 4 packets out
  auto b = send_n(s, t0 + Duration::from_ms(1), Duration::from_us(100), 2, 4 * kPkt);
  EXPECT_TRUE(b[0].stamp.app_limited);
  ack(s, a, 0, 4, a[3].at + rtt, rtt);
  // Delivered (4 packets) is not yet past the mark (4 in flight + 0 delivered):
  // still app-limited; once one more packet is acked it clears.
  auto c = send_n(s, a[3].at + rtt, Duration::from_us(100), 1, 2 * kPkt);
  EXPECT_TRUE(c[0].stamp.app_limited);
  const cc::AckEvent ev = ack(s, b, 0, 1, b[0].at + rtt, rtt);
  EXPECT_TRUE(ev.rate.is_app_limited);
  auto d = send_n(s, b[0].at + rtt, Duration::from_us(100), 1, 2 * kPkt);
  EXPECT_FALSE(d[0].stamp.app_limited);
}

TEST(DeliveryRate, NewFlightRestartsTheSendInterval) {
  const TimePoint t0 = TimePoint::from_ns(1'000'000'000);
  DeliveryRateSampler s(t0);
  const Duration rtt = Duration::from_ms(10);
  auto a = send_n(s, t0, Duration::from_us(100), 2, 0);
  ack(s, a, 0, 2, a[1].at + rtt, rtt);
  // After an idle second, a packet sent with nothing in flight stamps the
  // current time as its flight's first send and as the delivered time.
  const TimePoint t1 = t0 + Duration::from_s(1);
  auto b = send_n(s, t1, Duration::from_us(100), 1, 0);
  EXPECT_EQ(b[0].stamp.first_sent_time, t1);
  EXPECT_EQ(b[0].stamp.delivered_time, t1);
  EXPECT_EQ(b[0].stamp.delivered, 2 * kPkt);
}

}  // namespace
}  // namespace rowan::transport
