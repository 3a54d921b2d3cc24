// The driver's optional clock: a caller's stale `now` must not stamp ACKs
// earlier than they arrived (an RTT sample below the path's minimum).
#include <gtest/gtest.h>

#include "harness.h"

namespace rowan::test {
namespace {

// a sends one packet over a 10 ms one-way link; b acks at once. The ACK is
// due back at a at 20 ms. a's owner then polls with a `now` read 3 ms before
// (it did other work since): without a clock the driver receives nothing yet
// (the ACK is not there at that time); with the clock it receives the ACK at
// the real time, and the RTT sample is the path's 20 ms, not 17.
TEST(Driver, ClockKeepsRttSamplesAboveThePath) {
  for (const bool with_clock : {false, true}) {
    FakeClock clock{TimePoint::from_ns(1'000'000)};
    io::LoopbackLink link(2048, 64, 1);
    io::Impairment imp;
    imp.delay = Duration::from_ms(10);
    link.set_impairment(0, imp);
    link.set_impairment(1, imp);
    transport::TransportConfig cfg = test_config();
    cfg.ack_every = 1;
    transport::Connection a(cfg, clock, clock.now());
    transport::Connection b(cfg, clock, clock.now());
    transport::Driver da(a, link.a(), 32, with_clock ? &clock : nullptr);
    transport::Driver db(b, link.b());
    const uint8_t byte = 1;
    ASSERT_EQ(a.write(0, &byte, 1, false, clock.now()), 1U);
    const TimePoint sent = clock.now();
    da.poll(clock.now());
    clock.set(sent + Duration::from_ms(10));
    db.poll(clock.now());  // data in, ACK out
    clock.set(sent + Duration::from_ms(20));
    const TimePoint stale = clock.now() - Duration::from_ms(3);
    da.poll(stale);
    if (with_clock) {
      EXPECT_EQ(a.stats().acks_received, 1U);
      EXPECT_GE(a.stats().latest_rtt, Duration::from_ms(20));
    } else {
      EXPECT_EQ(a.stats().acks_received, 0U);
    }
  }
}

}  // namespace
}  // namespace rowan::test
