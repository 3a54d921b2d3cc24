// The RTT estimator (RFC 9002).
#include "transport/rtt_estimator.h"

#include <gtest/gtest.h>

namespace rowan::transport {
namespace {

TEST(RttEstimator, FollowsRfc9002) {
  RttEstimator r(Duration::from_ms(100));
  EXPECT_EQ(r.smoothed(), Duration::from_ms(100));
  const TimePoint t = TimePoint::from_ns(1'000'000'000);
  r.on_sample(Duration::from_ms(50), Duration::zero(), t);
  EXPECT_EQ(r.smoothed(), Duration::from_ms(50));
  EXPECT_EQ(r.rttvar(), Duration::from_ms(25));
  EXPECT_EQ(r.min_rtt(), Duration::from_ms(50));
  // Ack delay is removed only while that keeps the sample above min_rtt.
  r.on_sample(Duration::from_ms(60), Duration::from_ms(10), t);
  EXPECT_EQ(r.smoothed(), Duration::from_ms(50));
  r.on_sample(Duration::from_ms(52), Duration::from_ms(10), t);
  EXPECT_EQ(r.smoothed(), Duration::from_us(50250));
}

}  // namespace
}  // namespace rowan::transport
