// The split engine's test bench (engine_test.cc, engine_flows_test.cc): two
// engines as gateways A and B with fake I/O and a fake clock, and the helpers
// that play the hosts' RoCEv2 packets through them.
#pragma once

#include "split/split_engine.h"

#include <gtest/gtest.h>

#include <cstring>
#include <utility>
#include <vector>

#include "tools/fake_clock.h"
#include "tools/split_flows.h"

namespace rowan::gw::split_testing {

using Bytes = std::vector<uint8_t>;
namespace op = roce::op;

inline constexpr uint32_t kReqQp = 0x11;
inline constexpr uint32_t kRspQp = 0x22;
inline constexpr uint32_t kPsn = 0xFFFFFE;  // wraps right after pairing

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

inline roce::RocePacket parse(const Bytes& b) {
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

}  // namespace rowan::gw::split_testing
