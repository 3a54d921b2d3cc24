// PeerHealth on injected times: idle links with keepalives stay up, a flap
// is one outage measured from the last datagram before it to the first after.
#include "datapath/peer_health.h"

#include <gtest/gtest.h>

#include "tools/fake_clock.h"

namespace rowan::gw {
namespace {

constexpr Duration kTick = Duration::from_ms(100);  // housekeeping period

struct Link {
  test::FakeClock clock;
  PeerHealth h;
  TimePoint heard;
  // Runs housekeeping for `d`; the peer is heard every `every` (zero: silent).
  void run(Duration d, Duration every) {
    const TimePoint end = clock.now() + d;
    while (clock.now() < end) {
      clock.advance(kTick);
      if (!every.is_zero() && (heard.is_zero() || clock.now() - heard >= every)) {
        heard = clock.now();
      }
      h.update(clock.now(), heard);
    }
  }
};

TEST(PeerHealth, WaitingUntilFirstHeardThenUpWhileKeepalivesArrive) {
  Link l;
  l.run(Duration::from_s(10), Duration::zero());
  EXPECT_FALSE(l.h.up());
  EXPECT_FALSE(l.h.seen());
  EXPECT_EQ(l.h.outages(), 0U) << "never up is waiting, not an outage";
  l.run(Duration::from_s(60), Duration::from_s(1));  // idle link, keepalives only
  EXPECT_TRUE(l.h.up());
  EXPECT_EQ(l.h.outages(), 0U);
  EXPECT_EQ(l.h.down_for(l.clock.now()), Duration::zero());
}

TEST(PeerHealth, AFlapIsOneOutageOfItsLength) {
  Link l;
  l.run(Duration::from_s(5), Duration::from_s(1));
  const TimePoint last = l.heard;
  l.run(Duration::from_s(10), Duration::zero());  // 10 s of silence
  EXPECT_FALSE(l.h.up());
  EXPECT_TRUE(l.h.seen());
  EXPECT_EQ(l.h.outages(), 1U);
  EXPECT_EQ(l.h.down_for(l.clock.now()), l.clock.now() - last);
  l.run(Duration::from_s(5), Duration::from_s(1));
  EXPECT_TRUE(l.h.up());
  EXPECT_EQ(l.h.outages(), 1U);
  // From the last datagram before to the first after: the silence plus up to
  // one keepalive interval.
  EXPECT_GE(l.h.last_outage(), Duration::from_s(10));
  EXPECT_LE(l.h.last_outage(), Duration::from_s(11));
  EXPECT_EQ(l.h.outage_total(), l.h.last_outage());
  // A second, 30 s one adds up.
  l.run(Duration::from_s(30), Duration::zero());
  l.run(Duration::from_s(2), Duration::from_s(1));
  EXPECT_EQ(l.h.outages(), 2U);
  EXPECT_GE(l.h.last_outage(), Duration::from_s(30));
  EXPECT_LE(l.h.last_outage(), Duration::from_s(31));
  EXPECT_GE(l.h.outage_total(), Duration::from_s(40));
  EXPECT_LE(l.h.outage_total(), Duration::from_s(42));
}

TEST(PeerHealth, SilenceShorterThanDeadAfterIsNoOutage) {
  Link l;
  l.run(Duration::from_s(5), Duration::from_s(1));
  // Up to one keepalive interval had passed since the last datagram.
  l.run(PeerHealth::kDeadAfter - PeerHealth::kKeepalive - Duration::from_ms(200), Duration::zero());
  l.run(Duration::from_s(5), Duration::from_s(1));
  EXPECT_TRUE(l.h.up());
  EXPECT_EQ(l.h.outages(), 0U);
  EXPECT_EQ(l.h.outage_total(), Duration::zero());
}

}  // namespace
}  // namespace rowan::gw
