// MTU translation (lib/src/split/resegment.*): requests cut from a 4096 to a
// 1024 path MTU and assembled from 1024 to 4096 (first/middle/last/only,
// RETH, immediate, invalidate, AckReq, SE), READ spans and responses mapped
// back into the requester's PSN space, atomic ACKs, PSN wrap at 2^24, the
// egress's go-back retransmission of re-cut packets, and the out→in PSN map
// used for NAKs. Every piece is built with roce::build and parsed back.
#include "split/resegment.h"

#include <gtest/gtest.h>

#include <vector>

#include "split/requester.h"
#include "tools/fake_clock.h"

namespace rowan::split {
namespace {

namespace op = roce::op;
using Bytes = std::vector<uint8_t>;

struct Pkt {
  Bytes raw;
  roce::RocePacket p;
  Bytes payload() const { return {p.payload().begin(), p.payload().end()}; }
};

roce::IpAddr ip(const char* s) { return roce::parse_ip_addr(s); }

/// A request packet from the requester (in space).
Bytes build(uint8_t opcode, uint32_t psn, const Bytes& payload, bool ack_req = false,
            uint32_t dma_len = 0, uint32_t immdt = 0, uint32_t ieth = 0, bool se = false,
            uint32_t qp = 0x33) {
  roce::FrameSpec s;
  s.with_eth = false;
  s.src = ip("198.18.1.10");
  s.dst = ip("198.18.2.10");
  s.udp_sport = 0xD00D;
  s.bth.opcode = opcode;
  s.bth.psn = psn & roce::kPsnMask;
  s.bth.ack_req = ack_req;
  s.bth.se = se;
  s.bth.dest_qp = qp;
  s.reth = roce::Reth{0x1000, 0xABCD, dma_len};
  s.immdt = immdt;
  s.ieth = ieth;
  s.atomic_eth.va = 0x2000;
  s.atomic_eth.rkey = 0x55;
  s.atomic_eth.swap_add = 7;
  s.aeth.syndrome = 0x1F;
  s.aeth.msn = dma_len;  // responses: the test passes the MSN here
  s.atomic_ack = 99;
  s.payload = payload;
  Bytes buf(4200);
  buf.resize(roce::build(s, buf));
  EXPECT_GT(buf.size(), 0U);
  return buf;
}

roce::RocePacket parse(const Bytes& b) {
  roce::RocePacket p;
  EXPECT_EQ(roce::parse_ip({b.data(), b.size()}, p), roce::ParseError::kOk);
  return p;
}

Bytes pattern(size_t n, uint8_t seed) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 8));
  return b;
}

class ResegmentTest : public ::testing::Test {
 protected:
  /// Feeds one input packet; the pieces land in out_ (parsed, ICRC checked).
  bool feed(const Bytes& in) {
    const roce::RocePacket p = parse(in);
    return seg_.feed(p, [&](const roce::FrameSpec& s) { keep(s); });
  }
  bool respond(const Bytes& in) {
    const roce::RocePacket p = parse(in);
    return rsp_.feed(p, seg_, [&](const roce::FrameSpec& s) { keep(s); });
  }
  void keep(const roce::FrameSpec& s) {
    Bytes buf(4200);
    buf.resize(roce::build(s, buf));
    ASSERT_GT(buf.size(), 0U);
    Pkt k;
    k.raw = buf;
    k.p = parse(k.raw);
    EXPECT_TRUE(roce::icrc_ok(k.p));
    out_.push_back(std::move(k));
    out_.back().p = parse(out_.back().raw);  // the view into the moved bytes
  }
  Bytes joined(size_t from = 0) const {
    Bytes all;
    for (size_t i = from; i < out_.size(); ++i) {
      const Bytes b = out_[i].payload();
      all.insert(all.end(), b.begin(), b.end());
    }
    return all;
  }
  RequestSegmenter seg_;
  ResponseSegmenter rsp_;
  std::vector<Pkt> out_;
};

