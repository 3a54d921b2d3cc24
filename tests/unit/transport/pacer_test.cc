// The pacer: bursts bounded by the quantum, the rate held.
#include "transport/pacer.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace rowan::transport {
namespace {

TEST(Pacer, BurstsAreBoundedByTheQuantumAndRateIsHeld) {
  Pacer p;
  const BitsPerSec rate = BitsPerSec::from_gbps(1);
  const Bytes mss = 1500, quantum = Bytes{3} * 1500;
  TimePoint now = TimePoint::from_ns(1'000'000'000);
  // After idle: at most quantum bytes leave back to back.
  int burst = 0;
  while (p.ready(now)) {
    p.on_sent(now, mss, rate, quantum, mss);
    ++burst;
  }
  EXPECT_EQ(burst, 3);
  // Steady state: one packet per 12 µs at 1 Gbit/s, released on time (ns precision).
  EXPECT_EQ(p.release_time() - now, Duration::from_us(12));
  int sent = 0;
  const TimePoint end = now + Duration::from_ms(10);
  while (now < end) {
    now = std::max(now, p.release_time());
    p.on_sent(now, mss, rate, quantum, mss);
    ++sent;
  }
  EXPECT_NEAR(sent, 10'000'000.0 / 12'000, 2);
}

// A sender held by the pacer alone (data waiting, window open) whose host
// wakes it late every time sends what it owed, so the lateness does not
// become its rate; the catch-up is bounded by twice the lateness seen
// before (a stall of another kind is not taken for it), and a sender that
// had nothing to send gets one quantum after idle.
TEST(Pacer, ALateWakeUpSendsWhatItOwedNotOneQuantum) {
  const BitsPerSec rate = BitsPerSec::from_gbps(1);  // 12 us per 1500 bytes
  const Bytes mss = 1500, quantum = Bytes{2} * 1500;
  auto burst_at = [&](Pacer& p, TimePoint t) {
    int n = 0;
    while (p.ready(t) && n < 10'000) {
      p.on_sent(t, mss, rate, quantum, mss);
      ++n;
    }
    return n;
  };
  // Every wake-up 120 us past the release time, for 100 ms.
  auto late_wakeups = [&](Pacer& p, bool held) {
    TimePoint t = TimePoint::from_ns(1'000'000'000);
    burst_at(p, t);
    const TimePoint end = t + Duration::from_ms(100);
    int sent = 0;
    while (t < end) {
      if (held) p.hold();
      t = p.release_time() + Duration::from_us(120);
      sent += burst_at(p, t);
    }
    return sent;
  };
  Pacer held, plain;
  const int paced = 100'000 / 12;  // what 100 ms at the rate carries
  EXPECT_GT(late_wakeups(held, true), paced * 9 / 10);
  // Without hold() (the window or the application kept it): one quantum a
  // wake-up, 2 packets per 132 us.
  EXPECT_LT(late_wakeups(plain, false), paced / 5);
  EXPECT_GT(held.lateness(), Duration::from_us(100));
  // A 10 ms stall after that: at most twice the lateness learnt (~240 us,
  // 20 packets), not 10 ms of packets.
  TimePoint t = held.release_time();
  held.hold();
  const int n = burst_at(held, t + Duration::from_ms(10));
  EXPECT_GE(n, 18);
  EXPECT_LE(n, 22);
  // Out of data (idle()), then late: one quantum.
  t = held.release_time();
  held.hold();
  held.idle();
  EXPECT_EQ(burst_at(held, t + Duration::from_us(120)), 2);
}

}  // namespace
}  // namespace rowan::transport
