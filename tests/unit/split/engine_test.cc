// The split engine of rowand (daemon/rowand/split/split_engine.*) between two fake
// gateways: pairing by PSN match, the control record, local ACKs with the
// remote host's MSN, re-origination, ACK consumption, go-back on a NAK,
// the retransmission timer, and a fatal NAK reaching the requester.
#include "engine_test_fixture.h"

namespace rowan::gw {
namespace {

using namespace split_testing;  // NOLINT(google-build-using-namespace)

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

}  // namespace
}  // namespace rowan::gw
