// The split engine of rowand (daemon/rowand/split_engine.*) between two fake
// gateways: pairing by PSN match, the control record, local ACKs with the
// remote host's MSN, re-origination, ACK consumption, go-back on a NAK,
// the retransmission timer, and a fatal NAK reaching the requester.
#include "split_engine.h"

#include <gtest/gtest.h>

#include <cstring>
#include <utility>
#include <vector>

#include "tools/fake_clock.h"
#include "tools/split_flows.h"

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
  bool short_of_room(uint32_t, uint64_t) const noexcept override { return short_room; }
  void send_local(const uint8_t* ip, uint32_t len, TimePoint, const VlanTag& tag,
                  bool from_wan) noexcept override {
    local.emplace_back(ip, ip + len);
    local_tags.emplace_back(tag, from_wan);
  }
  bool carry_packet(const uint8_t* ip, uint32_t len, TimePoint) noexcept override {
    wan.emplace_back(ip, ip + len);
    return true;
  }
  Flow* find_flow(const FlowKey& key) noexcept override { return flows.find(key); }
  Flow* open_flow(const FlowKey& key, TimePoint now) noexcept override {
    return flows.open(key, 0, now);
  }
  test::SplitFlows flows{64};
  std::vector<Bytes> wan, local;
  std::vector<std::pair<VlanTag, bool>> local_tags;  ///< each `local` packet's (tag, from_wan)
  bool room = true;
  bool over = false;
  bool short_room = false;
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
    // The classifier's flows: host A's requests at gateway A, host B's
    // answers at gateway B.
    fwd_ = ia_.flows.open(test::SplitFlows::roce_key(a_ip_, b_ip_, kRspQp), 0, clock_.now());
    rev_ = ib_.flows.open(test::SplitFlows::roce_key(b_ip_, a_ip_, kReqQp), 0, clock_.now());
    fwd_->stream = 7;
    rev_->stream = 9;
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
  /// A request from host A with `n` payload bytes (byte i = i * 3 + psn).
  Bytes request_n(uint8_t opcode, uint32_t psn, bool ack_req, uint32_t n, uint32_t dma_len) {
    roce::FrameSpec s;
    s.with_eth = false;
    s.src = a_ip_;
    s.dst = b_ip_;
    s.bth.opcode = opcode;
    s.bth.dest_qp = kRspQp;
    s.bth.psn = psn & roce::kPsnMask;
    s.bth.ack_req = ack_req;
    s.reth.dma_len = dma_len;
    Bytes data(n);
    for (uint32_t i = 0; i < n; ++i) data[i] = static_cast<uint8_t>(i * 3 + psn);
    s.payload = data;
    Bytes buf(4400);
    buf.resize(roce::build(s, buf));
    return buf;
  }
  /// A READ response from host B.
  Bytes response(uint8_t opcode, uint32_t psn, uint32_t n, uint32_t msn) {
    roce::FrameSpec s;
    s.with_eth = false;
    s.src = b_ip_;
    s.dst = a_ip_;
    s.bth.opcode = opcode;
    s.bth.dest_qp = kReqQp;
    s.bth.psn = psn & roce::kPsnMask;
    s.aeth.syndrome = 0x1F;
    s.aeth.msn = msn;
    const Bytes data(n, static_cast<uint8_t>(psn));
    s.payload = data;
    Bytes buf(4400);
    buf.resize(roce::build(s, buf));
    return buf;
  }
  /// An ACK/NAK from host B (toward A's requester QP).
  Bytes aeth(uint8_t syndrome, uint32_t psn, uint32_t msn) {
    Bytes buf(128);
    buf.resize(roce::build(test::aeth_spec(b_ip_, a_ip_, kReqQp, psn, syndrome, msn), buf));
    return buf;
  }
  // Host A sends: gateway A sees it; in passthrough the test carries it to B.
  bool a_sends(const Bytes& pkt) {
    return ga_.on_local(*fwd_, true, pkt.data(), static_cast<uint32_t>(pkt.size()), clock_.now());
  }
  // Records gateway A carried reach gateway B (and, when B lets them pass, host B).
  void carry_a_to_b() {
    for (const Bytes& r : ia_.wan) {
      if (!gb_.on_wan(nullptr, fwd_->stream, r.data(), static_cast<uint32_t>(r.size()),
                      clock_.now())) {
        ib_.local.push_back(r);
      }
    }
    ia_.wan.clear();
  }
  // Host B answers: true when gateway B consumed it, else it goes to gateway A.
  bool b_sends(const Bytes& pkt) {
    if (gb_.on_local(*rev_, true, pkt.data(), static_cast<uint32_t>(pkt.size()), clock_.now())) {
      return true;
    }
    ib_.wan.push_back(pkt);
    return false;
  }
  void carry_b_to_a() {
    for (const Bytes& r : ib_.wan) {
      if (!ga_.on_wan(nullptr, rev_->stream, r.data(), static_cast<uint32_t>(r.size()),
                      clock_.now())) {
        ia_.local.push_back(r);
      }
    }
    ib_.wan.clear();
  }
  /// A CM MAD (UD SEND to QP 1) from `src` to `dst`: attribute `attr`, the
  /// sender's comm ID `local`, the other's `remote`, and for REQ/REP the
  /// sender's QPN and starting PSN; DREQ: `qpn` is the receiver's QPN.
  Bytes cm(bool from_a, uint16_t attr, uint32_t local, uint32_t remote, uint32_t qpn = 0,
           uint32_t psn = 0, uint8_t mtu_code = 3) {
    Bytes mad(256, 0);
    mad[0] = 1;
    mad[1] = 0x07;
    mad[2] = 2;
    mad[3] = 3;
    mad[16] = static_cast<uint8_t>(attr >> 8);
    mad[17] = static_cast<uint8_t>(attr);
    uint8_t* m = mad.data() + 24;
    auto put = [](uint8_t* at, uint32_t v, int bytes) {
      for (int i = 0; i < bytes; ++i) at[i] = static_cast<uint8_t>(v >> (8 * (bytes - 1 - i)));
    };
    put(m, local, 4);
    if (attr == split::cm_attr::kReq) {
      put(m + 32, qpn, 3);
      put(m + 44, psn, 3);
      m[50] = static_cast<uint8_t>(mtu_code << 4 | 7);  // path MTU (3: 1024)
    } else {
      put(m + 4, remote, 4);
      if (attr == split::cm_attr::kRep) {
        put(m + 12, qpn, 3);
        put(m + 20, psn, 3);
      } else if (attr == split::cm_attr::kDreq) {
        put(m + 8, qpn, 3);
      }
    }
    roce::FrameSpec s;
    s.with_eth = false;
    s.src = from_a ? a_ip_ : b_ip_;
    s.dst = from_a ? b_ip_ : a_ip_;
    s.bth.opcode = op::kUdSendOnly;
    s.bth.dest_qp = 1;
    s.deth.qkey = 0x80010000;
    s.deth.src_qp = 1;
    s.payload = mad;
    Bytes buf(512);
    buf.resize(roce::build(s, buf));
    return buf;
  }
  /// Host A's MAD through gateway A (local) and gateway B (WAN, delivered
  /// to host B unless gateway B replaced it), with what gateway A carried
  /// ahead of it.
  void cm_a_to_b(const Bytes& b, bool split_route = true) {
    EXPECT_FALSE(ga_.on_local(cm_flow_, split_route, b.data(), static_cast<uint32_t>(b.size()),
                              clock_.now()));
    for (const Bytes& r : ia_.wan) {
      EXPECT_TRUE(gb_.on_wan(nullptr, 3, r.data(), static_cast<uint32_t>(r.size()), clock_.now()));
    }
    ia_.wan.clear();
    if (!gb_.on_wan(nullptr, 3, b.data(), static_cast<uint32_t>(b.size()), clock_.now())) {
      mads_at_b_.push_back(b);
    } else {
      mads_at_b_.push_back(ib_.local.back());
      ib_.local.pop_back();
    }
  }
  void cm_b_to_a(const Bytes& b, bool split_route = true) {
    EXPECT_FALSE(gb_.on_local(cm_flow_, split_route, b.data(), static_cast<uint32_t>(b.size()),
                              clock_.now()));
    for (const Bytes& r : ib_.wan) {
      EXPECT_TRUE(ga_.on_wan(nullptr, 3, r.data(), static_cast<uint32_t>(r.size()), clock_.now()));
    }
    ib_.wan.clear();
    EXPECT_FALSE(ga_.on_wan(nullptr, 3, b.data(), static_cast<uint32_t>(b.size()), clock_.now()));
  }
  /// Host A connects to host B with RDMA CM: A sends from kPsn, B from 0x500.
  void cm_connect() {
    cm_a_to_b(cm(true, split::cm_attr::kReq, 0xA1, 0, kReqQp, 0x500));
    cm_b_to_a(cm(false, split::cm_attr::kRep, 0xB1, 0xA1, kRspQp, kPsn));
    cm_a_to_b(cm(true, split::cm_attr::kRtu, 0xA1, 0xB1));
  }
  /// Host A disconnects: its DREQ goes through gateway A (which writes a
  /// drain record ahead of it when the flow is split), then everything gateway
  /// A sent crosses to gateway B on the CM stream. Returns the DREQ.
  Bytes dreq_a_to_b() {
    Bytes dreq = cm(true, split::cm_attr::kDreq, 0xA1, 0xB1, kRspQp);
    EXPECT_FALSE(ga_.on_local(cm_flow_, true, dreq.data(), static_cast<uint32_t>(dreq.size()),
                              clock_.now()));
    ia_.wan.push_back(dreq);
    for (const Bytes& r : ia_.wan) {
      EXPECT_TRUE(gb_.on_wan(nullptr, 3, r.data(), static_cast<uint32_t>(r.size()), clock_.now()));
    }
    ia_.wan.clear();
    return dreq;
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
  Flow* fwd_ = nullptr;
  Flow* rev_ = nullptr;
  Flow cm_flow_;
  std::vector<Bytes> mads_at_b_;
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

// A message longer than gateway B's in-flight window: the responder ACKs
// only what asks, so gateway B asks every half window (and on the packet that
// fills it) instead of waiting for its retransmission timer.
TEST_F(EngineTest, GatewayBAsksForAcksWithinItsWindow) {
  pair();
  ASSERT_TRUE(a_sends(request(op::kRcWriteFirst, kPsn + 1, false)));
  for (uint32_t i = 2; i < 200; ++i)
    ASSERT_TRUE(a_sends(request(op::kRcWriteMiddle, kPsn + i, false)));
  ASSERT_TRUE(a_sends(request(op::kRcWriteLast, kPsn + 200, true)));
  carry_a_to_b();
  ASSERT_EQ(ib_.local.size(), 128U);  // gateway B's window (rxe's own)
  std::vector<uint32_t> asked;
  for (size_t i = 0; i < ib_.local.size(); ++i) {
    const roce::RocePacket q = parse(ib_.local[i]);
    EXPECT_TRUE(roce::icrc_ok(q)) << i;
    EXPECT_EQ(q.bth.psn, roce::psn_add(kPsn, static_cast<int32_t>(i) + 1));
    if (q.bth.ack_req) asked.push_back(static_cast<uint32_t>(i));
  }
  EXPECT_EQ(asked, (std::vector<uint32_t>{63, 127}));
  // Host B answers the second request for an ACK: the window moves on.
  ib_.local.clear();
  EXPECT_FALSE(b_sends(aeth(0x1F, kPsn + 64, 6)));  // covers the base: relayed once
  EXPECT_TRUE(b_sends(aeth(0x1F, kPsn + 128, 6)));
  ASSERT_EQ(ib_.local.size(), 72U);  // the rest of the message, its last asks by itself
  EXPECT_TRUE(parse(ib_.local[63]).bth.ack_req);  // a half window since the last ask
  EXPECT_TRUE(parse(ib_.local[71]).bth.ack_req);  // the requester's own AckReq
  EXPECT_EQ(gb_.stats().acks_requested, 3U);
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
  // Nothing more from host B: the timer resends the oldest (a probe).
  clock_.advance(Duration::from_ms(4));
  gb_.poll(clock_.now());
  ASSERT_EQ(ib_.local.size(), 1U);
  EXPECT_EQ(parse(ib_.local[0]).bth.psn, 1U);
  EXPECT_TRUE(parse(ib_.local[0]).bth.ack_req);  // asks, so a lost one is not taken in silently
  EXPECT_TRUE(roce::icrc_ok(parse(ib_.local[0])));
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

// A READ with a wrong R_Key: the remote host's NAK reaches the requester as
// soon as it passes gateway A, not when the requester's ACK timer (seconds
// on a real RNIC) makes it send again.
TEST_F(EngineTest, FatalNakOnAReadReachesTheRequesterAtOnce) {
  pair();
  ASSERT_TRUE(a_sends(request(op::kRcWriteOnly, kPsn + 1, true)));
  ia_.local.clear();  // gateway A's ACK for the WRITE
  ASSERT_TRUE(a_sends(request(op::kRcReadRequest, kPsn + 2, false)));  // carried to B
  EXPECT_TRUE(ia_.local.empty());  // the remote host answers a READ
  carry_a_to_b();
  ASSERT_EQ(ib_.local.size(), 2U);
  ib_.local.clear();
  EXPECT_FALSE(b_sends(aeth(0x1F, kPsn + 1, 6)));  // covers the passthrough base: relayed
  EXPECT_FALSE(b_sends(aeth(0x62, kPsn + 2, 6)));  // remote access error on the READ
  carry_b_to_a();
  ASSERT_EQ(ia_.local.size(), 2U);  // the relayed ACK, then the NAK, with no new request
  const roce::RocePacket nak = parse(ia_.local[1]);
  EXPECT_EQ(nak.aeth.syndrome, 0x62);
  EXPECT_EQ(nak.bth.psn, roce::psn_add(kPsn, 2));
  EXPECT_EQ(nak.bth.dest_qp, kReqQp);
  ia_.local.clear();
  EXPECT_EQ(ga_.snapshot()["flows"][0]["fatal_relayed"], 1U);
  EXPECT_EQ(ga_.stats().fatal_relayed, 1U);  // kept after the flow is released
  // The flow is released at the next housekeeping: the requester was told.
  ga_.expire(clock_.now() - Duration::from_s(10));
  EXPECT_EQ(ga_.stats().failed_released, 1U);
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

// Short of room for another window: gateway A holds its ACK (the requester
// waits on its window) instead of taking packets it would have to drop, and
// sends it from its timer path once there is room.
TEST_F(EngineTest, ShortOfRoomHoldsTheAckUntilThereIsRoom) {
  pair();
  ia_.local.clear();
  ia_.short_room = true;
  ASSERT_TRUE(a_sends(request(op::kRcWriteOnly, kPsn + 1, true)));
  EXPECT_TRUE(ia_.local.empty());  // held
  ASSERT_EQ(ia_.wan.size(), 2U);   // but carried: the control record and the request
  const TimePoint next = ga_.next_timeout();
  ASSERT_GT(next, clock_.now());  // no busy loop while held
  clock_.advance(next - clock_.now());
  ga_.poll(clock_.now());
  EXPECT_TRUE(ia_.local.empty());  // still short
  ia_.short_room = false;
  clock_.advance(ga_.next_timeout() - clock_.now());
  ga_.poll(clock_.now());
  ASSERT_EQ(ia_.local.size(), 1U);
  const roce::RocePacket ack = parse(ia_.local[0]);
  EXPECT_EQ(ack.bth.opcode, op::kRcAck);
  EXPECT_EQ(ack.bth.psn, 0xFFFFFFU);
  EXPECT_EQ(ack.aeth.msn, 6U);
}

TEST_F(EngineTest, CmPairsBeforeAnyDataAndDreqReleases) {
  cm_connect();
  EXPECT_EQ(ga_.stats().cm_paired, 1U);  // A's requester direction
  EXPECT_EQ(gb_.stats().cm_paired, 1U);  // B's requester direction
  // Host A's very first request is answered by gateway A (MSN 1).
  ASSERT_TRUE(a_sends(request(op::kRcSendOnly, kPsn, true)));
  ASSERT_EQ(ia_.local.size(), 1U);
  const roce::RocePacket ack = parse(ia_.local[0]);
  EXPECT_EQ(ack.bth.dest_qp, kReqQp);
  EXPECT_EQ(ack.bth.psn, kPsn);
  EXPECT_EQ(ack.aeth.msn, 1U);
  ia_.local.clear();
  ASSERT_EQ(ia_.wan.size(), 2U);
  EXPECT_EQ(ia_.wan[0][0], 0xF0);
  EXPECT_EQ(ia_.wan[0][3], 0x01);  // nothing in passthrough: consume every ACK
  carry_a_to_b();
  ASSERT_EQ(ib_.local.size(), 1U);
  EXPECT_EQ(parse(ib_.local[0]).bth.psn, kPsn);
  ib_.local.clear();
  EXPECT_TRUE(b_sends(aeth(0x1F, kPsn, 1)));  // consumed: the requester has its ACK
  EXPECT_EQ(gb_.stats().acks_consumed, 1U);
  // Three requests across the PSN wrap.
  for (uint32_t i = 1; i <= 3; ++i) ASSERT_TRUE(a_sends(request(op::kRcWriteOnly, kPsn + i, true)));
  ASSERT_EQ(ia_.local.size(), 3U);
  EXPECT_EQ(parse(ia_.local[2]).bth.psn, 1U);
  EXPECT_EQ(parse(ia_.local[2]).aeth.msn, 4U);
  ia_.local.clear();
  carry_a_to_b();
  EXPECT_EQ(ib_.local.size(), 3U);
  EXPECT_TRUE(b_sends(aeth(0x1F, kPsn + 3, 4)));
  EXPECT_EQ(ga_.snapshot()["flows"].size(), 1U);
  EXPECT_EQ(gb_.snapshot()["flows"].size(), 2U);  // egress A→B, tracked B→A
  EXPECT_EQ(gb_.snapshot()["flows"][0]["paired_by"], "cm");
  // Host B disconnects: both gateways release both directions.
  cm_b_to_a(cm(false, split::cm_attr::kDreq, 0xB1, 0xA1, kReqQp));
  cm_a_to_b(cm(true, split::cm_attr::kDrep, 0xA1, 0xB1));
  EXPECT_EQ(ga_.snapshot()["flows"].size(), 0U);
  EXPECT_EQ(gb_.snapshot()["flows"].size(), 0U);
  EXPECT_EQ(ga_.stats().cm_released, 1U);
  EXPECT_EQ(gb_.stats().cm_released, 2U);
  // What follows is passthrough again (a tracked flow, not answered locally).
  EXPECT_FALSE(a_sends(request(op::kRcSendOnly, kPsn + 4, true)));
}

// The sequence of the netns testbed (split_test, RDMA CM): host A's requests
// all complete at gateway A at once, so host A disconnects (DREQ) while
// gateway B still holds its re-originated packets unacknowledged and part
// of the data is still on the WAN (another stream than the DREQ's). The
// DREQ must neither release gateway B's egress (which then stopped consuming
// the responder's ACKs and dropped the rest of the data) nor reach host B
// before the data: gateway B holds it until everything before it is
// delivered and acknowledged.
TEST_F(EngineTest, CmDreqWaitsForTheDataBeforeIt) {
  cm_connect();
  ASSERT_TRUE(a_sends(request(op::kRcSendOnly, kPsn, true)));
  for (uint32_t i = 1; i <= 3; ++i) ASSERT_TRUE(a_sends(request(op::kRcWriteOnly, kPsn + i, true)));
  ia_.local.clear();              // all four acknowledged by gateway A
  ASSERT_EQ(ia_.wan.size(), 5U);  // the control record and the four requests
  // Only the control record and the SEND have crossed the WAN so far.
  std::vector<Bytes> later(ia_.wan.begin() + 2, ia_.wan.end());
  ia_.wan.resize(2);
  carry_a_to_b();
  ASSERT_EQ(ib_.local.size(), 1U);
  ib_.local.clear();
  // Host A disconnects: a drain record (up to PSN kPsn + 4) goes ahead of its DREQ.
  const Bytes dreq = cm(true, split::cm_attr::kDreq, 0xA1, 0xB1, kRspQp);
  EXPECT_FALSE(
      ga_.on_local(cm_flow_, true, dreq.data(), static_cast<uint32_t>(dreq.size()), clock_.now()));
  ASSERT_EQ(ia_.wan.size(), 1U);
  EXPECT_EQ(ia_.wan[0][0], 0xF0);
  EXPECT_EQ(ia_.wan[0][1], 3);
  ia_.wan.push_back(dreq);
  for (const Bytes& r : ia_.wan) {
    EXPECT_TRUE(gb_.on_wan(nullptr, 3, r.data(), static_cast<uint32_t>(r.size()), clock_.now()));
  }
  ia_.wan.clear();
  EXPECT_TRUE(ib_.local.empty()) << "the DREQ overtook the data";
  EXPECT_EQ(gb_.stats().dreqs_held, 1U);
  EXPECT_EQ(gb_.snapshot()["flows"].size(), 2U);  // nothing released yet
  // A repeated DREQ is not delivered either.
  EXPECT_FALSE(
      ga_.on_local(cm_flow_, true, dreq.data(), static_cast<uint32_t>(dreq.size()), clock_.now()));
  ia_.wan.push_back(dreq);
  for (const Bytes& r : ia_.wan) {
    EXPECT_TRUE(gb_.on_wan(nullptr, 3, r.data(), static_cast<uint32_t>(r.size()), clock_.now()));
  }
  ia_.wan.clear();
  EXPECT_TRUE(ib_.local.empty());
  // The responder's ACK for the SEND is consumed; the DREQ still waits.
  EXPECT_TRUE(b_sends(aeth(0x1F, kPsn, 1)));
  gb_.poll(clock_.now());
  EXPECT_TRUE(ib_.local.empty());
  // The rest of the data arrives after the DREQ and is re-originated.
  ia_.wan = later;
  carry_a_to_b();
  ASSERT_EQ(ib_.local.size(), 3U);
  EXPECT_EQ(parse(ib_.local[2]).bth.psn, 1U);
  ib_.local.clear();
  EXPECT_TRUE(b_sends(aeth(0x1F, kPsn + 2, 3)));
  EXPECT_TRUE(ib_.local.empty());
  // The last ACK: consumed, and now the DREQ goes to host B and the
  // connection's flows are released.
  EXPECT_TRUE(b_sends(aeth(0x1F, kPsn + 3, 4)));
  EXPECT_EQ(gb_.stats().acks_consumed, 3U);
  ASSERT_EQ(ib_.local.size(), 1U);
  EXPECT_EQ(ib_.local[0], dreq);
  EXPECT_EQ(gb_.snapshot()["flows"].size(), 0U);
  EXPECT_EQ(gb_.stats().cm_released, 2U);
  EXPECT_EQ(gb_.snapshot()["dreqs_waiting"], 0U);
}

// The drain record and the DREQ overtake even the flow's control record (a
// WAN loss on the flow's stream): gateway B holds the DREQ until the flow has
// started and delivered what came before it.
TEST_F(EngineTest, CmDreqBeforeTheFlowStartedWaitsForItAndItsData) {
  cm_connect();
  ASSERT_TRUE(a_sends(request(op::kRcSendOnly, kPsn, true)));
  ASSERT_TRUE(a_sends(request(op::kRcWriteOnly, kPsn + 1, true)));
  ia_.local.clear();
  ASSERT_EQ(ia_.wan.size(), 3U);  // the control record and the two requests
  std::vector<Bytes> data(ia_.wan.begin(), ia_.wan.end());
  ia_.wan.clear();
  const Bytes dreq = dreq_a_to_b();
  gb_.poll(clock_.now());
  EXPECT_TRUE(ib_.local.empty()) << "the DREQ overtook the flow";
  EXPECT_EQ(gb_.stats().dreqs_held, 1U);
  EXPECT_EQ(gb_.stats().dreqs_held_early, 1U);
  // The flow's stream catches up: control record, then both requests.
  ia_.wan = data;
  carry_a_to_b();
  ASSERT_EQ(ib_.local.size(), 2U);
  EXPECT_EQ(parse(ib_.local[0]).bth.opcode, op::kRcSendOnly);
  ib_.local.clear();
  gb_.poll(clock_.now());
  EXPECT_TRUE(ib_.local.empty());
  EXPECT_TRUE(b_sends(aeth(0x1F, kPsn + 1, 2)));
  gb_.poll(clock_.now());
  ASSERT_EQ(ib_.local.size(), 1U);
  EXPECT_EQ(ib_.local[0], dreq);
  EXPECT_EQ(gb_.stats().dreq_hold_expired, 0U);
  EXPECT_EQ(gb_.snapshot()["flows"].size(), 0U);
}

// A DREQ held behind data the responder never acknowledges goes on once the
// egress gives up (its QP is in the error state anyway), not later.
TEST_F(EngineTest, CmDreqHeldBehindADeadResponderGoesOnWhenTheFlowFails) {
  cm_connect();
  ASSERT_TRUE(a_sends(request(op::kRcSendOnly, kPsn, true)));
  ia_.local.clear();
  carry_a_to_b();
  ASSERT_EQ(ib_.local.size(), 1U);
  ib_.local.clear();
  const Bytes dreq = dreq_a_to_b();
  EXPECT_EQ(gb_.stats().dreqs_held, 1U);
  const TimePoint held_at = clock_.now();
  bool delivered = false;
  for (int i = 0; i < 10000 && !delivered; ++i) {
    clock_.advance(Duration::from_ms(1));
    gb_.poll(clock_.now());
    for (const Bytes& b : ib_.local) delivered = delivered || b == dreq;
    ib_.local.clear();
  }
  ASSERT_TRUE(delivered);
  EXPECT_EQ(gb_.stats().fatal, 1U);  // retries exceeded: the failure went to gateway A
  EXPECT_LT(clock_.now() - held_at, SplitEngine::kDreqHoldMax);
  EXPECT_EQ(gb_.stats().dreq_hold_expired, 0U);
}

TEST_F(EngineTest, CmOnAPassthroughRouteDoesNotPair) {
  cm_a_to_b(cm(true, split::cm_attr::kReq, 0xA1, 0, kReqQp, 0x500), false);
  cm_b_to_a(cm(false, split::cm_attr::kRep, 0xB1, 0xA1, kRspQp, kPsn), false);
  EXPECT_EQ(ga_.stats().cm_paired, 0U);
  EXPECT_EQ(gb_.stats().cm_paired, 0U);
}

TEST_F(EngineTest, CmReconnectWithTheSameQpsStartsOver) {
  cm_connect();
  ASSERT_TRUE(a_sends(request(op::kRcSendOnly, kPsn, true)));
  ia_.local.clear();
  // The application resets its QP and connects again (no DREQ seen).
  cm_a_to_b(cm(true, split::cm_attr::kReq, 0xA2, 0, kReqQp, 0x900));
  cm_b_to_a(cm(false, split::cm_attr::kRep, 0xB2, 0xA2, kRspQp, 0x1000));
  ASSERT_TRUE(a_sends(request(op::kRcSendOnly, 0x1000, true)));
  ASSERT_EQ(ia_.local.size(), 1U);
  EXPECT_EQ(parse(ia_.local[0]).bth.psn, 0x1000U);
  EXPECT_EQ(parse(ia_.local[0]).aeth.msn, 1U);
  EXPECT_EQ(ga_.stats().cm_paired, 2U);
}

TEST_F(EngineTest, QpErrorAndIdleFlowsAreReleased) {
  pair();
  ASSERT_TRUE(a_sends(request(op::kRcWriteOnly, kPsn + 1, true)));
  carry_a_to_b();
  EXPECT_FALSE(b_sends(aeth(0x62, kPsn + 1, 5)));  // remote access error
  carry_b_to_a();
  ia_.local.clear();
  // Gateway B's requester failed: released at the next housekeeping.
  gb_.expire(clock_.now() - Duration::from_s(10));
  EXPECT_EQ(gb_.stats().failed_released, 1U);
  EXPECT_EQ(gb_.snapshot()["flows"].size(), 0U);
  // Gateway A keeps the failure until the requester has been told.
  ga_.expire(clock_.now() - Duration::from_s(10));
  EXPECT_EQ(ga_.snapshot()["flows"].size(), 1U);
  ASSERT_TRUE(a_sends(request(op::kRcWriteOnly, kPsn + 2, true)));
  EXPECT_EQ(parse(ia_.local.back()).aeth.syndrome, 0x62);
  ga_.expire(clock_.now() - Duration::from_s(10));
  EXPECT_EQ(ga_.stats().failed_released, 1U);
  EXPECT_EQ(ga_.snapshot()["flows"].size(), 0U);
  // A tracked flow idle past the cutoff goes too.
  EXPECT_FALSE(a_sends(request(op::kRcSendOnly, 0x42, true)));
  EXPECT_EQ(ga_.snapshot()["flows"].size(), 1U);
  clock_.advance(Duration::from_s(1));
  ga_.expire(clock_.now() - Duration::from_ms(500));
  EXPECT_EQ(ga_.snapshot()["flows"].size(), 0U);
}

// Host A runs path MTU 4096, host B's site 1024 (gateway B's local path MTU):
// gateway B gives the REQ its site's MTU, re-cuts A's requests into 1024 with
// B's PSNs, and READ responses back into 4096 with A's PSNs.
TEST_F(EngineTest, CmMtuTranslationBetween4096And1024) {
  gb_.set_local_pmtu(1024);
  cm_a_to_b(cm(true, split::cm_attr::kReq, 0xA1, 0, kReqQp, 0x500, 5));  // MTU 4096
  ASSERT_EQ(mads_at_b_.size(), 1U);
  const roce::RocePacket req = parse(mads_at_b_[0]);  // ICRC recomputed
  EXPECT_EQ(req.payload()[24 + 50] >> 4, 3);          // host B is told 1024
  EXPECT_EQ(gb_.stats().cm_mtu_rewritten, 1U);
  cm_b_to_a(cm(false, split::cm_attr::kRep, 0xB1, 0xA1, kRspQp, kPsn));
  cm_a_to_b(cm(true, split::cm_attr::kRtu, 0xA1, 0xB1));
  // A 4096-byte WRITE (one packet at A) reaches B as four 1024-byte packets
  // from PSN kPsn on, across the wrap.
  const Bytes w = request_n(op::kRcWriteOnly, kPsn, true, 4096, 4096);
  ASSERT_TRUE(a_sends(w));
  ASSERT_EQ(ia_.local.size(), 1U);
  EXPECT_EQ(parse(ia_.local[0]).bth.psn, kPsn);  // A's own space
  EXPECT_EQ(parse(ia_.local[0]).aeth.msn, 1U);
  ia_.local.clear();
  carry_a_to_b();
  EXPECT_EQ(gb_.stats().translated_flows, 1U);
  EXPECT_EQ(gb_.snapshot()["translated_flows"], 1U);  // rowanctl status shows them
  EXPECT_EQ(gb_.snapshot()["cm_mtu_rewritten"], 1U);
  ASSERT_EQ(ib_.local.size(), 4U);
  const uint8_t ops[4] = {op::kRcWriteFirst, op::kRcWriteMiddle, op::kRcWriteMiddle,
                          op::kRcWriteLast};
  Bytes joined;
  for (uint32_t i = 0; i < 4; ++i) {
    const roce::RocePacket p = parse(ib_.local[i]);
    EXPECT_EQ(p.bth.opcode, ops[i]);
    EXPECT_EQ(p.bth.psn, roce::psn_add(kPsn, i));
    EXPECT_EQ(p.payload_len, 1024U);
    EXPECT_EQ(p.bth.dest_qp, kRspQp);
    joined.insert(joined.end(), p.payload().begin(), p.payload().end());
  }
  const roce::RocePacket wp = parse(w);
  EXPECT_EQ(joined, Bytes(wp.payload().begin(), wp.payload().end()));
  EXPECT_EQ(parse(ib_.local[0]).reth.dma_len, 4096U);
  ib_.local.clear();
  // B loses the third piece: its NAK (B's space) resends from there.
  EXPECT_TRUE(b_sends(aeth(0x60, 0, 0)));
  ASSERT_EQ(ib_.local.size(), 2U);
  EXPECT_EQ(parse(ib_.local[0]).bth.psn, 0U);
  ib_.local.clear();
  EXPECT_TRUE(b_sends(aeth(0x1F, 1, 1)));
  // A READs 8192 bytes at its PSN kPsn + 1: 2 PSNs at A, 8 at B.
  ASSERT_TRUE(a_sends(request_n(op::kRcReadRequest, kPsn + 1, true, 0, 8192)));
  carry_a_to_b();
  ASSERT_EQ(ib_.local.size(), 1U);
  EXPECT_EQ(parse(ib_.local[0]).bth.psn, 2U);
  ib_.local.clear();
  for (uint32_t i = 0; i < 8; ++i) {
    const uint8_t o = i == 0   ? op::kRcReadResponseFirst
                      : i == 7 ? op::kRcReadResponseLast
                               : op::kRcReadResponseMiddle;
    EXPECT_TRUE(b_sends(response(o, 2 + i, 1024, 2)));
  }
  ASSERT_EQ(ib_.wan.size(), 2U);  // carried toward A as two 4096-byte responses
  carry_b_to_a();
  ASSERT_EQ(ia_.local.size(), 2U);
  EXPECT_EQ(parse(ia_.local[0]).bth.opcode, op::kRcReadResponseFirst);
  EXPECT_EQ(parse(ia_.local[0]).bth.psn, 0xFFFFFFU);
  EXPECT_EQ(parse(ia_.local[0]).payload_len, 4096U);
  EXPECT_EQ(parse(ia_.local[1]).bth.opcode, op::kRcReadResponseLast);
  EXPECT_EQ(parse(ia_.local[1]).bth.psn, 0U);
  EXPECT_EQ(parse(ia_.local[1]).aeth.msn, 2U);
  ia_.local.clear();
  // The next request at A's PSN 1 is answered locally: the READ completed.
  ASSERT_TRUE(a_sends(request_n(op::kRcSendOnly, 1, true, 100, 0)));
  ASSERT_EQ(ia_.local.size(), 1U);
  EXPECT_EQ(parse(ia_.local[0]).aeth.syndrome, 0x1F);
  EXPECT_EQ(parse(ia_.local[0]).bth.psn, 1U);
  EXPECT_EQ(parse(ia_.local[0]).aeth.msn, 3U);
  carry_a_to_b();
  ASSERT_EQ(ib_.local.size(), 1U);
  EXPECT_EQ(parse(ib_.local[0]).bth.psn, 10U);  // after the READ's 8 PSNs in B's space
  EXPECT_EQ(parse(ib_.local[0]).bth.opcode, op::kRcSendOnly);
}

// Gateway B restarted (a new incarnation): gateway A's ingress flow fails.
// The requester gets a fatal NAK at its oldest unacknowledged PSN at once,
// host B's responder a QP-failing request at each PSN it may expect, and
// nothing of the flow is carried or relayed any more.
TEST_F(EngineTest, PeerRestartFailsTheIngressFlowBothWays) {
  pair();
  ASSERT_TRUE(a_sends(request(op::kRcWriteOnly, kPsn + 1, true)));   // ACKed at once
  ASSERT_TRUE(a_sends(request(op::kRcWriteOnly, kPsn + 2, false)));  // ACK deferred
  ASSERT_EQ(ia_.local.size(), 1U);
  ia_.local.clear();
  ia_.wan.clear();  // what the dead gateway B had: lost
  ga_.on_peer_restart(nullptr, fwd_->peer, clock_.now());
  ASSERT_EQ(ia_.local.size(), 1U);
  const roce::RocePacket nak = parse(ia_.local[0]);
  EXPECT_EQ(nak.bth.opcode, op::kRcAck);
  EXPECT_EQ(nak.bth.dest_qp, kReqQp);
  EXPECT_EQ(nak.aeth.syndrome, 0x63);  // remote operational error
  EXPECT_EQ(nak.bth.psn, 0U);          // kPsn + 2: the one not acknowledged
  EXPECT_EQ(nak.aeth.msn, 6U);
  ia_.local.clear();
  // Host B expects a PSN from the split's start (kPsn + 1) to kPsn + 3:
  // the highest first (it most likely had all but the tail).
  // Two at each: a SEND only with invalidate of R_Key 0 (it completes a
  // posted receive with an error), then a WRITE only with R_Key 0.
  ASSERT_EQ(ia_.wan.size(), 6U);
  for (size_t i = 0; i < ia_.wan.size(); ++i) {
    const roce::RocePacket q = parse(ia_.wan[i]);
    EXPECT_EQ(q.bth.opcode, i % 2 == 0 ? op::kRcSendOnlyInv : op::kRcWriteOnly);
    EXPECT_EQ(q.bth.dest_qp, kRspQp);
    EXPECT_EQ(q.bth.psn, roce::psn_add(kPsn, 3 - static_cast<int32_t>(i / 2)));
    EXPECT_EQ(std::memcmp(q.src.bytes.data(), a_ip_.bytes.data(), 4), 0);
    EXPECT_EQ(std::memcmp(q.dst.bytes.data(), b_ip_.bytes.data(), 4), 0);
    EXPECT_EQ(q.payload_len, 0U);
    if (i % 2 == 0) {
      EXPECT_EQ(q.ieth, 0U);
    } else {
      EXPECT_EQ(q.reth.rkey, 0U);
      EXPECT_EQ(q.reth.dma_len, 1U);
    }
  }
  ia_.wan.clear();
  EXPECT_EQ(ga_.stats().poison_sent, 6U);
  EXPECT_EQ(ga_.stats().restart_failed, 1U);
  EXPECT_EQ(ga_.stats().restart_naks, 1U);
  // Host B's answers to the poison are not the requester's business.
  EXPECT_TRUE(ga_.on_wan(nullptr, rev_->stream, aeth(0x1F, kPsn + 1, 6).data(),
                         static_cast<uint32_t>(aeth(0x1F, kPsn + 1, 6).size()), clock_.now()));
  EXPECT_EQ(ga_.stats().dead_dropped, 1U);
  // A later request is NAKed, not carried.
  ASSERT_TRUE(a_sends(request(op::kRcWriteOnly, kPsn + 3, true)));
  ASSERT_EQ(ia_.local.size(), 1U);
  EXPECT_EQ(parse(ia_.local[0]).aeth.syndrome, 0x63);
  EXPECT_TRUE(ia_.wan.empty());
  // Released at the housekeeping after the last round of QP-failing
  // requests: the requester was told.
  ga_.expire(clock_.now() - Duration::from_s(10));
  EXPECT_EQ(ga_.snapshot()["flows"].size(), 1U);
  clock_.advance(Duration::from_ms(200));
  ga_.poll(clock_.now());
  clock_.advance(Duration::from_ms(200));
  ga_.poll(clock_.now());
  EXPECT_EQ(ga_.stats().poison_sent, 18U);
  ga_.expire(clock_.now() - Duration::from_s(10));
  EXPECT_EQ(ga_.snapshot()["flows"].size(), 0U);
}

// Gateway A restarted: gateway B's egress flow stops re-originating, and
// host B's responder gets a QP-failing request at each PSN of the window
// (it may only wait for a message, and would otherwise wait forever).
// What host A sends later (in passthrough through the new gateway A) is
// consumed, and so are host B's answers.
TEST_F(EngineTest, PeerRestartFailsTheEgressFlowAndItsHost) {
  pair();
  for (uint32_t i = 1; i <= 3; ++i) ASSERT_TRUE(a_sends(request(op::kRcWriteOnly, kPsn + i, true)));
  carry_a_to_b();
  ASSERT_EQ(ib_.local.size(), 3U);
  ib_.local.clear();
  EXPECT_FALSE(b_sends(aeth(0x1F, kPsn + 1, 6)));  // covers the base: relayed
  ib_.wan.clear();
  gb_.on_peer_restart(nullptr, 0, clock_.now());
  ASSERT_EQ(ib_.local.size(), 6U);  // kPsn + 4 (the next one) down to kPsn + 2, two each
  for (size_t i = 0; i < ib_.local.size(); ++i) {
    const roce::RocePacket q = parse(ib_.local[i]);
    EXPECT_EQ(q.bth.opcode, i % 2 == 0 ? op::kRcSendOnlyInv : op::kRcWriteOnly);
    EXPECT_EQ(q.bth.dest_qp, kRspQp);
    EXPECT_EQ(q.bth.psn, roce::psn_add(kPsn, 4 - static_cast<int32_t>(i / 2)));
    EXPECT_EQ(q.payload_len, 0U);
  }
  ib_.local.clear();
  EXPECT_TRUE(ib_.wan.empty());  // no NAK toward host A: it could acknowledge a hole
  // No retransmission any more: only the QP-failing requests again (two
  // more rounds).
  for (int i = 0; i < 300; ++i) {
    clock_.advance(Duration::from_ms(2));
    gb_.poll(clock_.now());
  }
  ASSERT_EQ(ib_.local.size(), 12U);
  for (const Bytes& f : ib_.local) EXPECT_EQ(parse(f).payload_len, 0U);
  ib_.local.clear();
  EXPECT_TRUE(gb_.next_timeout().is_infinite());
  // Host A's requests after the restart (passthrough at the new gateway A):
  // consumed; once its lowest PSN comes again (the requester went back to
  // its oldest unacknowledged PSN) it gets a fatal NAK there, and only there.
  auto late = [&](uint32_t psn) {
    const Bytes r = request(op::kRcWriteOnly, psn, true);
    EXPECT_TRUE(
        gb_.on_wan(nullptr, fwd_->stream, r.data(), static_cast<uint32_t>(r.size()), clock_.now()));
  };
  late(kPsn + 7);  // a burst seen from its middle
  late(kPsn + 8);
  late(kPsn + 6);  // the requester went back: its oldest
  late(kPsn + 7);
  EXPECT_TRUE(ib_.wan.empty());
  late(kPsn + 6);  // again: that is it
  ASSERT_EQ(ib_.wan.size(), 1U);
  const roce::RocePacket nak = parse(ib_.wan[0]);
  EXPECT_EQ(nak.bth.opcode, op::kRcAck);
  EXPECT_EQ(nak.aeth.syndrome, 0x63);
  EXPECT_EQ(nak.bth.psn, roce::psn_add(kPsn, 6));
  EXPECT_EQ(nak.bth.dest_qp, kReqQp);
  EXPECT_EQ(gb_.stats().restart_naks, 1U);
  EXPECT_TRUE(b_sends(aeth(0x71, kPsn + 2, 6)));  // host B's NAK for the poison
  EXPECT_EQ(gb_.stats().dead_dropped, 6U);
  EXPECT_EQ(gb_.stats().restart_failed, 1U);
  gb_.expire(clock_.now());  // the requester was told
  EXPECT_EQ(gb_.snapshot()["flows"].size(), 0U);
}

// Flows through another peer, and tracked (passthrough) flows, are untouched.
TEST_F(EngineTest, PeerRestartLeavesOtherPeersAndPassthroughFlows) {
  EXPECT_FALSE(a_sends(request(op::kRcSendOnly, kPsn, true)));  // tracked only
  ga_.on_peer_restart(nullptr, fwd_->peer, clock_.now());
  EXPECT_EQ(ga_.stats().restart_failed, 0U);
  EXPECT_TRUE(ia_.local.empty());
  ia_.wan.clear();
  pair();
  ga_.on_peer_restart(nullptr, fwd_->peer + 1, clock_.now());  // another peer
  EXPECT_EQ(ga_.stats().restart_failed, 0U);
  EXPECT_EQ(ga_.stats().peer_restarts, 2U);
  ASSERT_TRUE(a_sends(request(op::kRcWriteOnly, kPsn + 1, true)));
  EXPECT_EQ(parse(ia_.local.back()).aeth.syndrome, 0x1F);  // still split and ACKed
}

// The QP-failing requests are paced (16 per 2 ms): a restarted gateway holds
// only a few frames per host until ARP resolves it, and a burst of
// thousands would lose the one at the host's expected PSN.
TEST_F(EngineTest, PeerRestartPacesTheQpFailingRequests) {
  pair();
  for (uint32_t i = 1; i <= 40; ++i)
    ASSERT_TRUE(a_sends(request(op::kRcWriteOnly, kPsn + i, true)));
  ia_.wan.clear();
  ia_.local.clear();
  ga_.on_peer_restart(nullptr, fwd_->peer, clock_.now());
  EXPECT_EQ(ia_.wan.size(), 32U);                                      // 16 PSNs, two requests each
  EXPECT_EQ(parse(ia_.wan.front()).bth.psn, roce::psn_add(kPsn, 41));  // the next expected
  EXPECT_EQ(ga_.next_timeout(), clock_.now() + Duration::from_ms(2));
  clock_.advance(Duration::from_ms(1));
  ga_.poll(clock_.now());
  EXPECT_EQ(ia_.wan.size(), 32U);
  clock_.advance(Duration::from_ms(1));
  ga_.poll(clock_.now());
  EXPECT_EQ(ia_.wan.size(), 64U);
  clock_.advance(Duration::from_ms(2));
  ga_.poll(clock_.now());
  ASSERT_EQ(ia_.wan.size(), 82U);  // kPsn + 41 down to kPsn + 1
  EXPECT_EQ(parse(ia_.wan.back()).bth.psn, roce::psn_add(kPsn, 1));
  // The whole range again, twice, 200 ms apart (the first round may meet a
  // gateway that has not yet resolved the host's MAC).
  EXPECT_EQ(ga_.next_timeout(), clock_.now() + Duration::from_ms(200));
  for (int i = 0; i < 400; ++i) {
    clock_.advance(Duration::from_ms(2));
    ga_.poll(clock_.now());
  }
  ASSERT_EQ(ia_.wan.size(), 3 * 82U);
  EXPECT_EQ(parse(ia_.wan[82]).bth.psn, roce::psn_add(kPsn, 41));
  EXPECT_TRUE(ga_.next_timeout().is_infinite());
  EXPECT_EQ(ga_.stats().poison_sent, 3 * 82U);
  ga_.expire(clock_.now());  // released once all went and the requester was told
  EXPECT_EQ(ga_.snapshot()["flows"].size(), 0U);
}

// Gateway A answers in the requester's traffic class (DSCP, as an RNIC
// does; the ECN bits are not ECT), and its CNPs go in DSCP 48.
TEST_F(EngineTest, AcksKeepTheRequestersDscpAndCnpsGoInDscp48) {
  pair();
  Bytes req = request(op::kRcWriteOnly, kPsn + 1, true);
  req[1] = static_cast<uint8_t>((26 << 2) | 2);  // DSCP 26 (AF31), ECT(0)
  req[10] = req[11] = 0;
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += static_cast<uint32_t>(req[i] << 8 | req[i + 1]);
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  req[10] = static_cast<uint8_t>(~sum >> 8);
  req[11] = static_cast<uint8_t>(~sum);
  ia_.over = true;  // past its share: a CNP too
  ASSERT_TRUE(a_sends(req));
  ASSERT_EQ(ia_.local.size(), 2U);
  const roce::RocePacket ack = parse(ia_.local[0]);
  EXPECT_EQ(ack.bth.opcode, op::kRcAck);
  EXPECT_EQ(ack.tos, 26 << 2);
  const roce::RocePacket cnp = parse(ia_.local[1]);
  EXPECT_EQ(cnp.bth.opcode, op::kCnp);
  EXPECT_EQ(cnp.tos, 48 << 2);
}

// 802.1Q (vlan.h): gateway A answers a tagged requester in the tag of its
// own frames (the flow entry's), and sends its CNPs on that VLAN in the CNP
// class (by default mlx5's: DSCP 48, PCP 6; set_cnp_class() changes it).
// Gateway B re-originates the requests in their sender's tag (the record's),
// for its site's policy to map.
TEST_F(EngineTest, AnswersGoInTheQpsTagAndCnpsInTheCnpClass) {
  pair();
  fwd_->tag = VlanTag::make(3, 100);  // as the gateway keeps it from the host's frames
  ia_.local_tags.clear();
  ia_.over = true;  // past its share: a CNP with the ACK
  ASSERT_TRUE(a_sends(request(op::kRcWriteOnly, kPsn + 1, true)));
  ASSERT_EQ(ia_.local.size(), 2U);
  EXPECT_EQ(parse(ia_.local[0]).bth.opcode, op::kRcAck);
  EXPECT_EQ(ia_.local_tags[0], std::make_pair(VlanTag::make(3, 100), false));
  EXPECT_EQ(parse(ia_.local[1]).bth.opcode, op::kCnp);
  EXPECT_EQ(parse(ia_.local[1]).tos, 48 << 2);
  EXPECT_EQ(ia_.local_tags[1], std::make_pair(VlanTag::make(6, 100), false));
  ga_.set_cnp_class(46, 5);
  clock_.advance(Duration::from_ms(1));  // CNPs are paced
  ASSERT_TRUE(a_sends(request(op::kRcWriteOnly, kPsn + 2, true)));
  ASSERT_EQ(ia_.local.size(), 4U);
  EXPECT_EQ(parse(ia_.local[3]).bth.opcode, op::kCnp);
  EXPECT_EQ(parse(ia_.local[3]).tos, 46 << 2);
  EXPECT_EQ(ia_.local_tags[3], std::make_pair(VlanTag::make(5, 100), false));
  // An untagged requester gets untagged answers and CNPs.
  fwd_->tag = {};
  clock_.advance(Duration::from_ms(1));
  ASSERT_TRUE(a_sends(request(op::kRcWriteOnly, kPsn + 3, true)));
  ASSERT_EQ(ia_.local.size(), 6U);
  EXPECT_FALSE(ia_.local_tags[4].first.present);
  EXPECT_FALSE(ia_.local_tags[5].first.present);
  // At gateway B the records carry the requester's tag.
  ib_.local.clear();
  ib_.local_tags.clear();
  for (const Bytes& r : ia_.wan) {
    if (!gb_.on_wan(nullptr, fwd_->stream, r.data(), static_cast<uint32_t>(r.size()), clock_.now(),
                    VlanTag::make(3, 100))) {
      ib_.local.push_back(r);
      ib_.local_tags.emplace_back(VlanTag{}, true);
    }
  }
  ASSERT_EQ(ib_.local.size(), 3U);
  for (const auto& t : ib_.local_tags) {
    EXPECT_EQ(t, std::make_pair(VlanTag::make(3, 100), true));
  }
}

}  // namespace
}  // namespace rowan::gw
