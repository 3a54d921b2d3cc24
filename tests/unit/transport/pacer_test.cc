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

}  // namespace
}  // namespace rowan::transport
