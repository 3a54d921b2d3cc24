#include "parse.h"

#include <gtest/gtest.h>

namespace rowan::wanem {
namespace {

TEST(ParseTest, Rates) {
  EXPECT_EQ(parse_rate("1gbit").bps(), 1000000000U);
  EXPECT_EQ(parse_rate("100Mbit").bps(), 100000000U);
  EXPECT_EQ(parse_rate("1.5gbit/s").bps(), 1500000000U);
  EXPECT_EQ(parse_rate("64kbit").bps(), 64000U);
  EXPECT_EQ(parse_rate("1e9").bps(), 1000000000U);
  EXPECT_EQ(parse_rate("10mbps").bps(), 10000000U);
  EXPECT_EQ(parse_rate("0").bps(), 0U);
  EXPECT_THROW(parse_rate("fast"), ParseError);
  EXPECT_THROW(parse_rate("10furlongs"), ParseError);
  EXPECT_THROW(parse_rate("-1gbit"), ParseError);
}

TEST(ParseTest, Durations) {
  EXPECT_EQ(parse_duration("10ms"), Duration::from_ms(10));
  EXPECT_EQ(parse_duration("250us"), Duration::from_us(250));
  EXPECT_EQ(parse_duration("1.5s"), Duration::from_ms(1500));
  EXPECT_EQ(parse_duration("800ns"), Duration::from_ns(800));
  EXPECT_EQ(parse_duration("0"), Duration::zero());
  EXPECT_THROW(parse_duration("10"), ParseError);
  EXPECT_THROW(parse_duration("-1ms"), ParseError);
}

TEST(ParseTest, BytesAndProbabilities) {
  EXPECT_EQ(parse_bytes("1500"), 1500U);
  EXPECT_EQ(parse_bytes("64KiB"), 65536U);
  EXPECT_EQ(parse_bytes("2MB"), 2000000U);
  EXPECT_THROW(parse_bytes("2 parsecs"), ParseError);
  EXPECT_DOUBLE_EQ(parse_probability("0.1%"), 0.001);
  EXPECT_DOUBLE_EQ(parse_probability("0.25"), 0.25);
  EXPECT_THROW(parse_probability("101%"), ParseError);
  EXPECT_THROW(parse_probability("2"), ParseError);
  EXPECT_TRUE(parse_bool("up"));
  EXPECT_FALSE(parse_bool("off"));
  EXPECT_THROW(parse_bool("maybe"), ParseError);
}

TEST(ParseTest, FormatsRoundTrip) {
  EXPECT_EQ(format_rate(BitsPerSec::from_mbps(100)), "100mbit");
  EXPECT_EQ(format_rate(BitsPerSec::from_gbps(1)), "1gbit");
  EXPECT_EQ(format_duration(Duration::from_ms(10)), "10ms");
  EXPECT_EQ(format_duration(Duration::from_us(1500)), "1500us");
  EXPECT_EQ(parse_probability(format_probability(0.001)), 0.001);
}

}  // namespace
}  // namespace rowan::wanem
