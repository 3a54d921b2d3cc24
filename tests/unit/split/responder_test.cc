// The ingress responder: ordering, ACK coalescing and MSN, NAK episodes,
// duplicates, READ holds, CNPs, failure, PSN wrap.
#include "split/responder.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "tools/fake_clock.h"

namespace rowan::split {
namespace {

namespace op = roce::op;
using test::FakeClock;

constexpr uint8_t kAck = syndrome::kAckUnlimited;
const uint8_t kSeqNak = syndrome::nak(roce::NakCode::kPsnSequenceError);

Request req(uint8_t opcode, uint32_t psn, bool ack_req = false, uint32_t dma_len = 0) {
  return Request{opcode, psn & roce::kPsnMask, ack_req, dma_len};
}

class ResponderTest : public ::testing::Test {
 protected:
  Verdict send(const Request& r, bool room = true, bool over = false) {
    return rsp_.on_request(r, room, over, clock_.now(), reply_);
  }
  FakeClock clock_;
  ResponderConfig cfg_;
  Responder rsp_{cfg_};
  Reply reply_;
};

TEST_F(ResponderTest, AcksInOrderWithMsnOnAckReq) {
  rsp_.start(100, 0, true);
  EXPECT_EQ(send(req(op::kRcWriteFirst, 100)), Verdict::kCarry);
  EXPECT_FALSE(reply_.send);  // coalesced
  EXPECT_EQ(send(req(op::kRcWriteMiddle, 101)), Verdict::kCarry);
  EXPECT_FALSE(reply_.send);
  EXPECT_EQ(send(req(op::kRcWriteLast, 102, true)), Verdict::kCarry);
  ASSERT_TRUE(reply_.send);
  EXPECT_EQ(reply_.syndrome, kAck);
  EXPECT_EQ(reply_.psn, 102U);
  EXPECT_EQ(reply_.msn, 1U);  // one message completed
  EXPECT_EQ(send(req(op::kRcSendOnly, 103, true)), Verdict::kCarry);
  EXPECT_EQ(reply_.psn, 103U);
  EXPECT_EQ(reply_.msn, 2U);
  EXPECT_EQ(rsp_.stats().acks, 2U);
}

TEST_F(ResponderTest, CoalescedAckAfterDelayAndEveryN) {
  rsp_.start(0, 5, true);
  for (uint32_t i = 0; i < cfg_.ack_every - 1; ++i) {
    send(req(op::kRcSendMiddle, i));
    EXPECT_FALSE(reply_.send) << i;
  }
  send(req(op::kRcSendMiddle, cfg_.ack_every - 1));
  ASSERT_TRUE(reply_.send);  // the N-th packet forces an ACK
  EXPECT_EQ(reply_.psn, cfg_.ack_every - 1);
  EXPECT_EQ(reply_.msn, 5U);  // no message ended
  send(req(op::kRcSendLast, cfg_.ack_every));
  EXPECT_FALSE(reply_.send);
  EXPECT_EQ(rsp_.next_timeout(), clock_.now() + cfg_.ack_delay);
  clock_.advance(cfg_.ack_delay - Duration::from_ns(1));
  rsp_.poll(clock_.now(), reply_);
  EXPECT_FALSE(reply_.send);
  clock_.advance(Duration::from_ns(1));
  rsp_.poll(clock_.now(), reply_);
  ASSERT_TRUE(reply_.send);
  EXPECT_EQ(reply_.psn, cfg_.ack_every);
  EXPECT_EQ(reply_.msn, 6U);
  EXPECT_TRUE(rsp_.next_timeout().is_infinite());
}

TEST_F(ResponderTest, ASlowRxeRequesterGetsAFewAcksPerMessageAndNeverStalls) {
  // rxe's requester: 64-packet messages (64 KiB at MTU 1024), AckReq on each
  // last packet, at most 128 PSNs unacknowledged; a soft-RoCE guest sends a
  // packet every ~300 us. Every ACK is a packet the guest must receive.
  rsp_.start(0, 0, true);
  uint32_t acked_through = 0;
  uint32_t max_unacked = 0;
  for (uint32_t psn = 0; psn < 640; ++psn) {
    const uint32_t i = psn % 64;
    const uint8_t opcode = i == 0    ? op::kRcSendFirst
                           : i == 63 ? op::kRcSendLast
                                     : op::kRcSendMiddle;
    clock_.advance(Duration::from_us(300));
    rsp_.poll(clock_.now(), reply_);
    if (reply_.send) acked_through = reply_.psn + 1;
    send(req(opcode, psn, i == 63));
    if (reply_.send) acked_through = reply_.psn + 1;
    max_unacked = std::max(max_unacked, psn + 1 - acked_through);
  }
  EXPECT_EQ(acked_through, 640U);         // each message's end is acknowledged at once
  EXPECT_LE(rsp_.stats().acks, 3U * 10);  // was 160 with a 20 us timer from the first packet
  EXPECT_LE(max_unacked, 64U);            // far inside rxe's 128-PSN window
}

TEST_F(ResponderTest, OutOfSequenceNaksOncePerEpisode) {
  rsp_.start(10, 0, true);
  send(req(op::kRcWriteOnly, 10, true));
  EXPECT_EQ(send(req(op::kRcWriteOnly, 12, true)), Verdict::kDrop);  // 11 lost
  ASSERT_TRUE(reply_.send);
  EXPECT_EQ(reply_.syndrome, kSeqNak);
  EXPECT_EQ(reply_.psn, 11U);
  EXPECT_EQ(reply_.msn, 1U);
  // The rest of the go-back-N window: dropped silently.
  EXPECT_EQ(send(req(op::kRcWriteOnly, 13, true)), Verdict::kDrop);
  EXPECT_FALSE(reply_.send);
  // ... unless the requester does not come back in time.
  clock_.advance(cfg_.nak_retry);
  send(req(op::kRcWriteOnly, 14, true));
  EXPECT_TRUE(reply_.send);
  EXPECT_EQ(reply_.psn, 11U);
  // The requester goes back: accepted in order, a new episode can NAK again.
  EXPECT_EQ(send(req(op::kRcWriteOnly, 11, true)), Verdict::kCarry);
  EXPECT_EQ(reply_.syndrome, kAck);
  EXPECT_EQ(reply_.psn, 11U);
  EXPECT_EQ(reply_.msn, 2U);
  EXPECT_EQ(send(req(op::kRcWriteOnly, 13)), Verdict::kDrop);
  EXPECT_TRUE(reply_.send);
  EXPECT_EQ(reply_.syndrome, kSeqNak);
  EXPECT_EQ(rsp_.stats().naks, 3U);
}

TEST_F(ResponderTest, DuplicateIsAckedAgainNotCarried) {
  rsp_.start(50, 7, true);
  send(req(op::kRcSendOnly, 50, true));
  send(req(op::kRcSendOnly, 51, true));
  EXPECT_EQ(send(req(op::kRcSendOnly, 50, true)), Verdict::kDrop);
  ASSERT_TRUE(reply_.send);
  EXPECT_EQ(reply_.syndrome, kAck);
  EXPECT_EQ(reply_.psn, 51U);
  EXPECT_EQ(reply_.msn, 9U);
  EXPECT_EQ(rsp_.stats().duplicates, 1U);
  EXPECT_EQ(rsp_.stats().accepted, 2U);
}

TEST_F(ResponderTest, NoRoomDropsWithNakAndCnp) {
  rsp_.start(0, 0, true);
  EXPECT_EQ(send(req(op::kRcWriteOnly, 0), false), Verdict::kDrop);
  EXPECT_TRUE(reply_.send);
  EXPECT_EQ(reply_.syndrome, kSeqNak);
  EXPECT_EQ(reply_.psn, 0U);
  EXPECT_TRUE(reply_.cnp);
  EXPECT_EQ(rsp_.stats().no_room, 1U);
  EXPECT_EQ(rsp_.expected_psn(), 0U);
}

TEST_F(ResponderTest, CnpWhenOverShareRateLimited) {
  rsp_.start(0, 0, true);
  send(req(op::kRcWriteMiddle, 0), true, true);
  EXPECT_TRUE(reply_.cnp);
  send(req(op::kRcWriteMiddle, 1), true, true);
  EXPECT_FALSE(reply_.cnp);  // within the interval
  send(req(op::kRcWriteMiddle, 2), true, false);
  EXPECT_FALSE(reply_.cnp);
  clock_.advance(cfg_.cnp_interval);
  send(req(op::kRcWriteMiddle, 3), true, true);
  EXPECT_TRUE(reply_.cnp);
  EXPECT_EQ(rsp_.stats().cnps, 2U);
}

TEST_F(ResponderTest, ReadHoldsAcksUntilItsResponsePasses) {
  cfg_.pmtu = 1024;
  rsp_ = Responder(cfg_);
  rsp_.start(200, 0, true);
  send(req(op::kRcWriteOnly, 200));  // not acked yet (no AckReq)
  EXPECT_FALSE(reply_.send);
  // READ of 3000 bytes: 3 response PSNs (201..203). The write before it is
  // acknowledged first.
  EXPECT_EQ(send(req(op::kRcReadRequest, 201, true, 3000)), Verdict::kCarry);
  ASSERT_TRUE(reply_.send);
  EXPECT_EQ(reply_.psn, 200U);
  EXPECT_EQ(reply_.msn, 1U);
  EXPECT_EQ(rsp_.expected_psn(), 204U);
  // A write after the READ is accepted but not acknowledged past the READ.
  EXPECT_EQ(send(req(op::kRcWriteOnly, 204, true)), Verdict::kCarry);
  EXPECT_FALSE(reply_.send);
  clock_.advance(Duration::from_ms(1));
  rsp_.poll(clock_.now(), reply_);
  EXPECT_FALSE(reply_.send);
  // A duplicate meanwhile gets the ACK that stops before the READ.
  send(req(op::kRcWriteOnly, 200, true));
  ASSERT_TRUE(reply_.send);
  EXPECT_EQ(reply_.psn, 200U);
  // A duplicate READ goes to the remote host again.
  EXPECT_EQ(send(req(op::kRcReadRequest, 201, true, 3000)), Verdict::kCarry);
  // Out of sequence while the READ is outstanding: no NAK yet (it would ack the
  // READ before its response reached the requester).
  send(req(op::kRcWriteOnly, 206, true));
  EXPECT_FALSE(reply_.send);
  rsp_.on_response(op::kRcReadResponseFirst, 201, clock_.now(), reply_);
  EXPECT_FALSE(reply_.send);
  // After the last response: the NAK for the gap, which acknowledges 204 too.
  rsp_.on_response(op::kRcReadResponseLast, 203, clock_.now(), reply_);
  ASSERT_TRUE(reply_.send);
  EXPECT_EQ(reply_.syndrome, kSeqNak);
  EXPECT_EQ(reply_.psn, 205U);
  EXPECT_EQ(reply_.msn, 3U);  // write, READ, write
  EXPECT_EQ(rsp_.outstanding_reads(), 0U);
  // The requester goes back: 205 is accepted and acknowledged.
  EXPECT_EQ(send(req(op::kRcWriteOnly, 205, true)), Verdict::kCarry);
  ASSERT_TRUE(reply_.send);
  EXPECT_EQ(reply_.syndrome, kAck);
  EXPECT_EQ(reply_.psn, 205U);
  EXPECT_EQ(reply_.msn, 4U);
}

// An out-of-sequence PSN behind an outstanding READ (the READ and its
// responses travel end to end): answered once the READ's last response has
// passed, with the NAK the remote responder would have sent after it.
TEST_F(ResponderTest, OutOfSequenceBehindReadIsNakedAfterTheResponse) {
  rsp_.start(0xFFFFFE, 7, true);
  // READ at 0xFFFFFE of 2048 bytes (pmtu 1024): responses 0xFFFFFE, 0xFFFFFF.
  EXPECT_EQ(send(req(op::kRcReadRequest, 0xFFFFFE, true, 2048)), Verdict::kCarry);
  EXPECT_FALSE(reply_.send);
  EXPECT_EQ(rsp_.expected_psn(), 0U);
  // PSN 0 was lost on the local path; 1 and 2 arrive.
  EXPECT_EQ(send(req(op::kRcWriteOnly, 1, true)), Verdict::kDrop);
  EXPECT_FALSE(reply_.send);
  EXPECT_EQ(send(req(op::kRcWriteOnly, 2, true)), Verdict::kDrop);
  EXPECT_FALSE(reply_.send);
  EXPECT_EQ(rsp_.stats().out_of_sequence, 2U);
  rsp_.on_response(op::kRcReadResponseFirst, 0xFFFFFE, clock_.now(), reply_);
  EXPECT_FALSE(reply_.send);
  rsp_.on_response(op::kRcReadResponseLast, 0xFFFFFF, clock_.now(), reply_);
  ASSERT_TRUE(reply_.send);
  EXPECT_EQ(reply_.syndrome, kSeqNak);
  EXPECT_EQ(reply_.psn, 0U);
  EXPECT_EQ(reply_.msn, 8U);  // the READ completed
  EXPECT_EQ(rsp_.stats().naks, 1U);
  // One NAK per episode: another stray packet right after is dropped silently.
  EXPECT_EQ(send(req(op::kRcWriteOnly, 2, true)), Verdict::kDrop);
  EXPECT_FALSE(reply_.send);
  EXPECT_EQ(send(req(op::kRcWriteOnly, 0)), Verdict::kCarry);
  EXPECT_EQ(rsp_.expected_psn(), 1U);
}

// Two READs outstanding: the NAK waits for the second one's response; a
// requester that comes back in sequence by itself gets no NAK at all.
TEST_F(ResponderTest, DeferredNakWaitsForEveryReadAndIsDroppedWhenTheGapCloses) {
  rsp_.start(10, 0, true);
  send(req(op::kRcReadRequest, 10, true, 64));
  send(req(op::kRcFetchAdd, 11, true));
  EXPECT_EQ(rsp_.outstanding_reads(), 2U);
  EXPECT_EQ(send(req(op::kRcSendOnly, 13, true)), Verdict::kDrop);  // 12 missing
  rsp_.on_response(op::kRcReadResponseOnly, 10, clock_.now(), reply_);
  EXPECT_FALSE(reply_.send);  // the atomic is still outstanding
  rsp_.on_response(op::kRcAtomicAck, 11, clock_.now(), reply_);
  ASSERT_TRUE(reply_.send);
  EXPECT_EQ(reply_.syndrome, kSeqNak);
  EXPECT_EQ(reply_.psn, 12U);
  EXPECT_EQ(reply_.msn, 2U);
  // Again, but the requester's own retransmission closes the gap first.
  send(req(op::kRcSendOnly, 12, true));
  EXPECT_EQ(reply_.syndrome, kAck);
  send(req(op::kRcReadRequest, 13, true, 64));
  EXPECT_EQ(send(req(op::kRcSendOnly, 15, true)), Verdict::kDrop);  // 14 missing
  EXPECT_EQ(send(req(op::kRcSendOnly, 14)), Verdict::kCarry);       // it comes back
  rsp_.on_response(op::kRcReadResponseOnly, 13, clock_.now(), reply_);
  ASSERT_TRUE(reply_.send);
  EXPECT_EQ(reply_.syndrome, kAck);
  EXPECT_EQ(reply_.psn, 14U);
  EXPECT_EQ(reply_.msn, 5U);
  EXPECT_EQ(rsp_.stats().naks, 1U);
}

TEST_F(ResponderTest, AtomicIsForwardedAndReleasedByAtomicAck) {
  rsp_.start(0, 0, true);
  EXPECT_EQ(send(req(op::kRcFetchAdd, 0, true)), Verdict::kCarry);
  EXPECT_EQ(rsp_.expected_psn(), 1U);
  send(req(op::kRcSendOnly, 1, true));
  EXPECT_FALSE(reply_.send);
  rsp_.on_response(op::kRcAtomicAck, 0, clock_.now(), reply_);
  ASSERT_TRUE(reply_.send);
  EXPECT_EQ(reply_.psn, 1U);
  EXPECT_EQ(reply_.msn, 2U);
}

TEST_F(ResponderTest, FatalNakFailsNextRequest) {
  rsp_.start(0, 0, true);
  send(req(op::kRcWriteOnly, 0, true));
  const uint8_t access = syndrome::nak(roce::NakCode::kRemoteAccessError);
  rsp_.fail(access);
  EXPECT_EQ(send(req(op::kRcWriteOnly, 1, true)), Verdict::kDrop);
  ASSERT_TRUE(reply_.send);
  EXPECT_EQ(reply_.syndrome, access);
  EXPECT_EQ(reply_.psn, 1U);
  EXPECT_EQ(send(req(op::kRcWriteOnly, 1, true)), Verdict::kDrop);
  EXPECT_EQ(reply_.syndrome, access);
  EXPECT_EQ(rsp_.stats().failed_requests, 2U);
}

// A fatal NAK for a READ the requester still waits on is for the requester
// now (it would otherwise see it only when its ACK timer makes it send
// again); one for data already acknowledged here is kept for the next request.
TEST_F(ResponderTest, FatalNakOnAnOutstandingReadIsRelayedAtOnce) {
  const uint8_t access = syndrome::nak(roce::NakCode::kRemoteAccessError);
  rsp_.start(0xFFFFFE, 0, true);
  send(req(op::kRcWriteOnly, 0xFFFFFE, true));  // acknowledged here
  ASSERT_TRUE(reply_.send);
  EXPECT_EQ(send(req(op::kRcReadRequest, 0xFFFFFF, false, 4096)), Verdict::kCarry);  // 4 PSNs
  send(req(op::kRcWriteOnly, 3, true));  // behind the READ: not acknowledged
  EXPECT_FALSE(reply_.send);
  EXPECT_FALSE(rsp_.fail_at(access, 0xFFFFFE));  // stale: already acknowledged
  EXPECT_TRUE(rsp_.failed());
  rsp_.start(0xFFFFFE, 0, true);
  send(req(op::kRcWriteOnly, 0xFFFFFE, true));
  send(req(op::kRcReadRequest, 0xFFFFFF, false, 4096));
  EXPECT_TRUE(rsp_.fail_at(access, 0xFFFFFF));  // the READ, across the PSN wrap
  EXPECT_EQ(rsp_.stats().fatal_relayed, 1U);
  EXPECT_FALSE(rsp_.fail_at(access, 0xFFFFFF));                     // once
  EXPECT_EQ(send(req(op::kRcWriteOnly, 3, true)), Verdict::kDrop);  // and every later request
  EXPECT_EQ(reply_.syndrome, access);
  rsp_.start(10, 0, true);
  EXPECT_FALSE(rsp_.fail_at(access, 10));  // never sent: not the requester's
}

TEST_F(ResponderTest, PsnWrapsAt2To24) {
  rsp_.start(0xFFFFFE, 0xFFFFFF, true);
  send(req(op::kRcSendOnly, 0xFFFFFE));
  send(req(op::kRcSendOnly, 0xFFFFFF));
  EXPECT_EQ(send(req(op::kRcSendOnly, 0x000000, true)), Verdict::kCarry);
  ASSERT_TRUE(reply_.send);
  EXPECT_EQ(reply_.psn, 0U);
  EXPECT_EQ(reply_.msn, 2U);                                              // MSN wraps at 2^24 too
  EXPECT_EQ(send(req(op::kRcSendOnly, 0xFFFFFF, true)), Verdict::kDrop);  // duplicate
  EXPECT_EQ(reply_.syndrome, kAck);
  EXPECT_EQ(reply_.psn, 0U);
  EXPECT_EQ(send(req(op::kRcSendOnly, 5, true)), Verdict::kDrop);  // ahead
  EXPECT_EQ(reply_.syndrome, kSeqNak);
  EXPECT_EQ(reply_.psn, 1U);
}

TEST_F(ResponderTest, UnconfirmedBaseHoldsAcksAndCarriesOldRetransmissions) {
  rsp_.start(1000, 40, false);
  send(req(op::kRcSendOnly, 1000, true));
  EXPECT_FALSE(reply_.send);  // 990..999 may still be in flight end to end
  EXPECT_EQ(send(req(op::kRcSendOnly, 1003, true)), Verdict::kDrop);
  EXPECT_FALSE(reply_.send);                                          // no NAK either
  EXPECT_EQ(send(req(op::kRcSendOnly, 995, true)), Verdict::kCarry);  // passthrough retransmission
  rsp_.on_relayed_ack(998);
  EXPECT_FALSE(rsp_.base_confirmed());
  rsp_.on_relayed_ack(999);
  EXPECT_TRUE(rsp_.base_confirmed());
  // 1003 came out of sequence meanwhile: the NAK it was owed goes now (and
  // acknowledges 1000), instead of the requester waiting for its timer.
  EXPECT_EQ(rsp_.next_timeout(), TimePoint::zero());
  rsp_.poll(clock_.now(), reply_);
  ASSERT_TRUE(reply_.send);
  EXPECT_EQ(reply_.syndrome, kSeqNak);
  EXPECT_EQ(reply_.psn, 1001U);
  EXPECT_EQ(reply_.msn, 41U);
  rsp_.poll(clock_.now(), reply_);
  EXPECT_FALSE(reply_.send);                                           // once
  EXPECT_EQ(send(req(op::kRcSendOnly, 1001, true)), Verdict::kCarry);  // it went back
  ASSERT_TRUE(reply_.send);
  EXPECT_EQ(reply_.syndrome, kAck);
  EXPECT_EQ(reply_.psn, 1001U);
}

// No room for an in-sequence packet before the base is confirmed: no NAK may
// go yet, and the requester, its window full, sends nothing more. The NAK
// goes when the base is confirmed; without it the requester would wait for
// its ACK timeout (67 ms at rxe's default, seen on the testbed).
TEST_F(ResponderTest, DropBeforeTheBaseIsConfirmedIsNakedOnConfirmation) {
  rsp_.start(1000, 40, false);
  EXPECT_EQ(send(req(op::kRcWriteFirst, 1000)), Verdict::kCarry);
  EXPECT_EQ(send(req(op::kRcWriteMiddle, 1001), /*room=*/false), Verdict::kDrop);
  EXPECT_FALSE(reply_.send);
  EXPECT_EQ(send(req(op::kRcWriteMiddle, 1002)), Verdict::kDrop);  // behind the gap
  EXPECT_FALSE(reply_.send);
  EXPECT_EQ(rsp_.next_timeout(), TimePoint::infinite());  // nothing may go yet
  clock_.advance(Duration::from_ms(20));
  rsp_.on_relayed_ack(999);
  rsp_.poll(clock_.now(), reply_);
  ASSERT_TRUE(reply_.send);
  EXPECT_EQ(reply_.syndrome, kSeqNak);
  EXPECT_EQ(reply_.psn, 1001U);
  EXPECT_EQ(reply_.msn, 40U);
  // The requester comes back: accepted and acknowledged as usual.
  EXPECT_EQ(send(req(op::kRcWriteMiddle, 1001)), Verdict::kCarry);
  EXPECT_EQ(send(req(op::kRcWriteLast, 1002, true)), Verdict::kCarry);
  ASSERT_TRUE(reply_.send);
  EXPECT_EQ(reply_.syndrome, kAck);
  EXPECT_EQ(reply_.psn, 1002U);
  EXPECT_EQ(reply_.msn, 41U);
}

// A drop while unconfirmed that the requester repairs by itself (its timer
// went first) owes nothing any more.
TEST_F(ResponderTest, OwedNakIsDroppedWhenTheRequesterComesBack) {
  rsp_.start(1000, 40, false);
  EXPECT_EQ(send(req(op::kRcSendOnly, 1001, true)), Verdict::kDrop);
  EXPECT_EQ(send(req(op::kRcSendOnly, 1000, true)), Verdict::kCarry);
  EXPECT_EQ(send(req(op::kRcSendOnly, 1001, true)), Verdict::kCarry);
  rsp_.on_relayed_ack(999);
  rsp_.poll(clock_.now(), reply_);
  ASSERT_TRUE(reply_.send);
  EXPECT_EQ(reply_.syndrome, kAck);
  EXPECT_EQ(reply_.psn, 1001U);
  EXPECT_EQ(reply_.msn, 42U);
}

TEST_F(ResponderTest, HoldsAcksWhileTheGatewayIsShortOfRoom) {
  // Back-pressure without drops: while the gateway could not take another
  // window, an ACK (which would open the requester's window) is held; the
  // requester waits on its window instead of sending into drops.
  rsp_.start(0, 0, true);
  rsp_.set_short_of_room(true);
  EXPECT_EQ(send(req(op::kRcWriteFirst, 0)), Verdict::kCarry);
  EXPECT_EQ(send(req(op::kRcWriteLast, 1, true)), Verdict::kCarry);  // AckReq: held
  EXPECT_FALSE(reply_.send);
  EXPECT_TRUE(rsp_.holding());
  EXPECT_EQ(rsp_.stats().acks_held, 1U);
  // No busy loop while held: the room is looked at again after hold_recheck.
  EXPECT_EQ(rsp_.next_timeout(), clock_.now() + cfg_.hold_recheck);
  clock_.advance(cfg_.hold_recheck);
  rsp_.poll(clock_.now(), reply_);
  EXPECT_FALSE(reply_.send);
  EXPECT_GT(rsp_.next_timeout(), clock_.now());
  // A duplicate meanwhile gets the last ACK again, not a new one.
  EXPECT_EQ(send(req(op::kRcWriteLast, 1, true)), Verdict::kDrop);
  ASSERT_TRUE(reply_.send);
  EXPECT_EQ(reply_.psn, roce::kPsnMask);  // the ACK before the start
  EXPECT_EQ(reply_.msn, 0U);
  // Room again: the held ACK goes at the next look, with the right MSN.
  rsp_.set_short_of_room(false);
  clock_.advance(cfg_.hold_recheck);
  rsp_.poll(clock_.now(), reply_);
  ASSERT_TRUE(reply_.send);
  EXPECT_EQ(reply_.syndrome, kAck);
  EXPECT_EQ(reply_.psn, 1U);
  EXPECT_EQ(reply_.msn, 1U);
  EXPECT_FALSE(rsp_.holding());
  EXPECT_EQ(rsp_.stats().holds_expired, 0U);
  EXPECT_TRUE(rsp_.next_timeout().is_infinite());
}

TEST_F(ResponderTest, AHeldAckGoesAfterHoldMaxEvenWithoutRoom) {
  // Never near the requester's ACK timeout (67 ms at rxe's default).
  rsp_.start(500, 3, true);
  rsp_.set_short_of_room(true);
  send(req(op::kRcSendOnly, 500, true));
  EXPECT_FALSE(reply_.send);
  const TimePoint held = clock_.now();
  while (clock_.now() - held < cfg_.hold_max) {
    ASSERT_FALSE(reply_.send) << (clock_.now() - held).ns();
    clock_.advance(std::max(rsp_.next_timeout() - clock_.now(), Duration::from_ns(1)));
    rsp_.poll(clock_.now(), reply_);
  }
  ASSERT_TRUE(reply_.send);
  EXPECT_EQ(reply_.psn, 500U);
  EXPECT_EQ(reply_.msn, 4U);
  EXPECT_EQ(rsp_.stats().holds_expired, 1U);
  EXPECT_LE(clock_.now() - held, cfg_.hold_max + cfg_.hold_recheck);
}

TEST_F(ResponderTest, WindowEstimateIsTheWidestSpanPastTheLastAck) {
  rsp_.start(0xFFFFF0, 0, true);                      // across the PSN wrap
  EXPECT_EQ(rsp_.window_estimate(), cfg_.ack_every);  // nothing seen yet
  for (uint32_t i = 0; i < 100; ++i) send(req(op::kRcSendMiddle, 0xFFFFF0 + i));
  // ACKs every ack_every packets: the span never passed it.
  EXPECT_EQ(rsp_.window_estimate(), cfg_.ack_every);
  rsp_.set_short_of_room(true);  // held: the requester runs ahead
  for (uint32_t i = 100; i < 228; ++i) send(req(op::kRcSendMiddle, 0xFFFFF0 + i));
  // Past the last ACK before the hold (at the 64th packet).
  EXPECT_EQ(rsp_.window_estimate(), 228U - 100U / cfg_.ack_every * cfg_.ack_every);
}

TEST_F(ResponderTest, ZeroHoldMaxNeverHolds) {
  cfg_.hold_max = Duration::zero();
  Responder rsp(cfg_);
  rsp.start(0, 0, true);
  rsp.set_short_of_room(true);
  rsp.on_request(req(op::kRcSendOnly, 0, true), true, false, clock_.now(), reply_);
  ASSERT_TRUE(reply_.send);
  EXPECT_EQ(reply_.psn, 0U);
  EXPECT_EQ(rsp.stats().acks_held, 0U);
}

// A failed flow's NAK never passes a PSN the requester has not had
// acknowledged: a NAK acknowledges everything before it, and the requester
// would complete those work requests as successful.
TEST_F(ResponderTest, FailedNakNeverPassesTheFirstUnacknowledgedPsn) {
  rsp_.start(0, 0, true);
  send(req(op::kRcWriteOnly, 0, true));  // acknowledged: PSN 0
  const uint8_t op_err = syndrome::nak(roce::NakCode::kRemoteOperationalError);
  rsp_.fail(op_err);
  EXPECT_EQ(send(req(op::kRcWriteOnly, 5, true)), Verdict::kDrop);  // 1..4 never arrived
  ASSERT_TRUE(reply_.send);
  EXPECT_EQ(reply_.syndrome, op_err);
  EXPECT_EQ(reply_.psn, 1U);
  // With the base unconfirmed (passthrough packets before it unacknowledged
  // end to end), only a request at or before the base is NAKed.
  Responder r2(cfg_);
  r2.start(100, 0, false);
  r2.fail(op_err);
  Reply rep;
  Request q;
  q.opcode = op::kRcWriteOnly;
  q.psn = 103;
  EXPECT_EQ(r2.on_request(q, true, false, clock_.now(), rep), Verdict::kDrop);
  EXPECT_FALSE(rep.send);
  q.psn = 98;  // the requester went back to its oldest unacknowledged PSN
  EXPECT_EQ(r2.on_request(q, true, false, clock_.now(), rep), Verdict::kDrop);
  ASSERT_TRUE(rep.send);
  EXPECT_EQ(rep.psn, 98U);
}

// fail_now (a peer gateway restarted): a NAK at once at the oldest PSN not
// yet acknowledged locally, or none when everything was acknowledged.
TEST_F(ResponderTest, FailNowNaksTheOldestUnacknowledgedPsn) {
  const uint8_t op_err = syndrome::nak(roce::NakCode::kRemoteOperationalError);
  rsp_.start(0xFFFFFE, 3, true);
  send(req(op::kRcWriteOnly, 0xFFFFFE, true));  // ACKed at once
  ASSERT_TRUE(reply_.send);
  send(req(op::kRcWriteFirst, 0xFFFFFF, false));  // accepted, ACK deferred
  send(req(op::kRcWriteLast, 0, false));
  EXPECT_FALSE(reply_.send);
  Reply r;
  rsp_.fail_now(op_err, r);
  ASSERT_TRUE(r.send);
  EXPECT_EQ(r.syndrome, op_err);
  EXPECT_EQ(r.psn, 0xFFFFFFU);  // across the wrap
  EXPECT_EQ(r.msn, 4U);         // the MSN of the last ACK
  EXPECT_TRUE(rsp_.failed());
  EXPECT_EQ(rsp_.stats().fatal_relayed, 1U);
  rsp_.fail_now(op_err, r);  // once
  EXPECT_FALSE(r.send);

  Responder idle(cfg_);
  idle.start(10, 0, true);
  Request q;
  q.opcode = op::kRcSendOnly;
  q.psn = 10;
  q.ack_req = true;
  Reply rep;
  idle.on_request(q, true, false, clock_.now(), rep);
  ASSERT_TRUE(rep.send);
  idle.fail_now(op_err, r);
  EXPECT_FALSE(r.send);  // nothing waits: the next request learns it
  q.psn = 11;
  idle.on_request(q, true, false, clock_.now(), rep);
  ASSERT_TRUE(rep.send);
  EXPECT_EQ(rep.syndrome, op_err);
  EXPECT_EQ(rep.psn, 11U);
}

// IBA 1.5: an ATOMIC WRITE is answered with an ACK, so the gateway takes it
// like a WRITE; a FLUSH is answered with a READ response only: it travels
// end to end like a one-PSN READ (whatever its length), and no ACK passes it.
TEST_F(ResponderTest, AtomicWriteIsAckedAndFlushTravelsEndToEnd) {
  rsp_.start(0, 0, true);
  EXPECT_EQ(send(req(op::kRcAtomicWrite, 0, true, 8)), Verdict::kCarry);
  ASSERT_TRUE(reply_.send);
  EXPECT_EQ(reply_.psn, 0U);
  EXPECT_EQ(reply_.msn, 1U);
  EXPECT_EQ(send(req(op::kRcFlush, 1, false, 1 << 20)), Verdict::kCarry);
  EXPECT_FALSE(reply_.send);
  EXPECT_EQ(rsp_.outstanding_reads(), 1U);
  EXPECT_EQ(rsp_.expected_psn(), 2U);  // one PSN, not 1 MiB / PMTU
  EXPECT_EQ(send(req(op::kRcWriteOnly, 2, true)), Verdict::kCarry);
  EXPECT_FALSE(reply_.send);  // held behind the FLUSH
  rsp_.on_response(op::kRcReadResponseOnly, 1, clock_.now(), reply_);
  ASSERT_TRUE(reply_.send);
  EXPECT_EQ(reply_.psn, 2U);
  EXPECT_EQ(reply_.msn, 3U);
}

}  // namespace
}  // namespace rowan::split