TEST_F(ResegmentTest, CutsA4096WriteInto1024FirstMiddleLastWithImmediate) {
  seg_.start(100, 500, 4096, 1024);
  const Bytes a = pattern(4096, 1), b = pattern(4096, 2), c = pattern(1808, 3);
  ASSERT_TRUE(feed(build(op::kRcWriteFirst, 100, a, false, 10000)));
  ASSERT_TRUE(feed(build(op::kRcWriteMiddle, 101, b)));
  ASSERT_TRUE(feed(build(op::kRcWriteLastImm, 102, c, true, 0, 0x12345678, 0, true)));
  ASSERT_EQ(out_.size(), 10U);
  for (size_t i = 0; i < out_.size(); ++i) {
    const roce::RocePacket& p = out_[i].p;
    EXPECT_EQ(p.bth.psn, 500 + i);
    EXPECT_EQ(p.bth.dest_qp, 0x33U);
    EXPECT_EQ(p.udp_sport, 0xD00D);
    const uint8_t want = i == 0   ? op::kRcWriteFirst
                         : i == 9 ? op::kRcWriteLastImm
                                  : op::kRcWriteMiddle;
    EXPECT_EQ(p.bth.opcode, want) << i;
    EXPECT_EQ(p.payload_len, i == 9 ? 784U : 1024U) << i;
    EXPECT_EQ(p.bth.ack_req, i == 9) << i;  // the input's last piece
    EXPECT_EQ(p.bth.se, i == 9) << i;
  }
  EXPECT_EQ(out_[0].p.reth.va, 0x1000U);
  EXPECT_EQ(out_[0].p.reth.rkey, 0xABCDU);
  EXPECT_EQ(out_[0].p.reth.dma_len, 10000U);
  EXPECT_EQ(out_[9].p.immdt, 0x12345678U);
  Bytes all = a;
  all.insert(all.end(), b.begin(), b.end());
  all.insert(all.end(), c.begin(), c.end());
  EXPECT_EQ(joined(), all);
  EXPECT_EQ(seg_.next_out_psn(), 510U);
  EXPECT_EQ(seg_.next_in_psn(), 103U);
  // A retransmission of an input the egress already cut is refused.
  EXPECT_FALSE(feed(build(op::kRcWriteMiddle, 101, b)));
}

TEST_F(ResegmentTest, AssemblesA1024SendInto4096Pieces) {
  seg_.start(7, 7, 1024, 4096);
  Bytes all;
  for (uint32_t i = 0; i < 6; ++i) {  // 5 × 1024 + 100 bytes
    const Bytes d = pattern(i == 5 ? 100 : 1024, static_cast<uint8_t>(i));
    all.insert(all.end(), d.begin(), d.end());
    const uint8_t o = i == 0 ? op::kRcSendFirst : i == 5 ? op::kRcSendLastInv : op::kRcSendMiddle;
    ASSERT_TRUE(feed(build(o, 7 + i, d, i == 2, 0, 0, 0xBEEF)));
    if (i < 4) {
      EXPECT_EQ(out_.size(), i < 3 ? 0U : 1U) << i;  // a full 4096 goes at once
    }
  }
  ASSERT_EQ(out_.size(), 2U);
  EXPECT_EQ(out_[0].p.bth.opcode, op::kRcSendFirst);
  EXPECT_EQ(out_[0].p.payload_len, 4096U);
  EXPECT_EQ(out_[0].p.bth.psn, 7U);
  EXPECT_EQ(out_[1].p.bth.opcode, op::kRcSendLastInv);
  EXPECT_EQ(out_[1].p.ieth, 0xBEEFU);
  EXPECT_EQ(out_[1].p.payload_len, 1124U);
  EXPECT_EQ(out_[1].p.bth.psn, 8U);
  EXPECT_EQ(joined(), all);
  // A 4096-byte WRITE in four 1024 pieces is one WRITE ONLY with immediate.
  out_.clear();
  for (uint32_t i = 0; i < 4; ++i) {
    const uint8_t o = i == 0   ? op::kRcWriteFirst
                      : i == 3 ? op::kRcWriteLastImm
                               : op::kRcWriteMiddle;
    ASSERT_TRUE(feed(build(o, 13 + i, pattern(1024, 9), i == 3, 4096, 0x77)));
  }
  ASSERT_EQ(out_.size(), 1U);
  EXPECT_EQ(out_[0].p.bth.opcode, op::kRcWriteOnlyImm);
  EXPECT_EQ(out_[0].p.reth.dma_len, 4096U);
  EXPECT_EQ(out_[0].p.immdt, 0x77U);
  EXPECT_TRUE(out_[0].p.bth.ack_req);
  EXPECT_EQ(out_[0].p.bth.psn, 9U);
  // Zero-length messages stay zero-length ONLY packets.
  out_.clear();
  ASSERT_TRUE(feed(build(op::kRcSendOnly, 17, {}, true)));
  ASSERT_TRUE(feed(build(op::kRcWriteOnly, 18, {}, true, 0)));
  ASSERT_EQ(out_.size(), 2U);
  EXPECT_EQ(out_[0].p.bth.opcode, op::kRcSendOnly);
  EXPECT_EQ(out_[0].p.payload_len, 0U);
  EXPECT_EQ(out_[1].p.bth.opcode, op::kRcWriteOnly);
  EXPECT_EQ(out_[1].p.bth.psn, 11U);
}

