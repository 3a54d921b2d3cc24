// The wire codec: frames and the integrity check.
#include "transport/wire.h"

#include <gtest/gtest.h>

#include <vector>

namespace rowan::transport {
namespace {

// A frame visitor that fails the parse on every frame; tests derive from it
// and accept the frames they look at.
struct RejectAll {
  wire::AckFrame scratch;
  bool on_ping() { return false; }
  wire::AckFrame& ack_scratch() { return scratch; }
  bool on_ack(const wire::AckFrame&) { return false; }
  bool on_stream(const wire::StreamFrame&) { return false; }
  bool on_max_data(uint64_t) { return false; }
  bool on_max_stream_data(uint64_t, uint64_t) { return false; }
  bool on_data_blocked(uint64_t) { return false; }
  bool on_close(uint16_t) { return false; }
};

// Accepts ACK frames only, keeping the last.
struct AckCatcher : RejectAll {
  wire::AckFrame got;
  bool on_ack(const wire::AckFrame& f) {
    got = f;
    return true;
  }
};

TEST(Wire, AckFrameRoundTrip) {
  wire::AckFrame a;
  a.largest = 1000;
  a.ack_delay_us = 250;
  a.ce_count = 3;
  a.range_count = 3;
  a.ranges[0] = {990, 1000};
  a.ranges[1] = {900, 980};
  a.ranges[2] = {5, 5};
  std::vector<uint8_t> buf(wire::ack_frame_size(3));
  wire::FrameWriter w(buf.data(), buf.size());
  w.ack(a);
  ASSERT_EQ(w.size(), buf.size());
  AckCatcher v;
  ASSERT_TRUE(wire::parse_frames(buf.data(), buf.size(), false, v));
  EXPECT_EQ(v.got.largest, 1000U);
  EXPECT_EQ(v.got.ack_delay_us, 250U);
  EXPECT_EQ(v.got.ce_count, 3U);
  ASSERT_EQ(v.got.range_count, 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(v.got.ranges[i].lo, a.ranges[i].lo);
    EXPECT_EQ(v.got.ranges[i].hi, a.ranges[i].hi);
  }
  // Every truncation is rejected.
  for (size_t n = 1; n < buf.size(); ++n) EXPECT_FALSE(wire::parse_frames(buf.data(), n, false, v));
}

TEST(Wire, DataBlockedFrameRoundTrip) {
  std::vector<uint8_t> buf(wire::kDataBlockedFrameSize);
  wire::FrameWriter w(buf.data(), buf.size());
  w.data_blocked(0x0123456789abcdefULL);
  ASSERT_EQ(w.size(), buf.size());
  struct V : RejectAll {
    uint64_t limit = 0;
    bool on_data_blocked(uint64_t l) {
      limit = l;
      return true;
    }
  } v;
  ASSERT_TRUE(wire::parse_frames(buf.data(), buf.size(), false, v));
  EXPECT_EQ(v.limit, 0x0123456789abcdefULL);
  for (size_t n = 1; n < buf.size(); ++n) EXPECT_FALSE(wire::parse_frames(buf.data(), n, false, v));
}

TEST(Wire, AckOfAnotherPathCarriesItsIndex) {
  wire::AckFrame a;
  a.path = 9;
  a.largest = 77;
  a.range_count = 1;
  a.ranges[0] = {70, 77};
  std::vector<uint8_t> buf(wire::ack_frame_size(1, 9));
  ASSERT_EQ(buf.size(), wire::ack_frame_size(1) + 1);
  wire::FrameWriter w(buf.data(), buf.size());
  w.ack(a);
  ASSERT_EQ(w.size(), buf.size());
  EXPECT_EQ(buf[0], wire::kFrameAckPath);
  AckCatcher v;
  ASSERT_TRUE(wire::parse_frames(buf.data(), buf.size(), false, v));
  EXPECT_EQ(v.got.path, 9);
  EXPECT_EQ(v.got.largest, 77U);
  EXPECT_EQ(v.got.ranges[0].lo, 70U);
  for (size_t n = 1; n < buf.size(); ++n) EXPECT_FALSE(wire::parse_frames(buf.data(), n, false, v));
  // Path 0's ACK is the plain ACK frame: ACK_PATH naming path 0 is malformed.
  buf[1] = 0;
  EXPECT_FALSE(wire::parse_frames(buf.data(), buf.size(), false, v));
  // The header carries the packet's path.
  uint8_t hdr[wire::kHeaderSize] = {};
  wire::Header h;
  h.path = 3;
  h.packet_number = 5;
  wire::write_header(hdr, h);
  wire::Header back;
  ASSERT_TRUE(wire::read_header(hdr, sizeof(hdr), &back));
  EXPECT_EQ(back.path, 3);
  EXPECT_EQ(back.version, 3);
}

// Accepts STREAM frames only, keeping the last.
struct StreamCatcher : RejectAll {
  wire::StreamFrame got;
  bool on_stream(const wire::StreamFrame& f) {
    got = f;
    return true;
  }
};

TEST(Wire, VarintsTakeOneTwoFourOrEightBytesAndRoundTrip) {
  const std::pair<uint64_t, size_t> cases[] = {
      {0, 1},
      {63, 1},
      {64, 2},
      {16383, 2},
      {16384, 4},
      {(1U << 30) - 1, 4},
      {1U << 30, 8},
      {wire::kMaxVarint, 8},
      {151288809941952652ULL, 8},  // RFC 9000 A.1's 8-byte example
  };
  for (const auto& [v, n] : cases) {
    uint8_t buf[8] = {};
    ASSERT_EQ(wire::put_varint(buf, v), n) << v;
    EXPECT_EQ(wire::varint_size(v), n) << v;
    uint64_t back = 0;
    EXPECT_EQ(wire::get_varint(buf, n, &back), n) << v;
    EXPECT_EQ(back, v);
    // One byte short of the length its prefix says is no varint.
    EXPECT_EQ(wire::get_varint(buf, n - 1, &back), 0U) << v;
  }
  // RFC 9000 A.1: 0x7bbd is 15293 in two bytes.
  const uint8_t two[] = {0x7b, 0xbd};
  uint64_t v = 0;
  ASSERT_EQ(wire::get_varint(two, 2, &v), 2U);
  EXPECT_EQ(v, 15293U);
}

TEST(Wire, StreamFrameHeaderShrinksWithItsIdAndOffset) {
  // A small stream id near its start costs 1 + 1 + 1 + 2 bytes; the largest
  // header (8-byte id and offset) is what version 2 always sent.
  EXPECT_EQ(wire::stream_frame_overhead(3, 0), 5U);
  EXPECT_EQ(wire::stream_frame_overhead(3, 1 << 20), 8U);
  EXPECT_EQ(wire::stream_frame_overhead(wire::kMaxVarint, wire::kMaxVarint),
            wire::kMaxStreamFrameOverhead);
  const std::pair<uint64_t, uint64_t> cases[] = {
      {0, 0}, {63, 64}, {700, 1 << 20}, {1 << 20, (uint64_t{1} << 40) + 7}};
  for (const auto& [id, off] : cases) {
    const uint8_t data[3] = {7, 8, 9};
    std::vector<uint8_t> buf(wire::stream_frame_overhead(id, off) + sizeof data);
    wire::FrameWriter w(buf.data(), buf.size());
    uint8_t* dst = w.stream_header(id, off, sizeof data, true);
    std::copy(data, data + sizeof data, dst);
    w.commit_stream_data(sizeof data);
    ASSERT_EQ(w.size(), buf.size());
    StreamCatcher v;
    ASSERT_TRUE(wire::parse_frames(buf.data(), buf.size(), false, v));
    EXPECT_EQ(v.got.stream_id, id);
    EXPECT_EQ(v.got.offset, off);
    EXPECT_EQ(v.got.length, 3U);
    EXPECT_TRUE(v.got.fin);
    EXPECT_EQ(v.got.data[2], 9);
    // Every truncation, in the varints or the data, is rejected.
    for (size_t n = 1; n < buf.size(); ++n)
      EXPECT_FALSE(wire::parse_frames(buf.data(), n, false, v)) << id << " " << n;
  }
}

TEST(Wire, ACrcIsAppendedAndFlaggedOnlyWhenAsked) {
  uint8_t d[wire::kMaxOverhead + 1] = {};
  wire::write_header(d, wire::Header{});
  d[wire::kHeaderSize] = wire::kFramePing;
  EXPECT_EQ(wire::end_datagram(d, 1, false), wire::kHeaderSize + 1);
  EXPECT_EQ(d[1] & wire::kFlagCrc, 0);
  EXPECT_EQ(wire::frames_length(d, wire::kHeaderSize + 1), 1U);
  ASSERT_EQ(wire::end_datagram(d, 1, true), sizeof d);
  EXPECT_NE(d[1] & wire::kFlagCrc, 0);
  EXPECT_EQ(wire::get_u32(d + wire::kHeaderSize + 1), wire::crc32c(d, wire::kHeaderSize + 1));
  EXPECT_EQ(wire::frames_length(d, sizeof d), 1U);
}

TEST(Wire, Crc32cKnownAnswer) {
  const char* s = "123456789";
  EXPECT_EQ(wire::crc32c(reinterpret_cast<const uint8_t*>(s), 9), 0xe3069283U);
}

}  // namespace
}  // namespace rowan::transport
