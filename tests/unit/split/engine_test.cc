// The split engine of rowand (daemon/rowand/split_engine.*) between two fake
// gateways: pairing by PSN match, the control record, local ACKs with the
// remote host's MSN, re-origination, ACK consumption, go-back on a NAK,
// the retransmission timer, and a fatal NAK reaching the requester.
#include "split_engine.h"

#include <gtest/gtest.h>

#include <vector>

#include "tools/fake_clock.h"

namespace rowan::gw {
namespace {

using Bytes = std::vector<uint8_t>;
namespace op = roce::op;

constexpr uint32_t kReqQp = 0x11;
constexpr uint32_t kRspQp = 0x22;
constexpr uint32_t kPsn = 0xFFFFFE;  // wraps right after pairing

class FakeIo final : public SplitIo {
 public:
  bool carry(Flow&, const uint8_t* ip, uint32_t len, TimePoint) noexcept override {
    if (!room) return false;
    wan.emplace_back(ip, ip + len);
    return true;
  }
  bool has_room(const Flow&, uint32_t) const noexcept override { return room; }
  bool over_share(const Flow&) const noexcept override { return over; }
  void send_local(const uint8_t* ip, uint32_t len, TimePoint) noexcept override {
    local.emplace_back(ip, ip + len);
  }
  bool carry_packet(const uint8_t* ip, uint32_t len, TimePoint) noexcept override {
    wan.emplace_back(ip, ip + len);
    return true;
  }
  std::vector<Bytes> wan, local;
  bool room = true;
  bool over = false;
};

roce::RocePacket parse(const Bytes& b) {
  roce::RocePacket p;
  EXPECT_EQ(roce::parse_ip({b.data(), b.size()}, p), roce::ParseError::kOk);
  EXPECT_TRUE(roce::icrc_ok(p));
  return p;
}

class EngineTest : public ::testing::Test {
 protected:
  EngineTest() {
    a_ip_ = roce::parse_ip_addr("198.18.1.10");
    b_ip_ = roce::parse_ip_addr("198.18.2.10");
    fwd_.stream = 7;
    rev_.stream = 9;
  }
  /// A request from host A (toward B's responder QP).
  Bytes request(uint8_t opcode, uint32_t psn, bool ack_req) {
    roce::FrameSpec s;
    s.with_eth = false;
    s.src = a_ip_;
    s.dst = b_ip_;
    s.bth.opcode = opcode;
    s.bth.dest_qp = kRspQp;
    s.bth.psn = psn & roce::kPsnMask;
    s.bth.ack_req = ack_req;
    s.reth.dma_len = 64;
    const Bytes data(64, static_cast<uint8_t>(psn));
    s.payload = data;
    Bytes buf(256);
    buf.resize(roce::build(s, buf));
    return buf;
  }
  /// An ACK/NAK from host B (toward A's requester QP).
  Bytes aeth(uint8_t syndrome, uint32_t psn, uint32_t msn) {
    roce::FrameSpec s;
    s.with_eth = false;
    s.src = b_ip_;
    s.dst = a_ip_;
    s.bth.opcode = op::kRcAck;
    s.bth.dest_qp = kReqQp;
    s.bth.psn = psn & roce::kPsnMask;
    s.aeth.syndrome = syndrome;
    s.aeth.msn = msn;
    Bytes buf(128);
    buf.resize(roce::build(s, buf));
    return buf;
  }
  // Host A sends: gateway A sees it; in passthrough the test carries it to B.
  bool a_sends(const Bytes& pkt) {
    return ga_.on_local(fwd_, true, pkt.data(), static_cast<uint32_t>(pkt.size()), clock_.now());
  }
  // Records gateway A carried reach gateway B (and, when B lets them pass, host B).
  void carry_a_to_b() {
    for (const Bytes& r : ia_.wan) {
      if (!gb_.on_wan(nullptr, fwd_.stream, r.data(), static_cast<uint32_t>(r.size()),
                      clock_.now())) {
        ib_.local.push_back(r);
      }
    }
    ia_.wan.clear();
  }
  // Host B answers: true when gateway B consumed it, else it goes to gateway A.
  bool b_sends(const Bytes& pkt) {
    if (gb_.on_local(rev_, true, pkt.data(), static_cast<uint32_t>(pkt.size()), clock_.now())) {
      return true;
    }
    ib_.wan.push_back(pkt);
    return false;
  }
  void carry_b_to_a() {
    for (const Bytes& r : ib_.wan) {
      if (!ga_.on_wan(nullptr, rev_.stream, r.data(), static_cast<uint32_t>(r.size()),
                      clock_.now())) {
        ia_.local.push_back(r);
      }
    }
    ib_.wan.clear();
  }
  void pair() {
    ASSERT_FALSE(a_sends(request(op::kRcSendOnly, kPsn, true)));  // tracked, passthrough
    ia_.wan.push_back(request(op::kRcSendOnly, kPsn, true));      // what passthrough carries
    carry_a_to_b();
    ASSERT_EQ(ib_.local.size(), 1U);
    ib_.local.clear();
    ASSERT_FALSE(b_sends(aeth(0x1F, kPsn, 5)));  // no split flow at B yet
    carry_b_to_a();
    ASSERT_EQ(ia_.local.size(), 1U);  // the remote host's ACK reaches the requester
    ia_.local.clear();
  }