TEST_F(ResegmentTest, PsnsWrapAndTheNakMapFindsTheInputPsn) {
  seg_.start(0xFFFFFE, 0xFFFFFD, 4096, 1024);
  ASSERT_TRUE(
      feed(build(op::kRcSendOnly, 0xFFFFFE, pattern(3000, 1), true)));  // out FFFFFD..FFFFFF
  ASSERT_TRUE(feed(build(op::kRcSendOnly, 0xFFFFFF, pattern(2048, 2), true)));  // out 0, 1
  ASSERT_TRUE(feed(build(op::kRcWriteOnly, 0, pattern(10, 3), true, 10)));      // out 2
  ASSERT_EQ(out_.size(), 6U);
  EXPECT_EQ(out_[2].p.bth.psn, 0xFFFFFFU);
  EXPECT_EQ(out_[3].p.bth.psn, 0U);
  EXPECT_EQ(out_[3].p.bth.opcode, op::kRcSendFirst);
  EXPECT_EQ(out_[5].p.bth.psn, 2U);
  uint32_t in = 0;
  ASSERT_TRUE(seg_.in_psn_of(0xFFFFFE, &in));  // a middle piece of the first SEND
  EXPECT_EQ(in, 0xFFFFFEU);
  ASSERT_TRUE(seg_.in_psn_of(0, &in));
  EXPECT_EQ(in, 0xFFFFFFU);
  ASSERT_TRUE(seg_.in_psn_of(1, &in));
  EXPECT_EQ(in, 0xFFFFFFU);
  ASSERT_TRUE(seg_.in_psn_of(2, &in));
  EXPECT_EQ(in, 0U);
  EXPECT_FALSE(seg_.in_psn_of(0xFFFFF0, &in));  // before the start
  // Assembled inputs: a NAK at the out-packet names the first input in it.
  RequestSegmenter big;
  big.start(0xFFFFFF, 40, 1024, 4096);
  for (uint32_t i = 0; i < 4; ++i) {
    const uint8_t o = i == 0 ? op::kRcSendFirst : i == 3 ? op::kRcSendLast : op::kRcSendMiddle;
    const Bytes b = build(o, 0xFFFFFF + i, pattern(1024, 1));
    ASSERT_TRUE(big.feed(parse(b), [](const roce::FrameSpec&) {}));
  }
  ASSERT_TRUE(big.in_psn_of(40, &in));
  EXPECT_EQ(in, 0xFFFFFFU);
  EXPECT_EQ(big.next_out_psn(), 41U);
}

TEST_F(ResegmentTest, ReadSpansAndResponsesMapBackToTheRequesterSpace) {
  // The requester (MTU 4096) reads 10000 bytes: 3 PSNs in its space, 10 in
  // the responder's (MTU 1024).
  seg_.start(200, 900, 4096, 1024);
  rsp_.start(4096);
  ASSERT_TRUE(feed(build(op::kRcSendOnly, 200, pattern(64, 1))));
  ASSERT_TRUE(feed(build(op::kRcReadRequest, 201, {}, true, 10000)));
  // The READ took 201..203 in the requester's space (ceil(10000 / 4096)).
  ASSERT_FALSE(feed(build(op::kRcFetchAdd, 202, {}, true)));
  ASSERT_TRUE(feed(build(op::kRcFetchAdd, 204, {}, true)));
  ASSERT_TRUE(feed(build(op::kRcSendOnly, 205, pattern(64, 2), true)));
  ASSERT_EQ(out_.size(), 4U);
  EXPECT_EQ(out_[1].p.bth.opcode, op::kRcReadRequest);
  EXPECT_EQ(out_[1].p.bth.psn, 901U);
  EXPECT_EQ(out_[1].p.reth.dma_len, 10000U);
  EXPECT_EQ(out_[2].p.bth.opcode, op::kRcFetchAdd);
  EXPECT_EQ(out_[2].p.bth.psn, 911U);  // after the READ's 10 response PSNs
  EXPECT_EQ(out_[2].p.atomic_eth.swap_add, 7U);
  EXPECT_EQ(out_[3].p.bth.psn, 912U);
  out_.clear();
  // The responder answers the READ with 10 packets of 1024 (last 784), MSN 2.
  const Bytes data = pattern(10000, 5);
  for (uint32_t i = 0; i < 10; ++i) {
    const uint8_t o = i == 0   ? op::kRcReadResponseFirst
                      : i == 9 ? op::kRcReadResponseLast
                               : op::kRcReadResponseMiddle;
    const size_t from = size_t{i} * 1024;
    const Bytes chunk(
        data.begin() + static_cast<std::ptrdiff_t>(from),
        data.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(10000, from + 1024)));
    ASSERT_TRUE(respond(build(o, 901 + i, chunk, false, 2)));
  }
  ASSERT_EQ(out_.size(), 3U);
  EXPECT_EQ(out_[0].p.bth.opcode, op::kRcReadResponseFirst);
  EXPECT_EQ(out_[0].p.bth.psn, 201U);
  EXPECT_EQ(out_[0].p.payload_len, 4096U);
  EXPECT_EQ(out_[1].p.bth.opcode, op::kRcReadResponseMiddle);
  EXPECT_EQ(out_[1].p.bth.psn, 202U);
  EXPECT_EQ(out_[2].p.bth.opcode, op::kRcReadResponseLast);
  EXPECT_EQ(out_[2].p.bth.psn, 203U);
  EXPECT_EQ(out_[2].p.aeth.msn, 2U);
  EXPECT_EQ(out_[2].p.aeth.syndrome, 0x1F);
  EXPECT_EQ(joined(), data);
  // The atomic (in-PSN 204) gets its ACK at 204.
  out_.clear();
  ASSERT_TRUE(respond(build(op::kRcAtomicAck, 911, {}, false, 3)));
  ASSERT_EQ(out_.size(), 1U);
  EXPECT_EQ(out_[0].p.bth.psn, 204U);
  EXPECT_EQ(out_[0].p.atomic_ack, 99U);
  // A response out of order (a middle without its first) is refused; a
  // duplicate READ's responses (from the first) are mapped again.
  EXPECT_FALSE(respond(build(op::kRcReadResponseMiddle, 905, pattern(1024, 1))));
  out_.clear();
  for (uint32_t i = 0; i < 10; ++i) {
    const uint8_t o = i == 0   ? op::kRcReadResponseFirst
                      : i == 9 ? op::kRcReadResponseLast
                               : op::kRcReadResponseMiddle;
    const size_t from = size_t{i} * 1024;
    const Bytes chunk(
        data.begin() + static_cast<std::ptrdiff_t>(from),
        data.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(10000, from + 1024)));
    ASSERT_TRUE(respond(build(o, 901 + i, chunk, false, 2)));
  }
  EXPECT_EQ(out_.size(), 3U);
  EXPECT_EQ(joined(), data);
  // An unknown PSN maps to nothing.
  EXPECT_FALSE(respond(build(op::kRcReadResponseOnly, 5000, pattern(8, 1))));
}

