// The Internet checksum's sum (packet_util.h ones_sum) against RFC 1071's
// example and a 16-bit big-endian reference, over every length and offset
// the WAN backend can hand it.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "net/packet_util.h"

namespace rowan::gw::pkt {
namespace {

// RFC 1071 as written: big-endian 16-bit words, the odd byte padded on the
// right, carries folded at the end.
uint16_t reference(const uint8_t* p, size_t len) {
  uint64_t s = 0;
  for (size_t i = 0; i + 1 < len; i += 2) s += (uint32_t{p[i]} << 8) | p[i + 1];
  if ((len & 1U) != 0) s += uint32_t{p[len - 1]} << 8;
  while ((s >> 16) != 0) s = (s & 0xFFFF) + (s >> 16);
  return static_cast<uint16_t>(s);
}

// ones_sum's result is in native order: read it back as the wire would.
uint16_t as_wire(uint16_t native) {
  uint8_t b[2];
  std::memcpy(b, &native, 2);
  return load_be16(b);
}

TEST(OnesSum, MatchesRfc1071Example) {
  const uint8_t bytes[] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
  EXPECT_EQ(as_wire(ones_sum(bytes, sizeof bytes)), 0xddf2);
}

TEST(OnesSum, MatchesTheReferenceAtEveryLengthAndAlignment) {
  std::mt19937 rng(7);
  std::vector<uint8_t> buf(65536 + 8);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t off = 0; off < 4; ++off) {
    for (size_t len = 0; len <= 1600; ++len) {
      ASSERT_EQ(as_wire(ones_sum(buf.data() + off, len)), reference(buf.data() + off, len))
          << "offset " << off << " length " << len;
    }
  }
  // The largest UDP datagram, all ones: the lanes must not wrap.
  std::fill(buf.begin(), buf.end(), 0xFF);
  EXPECT_EQ(as_wire(ones_sum(buf.data(), 65535)), reference(buf.data(), 65535));
}

TEST(OnesSum, ChainsAPartialSum) {
  std::vector<uint8_t> buf(1038);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<uint8_t>(i * 7 + 3);
  // An even split point keeps the words aligned as in one pass.
  const uint16_t head = ones_sum(buf.data(), 20);
  EXPECT_EQ(ones_sum(buf.data() + 20, buf.size() - 20, head), ones_sum(buf.data(), buf.size()));
}

}  // namespace
}  // namespace rowan::gw::pkt
