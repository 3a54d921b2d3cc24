// Received datagrams are parsed with bounds checks: anything malformed or
// forged is dropped and counted, never a crash and never a state change.
#include <gtest/gtest.h>

#include <random>

#include "harness.h"

namespace rowan::test {
namespace {

namespace wire = transport::wire;

struct Rx {
  explicit Rx(const transport::TransportConfig& c = test_config()) : conn{c, clock, clock.now()} {}
  FakeClock clock;
  transport::Connection conn;
  void feed(std::vector<uint8_t> d) {
    conn.on_datagram(d.data(), d.size(), io::Ecn::kNotEct, clock.now());
  }
};

// A valid datagram around `frames` with a correct CRC.
std::vector<uint8_t> packet(const std::vector<uint8_t>& frames, uint64_t pn, uint64_t cid = 0x1234,
                            uint8_t version = wire::kVersion, uint8_t flags = 0) {
  std::vector<uint8_t> d(wire::kMaxOverhead + frames.size(), 0);
  wire::Header h;
  h.version = version;
  h.flags = flags;
  h.connection_id = cid;
  h.packet_number = pn;
  wire::write_header(d.data(), h);
  std::copy(frames.begin(), frames.end(), d.begin() + wire::kHeaderSize);
  wire::end_datagram(d.data(), frames.size(), true);
  return d;
}

std::vector<uint8_t> stream_frame(uint64_t id, uint64_t off, uint16_t len, bool fin = false) {
  std::vector<uint8_t> f(wire::stream_frame_overhead(id, off) + len, 0xab);
  wire::FrameWriter w(f.data(), f.size());
  w.stream_header(id, off, len, fin);
  return f;
}

TEST(Malformed, ShortAndGarbageDatagramsAreCounted) {
  Rx rx;
  rx.feed({});
  rx.feed({1, 2, 3});
  rx.feed(std::vector<uint8_t>(wire::kHeaderSize - 1, 0));
  EXPECT_EQ(rx.conn.stats().drop_malformed, 3U);
}

TEST(Malformed, WrongVersionAndConnectionId) {
  Rx rx;
  rx.feed(packet({wire::kFramePing}, 0, 0x1234, 9));
  rx.feed(packet({wire::kFramePing}, 1, 0x9999));
  EXPECT_EQ(rx.conn.stats().drop_bad_version, 1U);
  EXPECT_EQ(rx.conn.stats().drop_bad_connection_id, 1U);
}

TEST(Malformed, BadIntegrityTag) {
  Rx rx;
  auto d = packet(stream_frame(1, 0, 100), 0);
  d[30] ^= 0x10;
  rx.feed(d);
  EXPECT_EQ(rx.conn.stats().drop_bad_integrity, 1U);
  EXPECT_EQ(rx.conn.readable(1), 0U);
}

TEST(Malformed, AConnectionThatChecksIntegrityTakesNoDatagramWithoutACrc) {
  Rx rx;  // test_config(): integrity_check on, as on a plain link
  auto d = packet(stream_frame(1, 0, 100), 0);
  d[1] &= static_cast<uint8_t>(~wire::kFlagCrc);  // the same bytes, unflagged
  d.resize(d.size() - wire::kCrcSize);
  rx.feed(d);
  EXPECT_EQ(rx.conn.stats().drop_bad_integrity, 1U);
  EXPECT_EQ(rx.conn.readable(1), 0U);
}

TEST(Malformed, UnderAnAeadACrcIsStillCheckedWhereOneIsSent) {
  transport::TransportConfig c = test_config();
  c.integrity_check = false;  // SecureIo's AEAD below authenticates each datagram
  Rx rx(c);
  auto bad = packet(stream_frame(1, 0, 100), 0);
  bad[30] ^= 0x10;
  rx.feed(bad);
  EXPECT_EQ(rx.conn.stats().drop_bad_integrity, 1U);
  EXPECT_EQ(rx.conn.readable(1), 0U);
  rx.feed(packet(stream_frame(1, 0, 100), 1));  // with a good CRC
  EXPECT_EQ(rx.conn.readable(1), 100U);
  auto plain = packet(stream_frame(1, 100, 50), 2);  // and without one
  plain[1] &= static_cast<uint8_t>(~wire::kFlagCrc);
  plain.resize(plain.size() - wire::kCrcSize);
  rx.feed(plain);
  EXPECT_EQ(rx.conn.readable(1), 150U);
  EXPECT_EQ(rx.conn.stats().drop_bad_integrity, 1U);
}

TEST(Malformed, ProtectedOrElidedWithoutKeysIsDropped) {
  Rx rx;
  rx.feed(packet({wire::kFramePing}, 0, 0x1234, wire::kVersion, wire::kFlagProtected));
  rx.feed(packet({wire::kFramePing}, 1, 0x1234, wire::kVersion, wire::kFlagElided));
  rx.feed(packet({wire::kFramePing}, 2, 0x1234, wire::kVersion, 3));  // unknown type
  EXPECT_EQ(rx.conn.stats().drop_malformed, 3U);
}

TEST(Malformed, TruncatedFramesChangeNothing) {
  Rx rx;
  auto f = stream_frame(1, 0, 100);
  f.resize(f.size() - 1);  // length says 100, 99 present
  rx.feed(packet(f, 0));
  // A valid STREAM frame followed by an unknown frame type: the whole packet goes.
  auto g = stream_frame(1, 0, 100);
  g.push_back(0x7f);
  rx.feed(packet(g, 1));
  EXPECT_EQ(rx.conn.stats().drop_malformed, 2U);
  EXPECT_EQ(rx.conn.readable(1), 0U);
  // The same packet numbers are still accepted later: a dropped packet is not "received".
  rx.feed(packet(stream_frame(1, 0, 100), 0));
  EXPECT_EQ(rx.conn.readable(1), 100U);
}

TEST(Malformed, AckForUnsentPacketsIsRejected) {
  Rx rx;
  wire::AckFrame a;
  a.largest = 1000;  // nothing was ever sent
  a.range_count = 1;
  a.ranges[0] = {990, 1000};
  std::vector<uint8_t> f(wire::ack_frame_size(1));
  wire::FrameWriter w(f.data(), f.size());
  w.ack(a);
  rx.feed(packet(f, 0));
  EXPECT_EQ(rx.conn.stats().drop_invalid_ack, 1U);
  EXPECT_EQ(rx.conn.stats().drop_malformed, 1U);
  // Ranges that underflow.
  std::vector<uint8_t> g(wire::ack_frame_size(2), 0);
  g[0] = wire::kFrameAck;
  g[21] = 2;                        // two ranges
  wire::put_u64(g.data() + 22, 0);  // first range: just `largest` (0)
  wire::put_u32(g.data() + 30, 5);  // gap below 0: impossible
  rx.feed(packet(g, 1));
  EXPECT_EQ(rx.conn.stats().drop_malformed, 2U);
}

TEST(Malformed, FlowControlViolationIsDropped) {
  Rx rx;
  // Far beyond the stream window.
  rx.feed(packet(stream_frame(1, 1ULL << 40, 10), 0));
  EXPECT_EQ(rx.conn.stats().drop_flow_control, 1U);
  // Offset + length overflowing 2^62.
  rx.feed(packet(stream_frame(1, (1ULL << 62) - 5, 10), 1));
  EXPECT_EQ(rx.conn.stats().drop_malformed, 1U);
}

TEST(Malformed, InconsistentFinalSize) {
  Rx rx;
  rx.feed(packet(stream_frame(1, 0, 10, true), 0));
  rx.feed(packet(stream_frame(1, 10, 10), 1));      // beyond the final size
  rx.feed(packet(stream_frame(1, 0, 5, true), 2));  // a different final size
  EXPECT_EQ(rx.conn.stats().drop_malformed, 2U);
  EXPECT_EQ(rx.conn.readable(1), 10U);
}

TEST(Malformed, TooManyStreams) {
  transport::TransportConfig c = test_config();
  c.max_streams = 4;
  FakeClock clock;
  transport::Connection conn(c, clock, clock.now());
  for (uint64_t i = 0; i < 6; ++i) {
    auto d = packet(stream_frame(100 + i, 0, 10), i);
    conn.on_datagram(d.data(), d.size(), io::Ecn::kNotEct, clock.now());
  }
  EXPECT_EQ(conn.stats().drop_too_many_streams, 2U);
}

TEST(Malformed, RandomBytesNeverCrash) {
  Rx rx;
  std::mt19937_64 rng(42);
  std::vector<uint8_t> d;
  for (int i = 0; i < 20000; ++i) {
    // Valid header and CRC around random frames, to reach the frame parser.
    std::vector<uint8_t> frames(rng() % 300);
    for (auto& b : frames) b = static_cast<uint8_t>(rng() % 4 == 0 ? rng() % 0x20 : rng());
    rx.feed(packet(frames, static_cast<uint64_t>(i)));
    // And fully random datagrams.
    d.resize(rng() % 200);
    for (auto& b : d) b = static_cast<uint8_t>(rng());
    rx.feed(d);
  }
  const auto& s = rx.conn.stats();
  EXPECT_GT(s.drop_malformed, 0U);
  EXPECT_EQ(s.packets_received, 40000U);
}

}  // namespace
}  // namespace rowan::test