  test::FakeClock clock_;
  roce::IpAddr a_ip_, b_ip_;
  FakeIo ia_, ib_;
  SplitEngine ga_{ia_, 1500};
  SplitEngine gb_{ib_, 1500};
  Flow fwd_, rev_;
};

TEST_F(EngineTest, PairsThenAcksLocallyAndReoriginates) {
  pair();
  // The next request is answered by gateway A with the remote host's MSN.
  ASSERT_TRUE(a_sends(request(op::kRcWriteOnly, kPsn + 1, true)));
  ASSERT_EQ(ia_.local.size(), 1U);
  roce::RocePacket ack = parse(ia_.local[0]);
  EXPECT_EQ(ack.bth.opcode, op::kRcAck);
  EXPECT_EQ(ack.bth.dest_qp, kReqQp);
  EXPECT_EQ(ack.bth.psn, 0xFFFFFFU);
  EXPECT_EQ(ack.aeth.syndrome, 0x1F);
  EXPECT_EQ(ack.aeth.msn, 6U);
  ia_.local.clear();
  ASSERT_EQ(ia_.wan.size(), 2U);  // the control record, then the request
  EXPECT_EQ(ia_.wan[0][0], 0xF0);
  carry_a_to_b();
  EXPECT_EQ(gb_.stats().flows_egress, 1U);
  ASSERT_EQ(ib_.local.size(), 1U);  // re-originated with its PSN
  EXPECT_EQ(parse(ib_.local[0]).bth.psn, 0xFFFFFFU);
  ib_.local.clear();
  // Host B's first ACK covers the passthrough SEND too: it goes through.
  EXPECT_FALSE(b_sends(aeth(0x1F, kPsn + 1, 6)));
  carry_b_to_a();
  ia_.local.clear();
  // Later ACKs stop at gateway B.
  ASSERT_TRUE(a_sends(request(op::kRcSendOnly, kPsn + 2, true)));
  EXPECT_EQ(parse(ia_.local.back()).bth.psn, 0U);
  EXPECT_EQ(parse(ia_.local.back()).aeth.msn, 7U);
  carry_a_to_b();
  EXPECT_TRUE(b_sends(aeth(0x1F, kPsn + 2, 7)));
  EXPECT_EQ(gb_.stats().acks_consumed, 1U);
  EXPECT_EQ(ga_.stats().flows_paired, 1U);
}

TEST_F(EngineTest, NakAndTimerRetransmitFromGatewayB) {
  pair();
  for (uint32_t i = 1; i <= 4; ++i) ASSERT_TRUE(a_sends(request(op::kRcSendOnly, kPsn + i, true)));
  carry_a_to_b();
  ASSERT_EQ(ib_.local.size(), 4U);
  ib_.local.clear();
  // Host B lost PSN kPsn+3 (= 1): a NAK at 1 acknowledges up to 0 and goes back.
  EXPECT_FALSE(b_sends(aeth(0x60, kPsn + 3, 7)));  // the first one covers the base: relayed
  ASSERT_EQ(ib_.local.size(), 2U);
  EXPECT_EQ(parse(ib_.local[0]).bth.psn, 1U);
  EXPECT_EQ(parse(ib_.local[1]).bth.psn, 2U);
  ib_.local.clear();
  // Nothing more from host B: the timer resends from the oldest.
  clock_.advance(Duration::from_ms(4));
  gb_.poll(clock_.now());
  ASSERT_EQ(ib_.local.size(), 2U);
  EXPECT_EQ(parse(ib_.local[0]).bth.psn, 1U);
  ib_.local.clear();
  EXPECT_TRUE(b_sends(aeth(0x1F, kPsn + 4, 9)));
  clock_.advance(Duration::from_s(1));
  gb_.poll(clock_.now());
  EXPECT_TRUE(ib_.local.empty());
}

TEST_F(EngineTest, FatalNakFailsTheNextRequest) {
  pair();
  ASSERT_TRUE(a_sends(request(op::kRcWriteOnly, kPsn + 1, true)));
  carry_a_to_b();
  EXPECT_FALSE(b_sends(aeth(0x62, kPsn + 1, 5)));  // remote access error: relayed to A
  carry_b_to_a();
  EXPECT_TRUE(ia_.local.size() == 1U);  // only the local ACK: gateway A kept the NAK
  ia_.local.clear();
  EXPECT_EQ(ga_.stats().fatal, 1U);
  ASSERT_TRUE(a_sends(request(op::kRcWriteOnly, kPsn + 2, true)));
  ASSERT_EQ(ia_.local.size(), 1U);
  const roce::RocePacket nak = parse(ia_.local[0]);
  EXPECT_EQ(nak.aeth.syndrome, 0x62);
  EXPECT_EQ(nak.bth.psn, 0U);
  EXPECT_TRUE(ia_.wan.empty());  // not carried
}

TEST_F(EngineTest, NoRoomNaksAndSendsCnp) {
  pair();
  ASSERT_TRUE(a_sends(request(op::kRcWriteOnly, kPsn + 1, true)));
  ia_.local.clear();
  ia_.wan.clear();
  ia_.room = false;
  ASSERT_TRUE(a_sends(request(op::kRcWriteOnly, kPsn + 2, true)));
  EXPECT_TRUE(ia_.wan.empty());
  ASSERT_EQ(ia_.local.size(), 2U);
  const roce::RocePacket nak = parse(ia_.local[0]);
  EXPECT_EQ(nak.aeth.syndrome, 0x60);  // NAK sequence error: resend from here
  EXPECT_EQ(nak.bth.psn, 0U);
  const roce::RocePacket cnp = parse(ia_.local[1]);
  EXPECT_EQ(cnp.bth.opcode, op::kCnp);
  EXPECT_EQ(cnp.bth.dest_qp, kReqQp);
  EXPECT_TRUE(cnp.bth.becn);
  ia_.local.clear();
  // Room again, and the flow over its share: ACK plus a CNP.
  ia_.room = true;
  ia_.over = true;
  clock_.advance(Duration::from_ms(1));
  ASSERT_TRUE(a_sends(request(op::kRcWriteOnly, kPsn + 2, true)));
  ASSERT_EQ(ia_.local.size(), 2U);
  EXPECT_EQ(parse(ia_.local[0]).aeth.syndrome, 0x1F);
  EXPECT_EQ(parse(ia_.local[1]).bth.opcode, op::kCnp);
  EXPECT_EQ(ga_.stats().cnps_sent, 2U);
}

}  // namespace
}  // namespace rowan::gw
