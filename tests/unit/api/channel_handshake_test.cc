#include "api/channel_handshake.h"

#include <gtest/gtest.h>

#include <cstring>

namespace rowan::api {
namespace {

Handshake accept_of() {
  Handshake h;
  h.type = HandshakeType::kAccept;
  h.nonce = 0x1122334455667788ull;
  h.connection_id = 42;
  h.rate_bps = 1'000'000'000;
  h.rtt_ns = 20'000'000;
  h.data_port = 0x1234;
  h.flags = kHandshakeFlagSecure;
  std::strcpy(h.cc, "rowan");
  return h;
}

TEST(ChannelHandshake, LayoutIsLittleEndian) {
  uint8_t b[kHandshakeSize];
  encode_handshake(accept_of(), b);
  EXPECT_EQ(std::memcmp(b, "RWCH", 4), 0);
  EXPECT_EQ(b[4], kHandshakeVersion);
  EXPECT_EQ(b[5], 2);
  EXPECT_EQ(b[6], 0x34);
  EXPECT_EQ(b[7], 0x12);
  EXPECT_EQ(b[8], 0x88);
  EXPECT_EQ(b[15], 0x11);
  EXPECT_EQ(b[16], 42);
  EXPECT_EQ(std::memcmp(b + 40, "rowan", 6), 0);
  EXPECT_EQ(b[63], kHandshakeFlagSecure);
}

TEST(ChannelHandshake, RoundTrip) {
  uint8_t b[kHandshakeSize];
  const Handshake in = accept_of();
  encode_handshake(in, b);
  Handshake out;
  ASSERT_TRUE(decode_handshake(b, sizeof b, &out));
  EXPECT_EQ(out.type, in.type);
  EXPECT_EQ(out.nonce, in.nonce);
  EXPECT_EQ(out.connection_id, in.connection_id);
  EXPECT_EQ(out.rate_bps, in.rate_bps);
  EXPECT_EQ(out.rtt_ns, in.rtt_ns);
  EXPECT_EQ(out.data_port, in.data_port);
  EXPECT_EQ(out.flags, in.flags);
  EXPECT_STREQ(out.cc, "rowan");
  EXPECT_EQ(out.path, 0);
}

TEST(ChannelHandshake, JoinCarriesThePathIndex) {
  Handshake in = accept_of();
  in.type = HandshakeType::kJoin;
  in.path = 3;
  std::strcpy(in.cc, "name-of-22-characters!");  // the longest: byte 62 follows it
  uint8_t b[kHandshakeSize];
  encode_handshake(in, b);
  EXPECT_EQ(b[5], 4);
  EXPECT_EQ(b[62], 3);
  Handshake out;
  ASSERT_TRUE(decode_handshake(b, sizeof b, &out));
  EXPECT_EQ(out.type, HandshakeType::kJoin);
  EXPECT_EQ(out.path, 3);
  EXPECT_STREQ(out.cc, "name-of-22-characters!");
}

TEST(ChannelHandshake, RejectsOtherDatagrams) {
  uint8_t b[kHandshakeSize];
  encode_handshake(accept_of(), b);
  Handshake out;
  EXPECT_FALSE(decode_handshake(b, sizeof b - 1, &out));
  b[4] = kHandshakeVersion + 1;
  EXPECT_FALSE(decode_handshake(b, sizeof b, &out));
  encode_handshake(accept_of(), b);
  b[5] = 5;  // no such type
  EXPECT_FALSE(decode_handshake(b, sizeof b, &out));
  encode_handshake(accept_of(), b);
  b[0] ^= 1;
  EXPECT_FALSE(decode_handshake(b, sizeof b, &out));
}

}  // namespace
}  // namespace rowan::api