// The egress keeps the re-cut packets (out space) in its Requester: a NAK
// from the responder in the middle of a cut input goes back to that piece.
TEST_F(ResegmentTest, RetransmissionAfterResegmentationResendsTheSamePieces) {
  test::FakeClock clock;
  RequesterConfig rc;
  rc.slots = 64;
  rc.slot_bytes = 1200;
  rc.pmtu = 1024;
  Requester rq(rc);
  rq.start(0xFFFFFE);
  seg_.start(50, 0xFFFFFE, 4096, 1024);
  std::vector<Bytes> sent;
  for (uint32_t i = 0; i < 2; ++i) {
    const Bytes in =
        build(op::kRcWriteOnly, 50 + i, pattern(4096, static_cast<uint8_t>(i)), true, 4096);
    ASSERT_TRUE(seg_.feed(parse(in), [&](const roce::FrameSpec& s) {
      Bytes buf(1200);
      buf.resize(roce::build(s, buf));
      const roce::RocePacket p = parse(buf);
      ASSERT_EQ(rq.push(buf, p.bth.opcode, p.bth.psn, p.reth.dma_len, clock.now()),
                PushResult::kStored);
    }));
  }
  EXPECT_EQ(rq.in_window(), 8U);
  std::span<const uint8_t> pkt;
  while (rq.next_transmit(clock.now(), &pkt)) sent.emplace_back(pkt.begin(), pkt.end());
  ASSERT_EQ(sent.size(), 8U);
  EXPECT_EQ(parse(sent[2]).bth.psn, 0U);  // wrapped
  // The responder got 0xFFFFFE, 0xFFFFFF, lost PSN 0 and NAKs it.
  EXPECT_EQ(rq.on_aeth(0, syndrome::nak(roce::NakCode::kPsnSequenceError), clock.now()),
            Event::kNone);
  std::vector<Bytes> again;
  while (rq.next_transmit(clock.now(), &pkt)) again.emplace_back(pkt.begin(), pkt.end());
  ASSERT_EQ(again.size(), 6U);
  for (size_t i = 0; i < again.size(); ++i) EXPECT_EQ(again[i], sent[i + 2]) << i;
  uint32_t in = 0;
  ASSERT_TRUE(seg_.in_psn_of(0, &in));
  EXPECT_EQ(in, 50U);  // the NAKed piece belongs to the first WRITE
  EXPECT_EQ(rq.on_aeth(5, syndrome::kAckUnlimited, clock.now()), Event::kNone);
  EXPECT_EQ(rq.in_window(), 0U);
}

}  // namespace
}  // namespace rowan::split
