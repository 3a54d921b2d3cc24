// The split engine's flows over their life: a QP error and idle flows
// released, MTU translation through RDMA CM, a peer's restart failing its
// flows both ways and pacing the failed requests, and the classes (DSCP,
// VLAN PCP) the engine's own packets go in.
#include "engine_test_fixture.h"

namespace rowan::gw {
namespace {

using namespace split_testing;  // NOLINT(google-build-using-namespace)

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
