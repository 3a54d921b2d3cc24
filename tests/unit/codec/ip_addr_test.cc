#include "codec/ip_addr.h"

#include <gtest/gtest.h>

namespace rowan::roce {
namespace {

TEST(IpAddr, ParseAndFormat) {
  char buf[64];
  IpAddr a = parse_ip_addr("198.18.0.1");
  EXPECT_EQ(a.version, 4);
  format_ip_addr(a, buf, sizeof buf);
  EXPECT_STREQ(buf, "198.18.0.1");
  a = parse_ip_addr("2001:2::1");
  EXPECT_EQ(a.version, 6);
  format_ip_addr(a, buf, sizeof buf);
  EXPECT_STREQ(buf, "2001:2::1");
  EXPECT_EQ(parse_ip_addr("nope").version, 0);
}

TEST(IpAddr, ToString) {
  EXPECT_EQ(to_string(parse_ip_addr("198.18.2.10")), "198.18.2.10");
  EXPECT_EQ(to_string(parse_ip_addr("2001:2:0:2::10")), "2001:2:0:2::10");
  EXPECT_EQ(to_string(IpAddr{}), "");
}

TEST(IpAddr, EqualityIsVersionAndBytes) {
  EXPECT_EQ(parse_ip_addr("198.18.1.1"), parse_ip_addr("198.18.1.1"));
  EXPECT_NE(parse_ip_addr("198.18.1.1"), parse_ip_addr("198.18.1.2"));
  // The same 16 bytes (all zero) as IPv4 and as IPv6 are different addresses.
  EXPECT_NE(parse_ip_addr("0.0.0.0"), parse_ip_addr("::"));
}

}  // namespace
}  // namespace rowan::roce
