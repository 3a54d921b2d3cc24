#include "codec/arp.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

namespace rowan::arp {
namespace {

const Mac kHostMac = {0x02, 0x00, 0x00, 0x00, 0x01, 0x0a};
const Mac kGwMac = {0x02, 0x00, 0x00, 0x00, 0x01, 0x01};
const roce::IpAddr kHost = roce::parse_ip_addr("198.18.1.10");
const roce::IpAddr kGw = roce::parse_ip_addr("198.18.1.1");

// "Who has 198.18.1.1? Tell 198.18.1.10" in RFC 826's layout, padded to the
// 60-byte minimum frame, written out byte by byte.
std::vector<uint8_t> host_request() {
  return {
      0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00, 0x00, 0x00, 0x01, 0x0a,  // Ethernet
      0x08, 0x06,                                                              // ARP
      0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01,                          // Eth/IPv4 request
      0x02, 0x00, 0x00, 0x00, 0x01, 0x0a, 198,  18,   1,    10,                // sender
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 198,  18,   1,    1,                 // target
      0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0, 0, 0, 0, 0, 0,
  };
}

TEST(Arp, ParsesARequest) {
  const auto f = host_request();
  ASSERT_EQ(f.size(), kFrameLen);
  const auto m = parse(f.data(), static_cast<uint32_t>(f.size()));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->op, kOpRequest);
  EXPECT_EQ(m->sender_mac, kHostMac);
  EXPECT_EQ(m->sender_ip, kHost);
  EXPECT_EQ(m->target_mac, (Mac{}));
  EXPECT_EQ(m->target_ip, kGw);
}

TEST(Arp, RefusesShortAndForeignMessages) {
  auto f = host_request();
  EXPECT_FALSE(parse(f.data(), kEthLen + kArpLen - 1));
  EXPECT_TRUE(parse(f.data(), kEthLen + kArpLen));  // no padding is still a message
  struct Bad {
    size_t at;
    uint8_t value;
  };
  for (Bad b : {Bad{15, 6},      // hardware type 6 (IEEE 802)
                Bad{16, 0x86},   // protocol IPv6's EtherType
                Bad{18, 8},      // hardware address length
                Bad{19, 16}}) {  // protocol address length
    auto g = f;
    g[b.at] = b.value;
    EXPECT_FALSE(parse(g.data(), static_cast<uint32_t>(g.size()))) << "byte " << b.at;
  }
}

TEST(Arp, ReplyInPlaceAnswersTheSender) {
  auto f = host_request();
  make_reply(f.data(), kGwMac, kGw);
  EXPECT_TRUE(std::equal(kHostMac.begin(), kHostMac.end(), f.begin()));  // to the host
  EXPECT_TRUE(std::equal(kGwMac.begin(), kGwMac.end(), f.begin() + 6));  // from us
  EXPECT_EQ(f[12], 0x08);
  EXPECT_EQ(f[13], 0x06);
  const auto m = parse(f.data(), static_cast<uint32_t>(f.size()));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->op, kOpReply);
  EXPECT_EQ(m->sender_mac, kGwMac);
  EXPECT_EQ(m->sender_ip, kGw);
  EXPECT_EQ(m->target_mac, kHostMac);
  EXPECT_EQ(m->target_ip, kHost);
}

TEST(Arp, WrittenRequestIsTheWireFormat) {
  std::array<uint8_t, kFrameLen> f;
  f.fill(0xAA);  // every byte must be written, the padding too
  write_request(f.data(), kHostMac, kHost, kGw);
  const auto want = host_request();
  EXPECT_TRUE(std::equal(f.begin(), f.end(), want.begin()));
}

}  // namespace
}  // namespace rowan::arp
