// The driver's optional clock: a caller's stale `now` must not stamp ACKs
// earlier than they arrived (an RTT sample below the path's minimum).
#include <gtest/gtest.h>

#include <vector>

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

// A pass that finds the connection owing more than one burst (an unpaced
// window of 200 datagrams, all data written) sends several bursts while each
// is full and the link takes it, not one burst per pass: a loop that sleeps
// between passes must not have its wake-up rate cap its sending rate.
TEST(Driver, OnePassSendsSeveralFullBursts) {
  FakeClock clock{TimePoint::from_ns(1'000'000)};
  io::LoopbackLink link(2048, 4096, 1);
  transport::Connection a(test_config(Bytes{200} * 1472), clock, clock.now());
  transport::Driver da(a, link.a(), 32);
  std::vector<uint8_t> data(1 << 20, 7);
  ASSERT_EQ(a.write(0, data.data(), data.size(), false, clock.now()), data.size());
  da.poll(clock.now());
  const uint64_t sent = a.stats().packets_sent;
  EXPECT_GT(sent, 32U * 4);
  EXPECT_LE(sent, 32U * transport::Driver::kMaxSendBursts);
}

}  // namespace
}  // namespace rowan::test
