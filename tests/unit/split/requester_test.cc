// The egress requester: window, cumulative ACKs, go-back-N on NAK and on its
// timer, RNR waits, fatal NAKs, READ responses, PSN wrap.
#include "split/requester.h"

#include <gtest/gtest.h>

#include <vector>

#include "tools/fake_clock.h"

namespace rowan::split {
namespace {

namespace op = roce::op;
using test::FakeClock;

class RequesterTest : public ::testing::Test {
 protected:
  RequesterTest() {
    cfg_.slots = 8, cfg_.slot_bytes = 64;
    cfg_.go_back_after = Duration::zero();  // after kProbes probes (GoesBackNOnlyAfter... sets it)
  }
  void make(uint32_t start) {
    req_ = std::make_unique<Requester>(cfg_);
    req_->start(start);
  }
  PushResult push(uint32_t psn, uint8_t opcode = op::kRcWriteMiddle, uint32_t dma_len = 0) {
    std::vector<uint8_t> pkt(16, static_cast<uint8_t>(psn));
    return req_->push(pkt, opcode, psn & roce::kPsnMask, dma_len, clock_.now());
  }
  /// PSN tags (first byte) of everything transmittable now.
  std::vector<uint32_t> drain() {
    std::vector<uint32_t> out;
    std::span<const uint8_t> p;
    while (req_->next_transmit(clock_.now(), &p)) out.push_back(p[0]);
    return out;
  }
  FakeClock clock_;
  RequesterConfig cfg_;
  std::unique_ptr<Requester> req_;
};

using V = std::vector<uint32_t>;

TEST_F(RequesterTest, TransmitsInOrderAndAcksFreeCumulatively) {
  make(10);
  for (uint32_t p = 10; p < 14; ++p) EXPECT_EQ(push(p), PushResult::kStored);
  EXPECT_EQ(drain(), (V{10, 11, 12, 13}));
  EXPECT_EQ(req_->in_window(), 4U);
  EXPECT_EQ(req_->on_aeth(11, syndrome::kAckUnlimited, clock_.now()), Event::kNone);
  EXPECT_EQ(req_->in_window(), 2U);
  EXPECT_EQ(req_->bytes_held(), 32U);
  req_->on_aeth(13, syndrome::kAckUnlimited, clock_.now());
  EXPECT_EQ(req_->in_window(), 0U);
  EXPECT_EQ(req_->stats().acked, 4U);
  EXPECT_TRUE(req_->next_timeout().is_infinite());
}

TEST_F(RequesterTest, WindowFullAndDuplicates) {
  make(0);
  for (uint32_t p = 0; p < cfg_.slots; ++p) EXPECT_EQ(push(p), PushResult::kStored);
  EXPECT_TRUE(req_->full());
  EXPECT_EQ(push(cfg_.slots), PushResult::kFull);
  EXPECT_EQ(push(3), PushResult::kDuplicate);
  std::vector<uint8_t> big(cfg_.slot_bytes + 1);
  drain();
  req_->on_aeth(0, syndrome::kAckUnlimited, clock_.now());
  EXPECT_EQ(req_->push(big, op::kRcWriteMiddle, cfg_.slots, 0, clock_.now()),
            PushResult::kTooLarge);
  EXPECT_EQ(push(cfg_.slots), PushResult::kStored);
}

TEST_F(RequesterTest, NakSequenceErrorGoesBackToThatPsn) {
  make(100);
  for (uint32_t p = 100; p < 106; ++p) push(p);
  drain();
  EXPECT_EQ(req_->on_aeth(103, syndrome::nak(roce::NakCode::kPsnSequenceError), clock_.now()),
            Event::kNone);
  EXPECT_EQ(req_->in_window(), 3U);  // 100..102 implicitly acknowledged
  EXPECT_EQ(drain(), (V{103, 104, 105}));
  EXPECT_EQ(req_->stats().retransmitted, 3U);
  // A stale NAK (for a PSN already freed) changes nothing.
  req_->on_aeth(101, syndrome::nak(roce::NakCode::kPsnSequenceError), clock_.now());
  EXPECT_EQ(drain(), V{});
}

TEST_F(RequesterTest, TimerRetransmitsFromOldestWithBackoffThenGivesUp) {
  cfg_.max_retries = 3;
  make(0);
  push(0);
  push(1);
  drain();
  EXPECT_EQ(req_->next_timeout(), clock_.now() + cfg_.rto);
  clock_.advance(cfg_.rto - Duration::from_ns(1));
  EXPECT_EQ(req_->poll(clock_.now()), Event::kNone);
  EXPECT_EQ(drain(), V{});
  clock_.advance(Duration::from_ns(1));
  EXPECT_EQ(req_->poll(clock_.now()), Event::kNone);
  EXPECT_EQ(drain(), V{0});  // the first timeouts probe with the oldest alone
  EXPECT_TRUE(req_->last_was_probe());
  EXPECT_EQ(req_->next_timeout(), clock_.now() + cfg_.rto + cfg_.rto);  // backed off
  clock_.advance(cfg_.rto + cfg_.rto);
  EXPECT_EQ(req_->poll(clock_.now()), Event::kNone);
  EXPECT_EQ(drain(), V{0});
  EXPECT_EQ(req_->next_timeout(), clock_.now() + cfg_.rto * 4);
  clock_.advance(cfg_.rto * 4);
  EXPECT_EQ(req_->poll(clock_.now()), Event::kNone);
  EXPECT_EQ(drain(), (V{0, 1}));  // still no progress: go back N
  EXPECT_FALSE(req_->last_was_probe());
  clock_.advance(cfg_.max_rto);
  EXPECT_EQ(req_->poll(clock_.now()), Event::kRetryExceeded);
  EXPECT_TRUE(req_->failed());
  EXPECT_EQ(req_->fatal_syndrome(), syndrome::nak(roce::NakCode::kRemoteOperationalError));
  EXPECT_EQ(req_->stats().timeouts, 4U);
}

TEST_F(RequesterTest, ProgressRestartsTimerBackoffStaysUntilAFreshSample) {
  make(0);
  push(0);
  push(1);
  drain();
  clock_.advance(cfg_.rto);
  req_->poll(clock_.now());
  drain();
  clock_.advance(Duration::from_ms(1));
  // Progress, but only retransmitted packets: the backed-off timeout stays.
  req_->on_aeth(0, syndrome::kAckUnlimited, clock_.now());
  EXPECT_EQ(req_->next_timeout(), clock_.now() + cfg_.rto * 2);
  push(2);
  drain();
  clock_.advance(Duration::from_ms(2));
  req_->on_aeth(2, syndrome::kAckUnlimited, clock_.now());  // 2 was sent once: a sample
  EXPECT_EQ(req_->rto(), Duration::from_ms(6));             // 2 ms + 4 * 1 ms
}

TEST_F(RequesterTest, InitialTimeoutHoldsUntilTheFirstSampleThenTheEstimateRules) {
  cfg_.initial_rto = Duration::from_ms(50);
  make(0);
  for (uint32_t p = 0; p < 4; ++p) push(p);
  drain();
  // A slow first answer (a soft RNIC on a busy host): no resend before 50 ms.
  EXPECT_EQ(req_->next_timeout(), clock_.now() + Duration::from_ms(50));
  clock_.advance(Duration::from_ms(30));
  EXPECT_EQ(req_->poll(clock_.now()), Event::kNone);
  EXPECT_EQ(drain(), V{});
  req_->on_aeth(1, syndrome::kAckUnlimited, clock_.now());  // sample 30 ms
  EXPECT_EQ(req_->stats().retransmitted, 0U);
  EXPECT_EQ(req_->rto(), Duration::from_ms(90));  // 30 ms + 4 * 15 ms
  // Fast answers bring it down to the floor, not to initial_rto.
  for (uint32_t p = 4; p < 40; ++p) {
    push(p);
    drain();
    clock_.advance(Duration::from_us(100));
    req_->on_aeth(p, syndrome::kAckUnlimited, clock_.now());
  }
  EXPECT_EQ(req_->rto(), cfg_.rto);
  // A restart (a new flow on the same slots) starts from initial_rto again.
  req_->start(100);
  EXPECT_EQ(req_->rto(), Duration::from_ms(50));
}

TEST_F(RequesterTest, AFullWindowWaitsForItsTimerNotNow) {
  cfg_.max_inflight = 2;
  make(0);
  for (uint32_t p = 0; p < 4; ++p) push(p);
  EXPECT_LE(req_->next_timeout(), clock_.now());  // packets to send
  EXPECT_EQ(drain(), (V{0, 1}));
  // Two more wait for room: nothing is due before the retransmission timer
  // (a next_timeout() in the past kept rowand's loop from ever sleeping).
  EXPECT_EQ(req_->next_timeout(), clock_.now() + cfg_.rto);
  req_->on_aeth(0, syndrome::kAckUnlimited, clock_.now());
  EXPECT_LE(req_->next_timeout(), clock_.now());
  EXPECT_EQ(drain(), V{2});
}

TEST_F(RequesterTest, RnrNakWaitsItsTimer) {
  make(7);
  push(7, op::kRcSendOnly);
  push(8, op::kRcSendOnly);
  drain();
  req_->on_aeth(8, syndrome::rnr_nak(14), clock_.now());  // 1.28 ms
  EXPECT_EQ(req_->in_window(), 1U);
  EXPECT_EQ(drain(), V{});
  EXPECT_EQ(req_->next_timeout(), clock_.now() + Duration::from_us(1280));
  clock_.advance(Duration::from_us(1279));
  EXPECT_EQ(drain(), V{});
  clock_.advance(Duration::from_us(1));
  EXPECT_EQ(drain(), V{8});
  EXPECT_EQ(req_->stats().rnr_naks, 1U);
}

TEST_F(RequesterTest, FatalNakIsReported) {
  make(0);
  push(0, op::kRcWriteOnly);
  push(1, op::kRcWriteOnly);
  drain();
  const uint8_t s = syndrome::nak(roce::NakCode::kRemoteAccessError);
  EXPECT_EQ(req_->on_aeth(1, s, clock_.now()), Event::kFatal);
  EXPECT_TRUE(req_->failed());
  EXPECT_EQ(req_->fatal_syndrome(), s);
  EXPECT_EQ(req_->stats().fatal_naks, 1U);
  EXPECT_EQ(drain(), V{});
}

TEST_F(RequesterTest, ReadResponsesAcknowledgeWhatCameBefore) {
  cfg_.pmtu = 256;
  make(20);
  push(20, op::kRcWriteOnly);
  push(21, op::kRcReadRequest, 1000);  // 4 response PSNs: 21..24
  push(25, op::kRcSendOnly);
  EXPECT_EQ(req_->next_psn(), 26U);
  drain();
  req_->on_response(op::kRcReadResponseFirst, 21, clock_.now());
  EXPECT_EQ(req_->in_window(), 2U);  // the write is done, the READ is not
  req_->on_response(op::kRcReadResponseLast, 24, clock_.now());
  EXPECT_EQ(req_->in_window(), 1U);
  req_->on_aeth(25, syndrome::kAckUnlimited, clock_.now());
  EXPECT_EQ(req_->in_window(), 0U);
}

TEST_F(RequesterTest, InflightIsCapped) {
  cfg_.max_inflight = 3;
  make(0);
  for (uint32_t p = 0; p < 6; ++p) push(p);
  EXPECT_EQ(drain(), (V{0, 1, 2}));
  req_->on_aeth(1, syndrome::kAckUnlimited, clock_.now());
  EXPECT_EQ(drain(), (V{3, 4}));
  clock_.advance(cfg_.rto);
  req_->poll(clock_.now());
  EXPECT_EQ(drain(), V{2});  // the probe
  clock_.advance(cfg_.rto * 2);
  req_->poll(clock_.now());
  EXPECT_EQ(drain(), V{2});  // the second probe
  clock_.advance(cfg_.rto * 4);
  req_->poll(clock_.now());
  EXPECT_EQ(drain(), (V{2, 3, 4}));  // go-back-N, still at most 3 in flight
}

// A responder that was only slow: the timeout's probe (the oldest packet,
// resent alone) draws an ACK of everything it has, and nothing else is sent
// twice; the next timeout probes again rather than going back N.
TEST_F(RequesterTest, TimeoutProbesWithTheOldestBeforeGoingBackN) {
  make(50);
  for (uint32_t p = 50; p < 58; ++p) push(p);  // all 8 slots
  EXPECT_EQ(drain(), (V{50, 51, 52, 53, 54, 55, 56, 57}));
  clock_.advance(cfg_.rto);
  EXPECT_EQ(req_->poll(clock_.now()), Event::kNone);
  EXPECT_EQ(drain(), V{50});
  EXPECT_EQ(req_->stats().retransmitted, 1U);
  // The responder answers the duplicate with its progress: through 53.
  clock_.advance(Duration::from_ms(1));
  req_->on_aeth(53, syndrome::kAckUnlimited, clock_.now());
  EXPECT_EQ(req_->in_window(), 4U);
  EXPECT_EQ(drain(), V{});  // 54..57 are still in flight, not resent
  // Still slow: the next timeout (after the sample from 51..53) probes again.
  clock_.advance(req_->next_timeout() - clock_.now());
  EXPECT_EQ(req_->poll(clock_.now()), Event::kNone);
  EXPECT_EQ(drain(), V{54});
  EXPECT_EQ(req_->stats().timeouts, 2U);
  EXPECT_EQ(req_->stats().retransmitted, 2U);
  // A lost tail: no answer to two probes, so the next timeout goes back N.
  clock_.advance(req_->next_timeout() - clock_.now());
  req_->poll(clock_.now());
  EXPECT_EQ(drain(), V{54});
  clock_.advance(req_->next_timeout() - clock_.now());
  req_->poll(clock_.now());
  EXPECT_EQ(drain(), (V{54, 55, 56, 57}));
  EXPECT_EQ(req_->stats().timeouts, 4U);
}

// A responder silent for less than go_back_after (a soft RNIC whose vCPU was
// off the CPU) gets probes only, however many timeouts that takes: going
// back N would queue the whole window again behind its backlog. Past the
// quiet time the window goes again; progress starts the quiet time over.
TEST_F(RequesterTest, GoesBackNOnlyAfterTheQuietTime) {
  cfg_.go_back_after = Duration::from_ms(64);
  make(0);
  for (uint32_t p = 0; p < 4; ++p) push(p);
  const TimePoint t0 = clock_.now();
  EXPECT_EQ(drain(), (V{0, 1, 2, 3}));
  int probes = 0;
  for (;;) {
    clock_.advance(req_->next_timeout() - clock_.now());
    EXPECT_EQ(req_->poll(clock_.now()), Event::kNone);
    const V sent = drain();
    if (clock_.now() - t0 < cfg_.go_back_after) {
      EXPECT_EQ(sent, V{0}) << "at " << (clock_.now() - t0).ns() / 1000000 << " ms";
      ++probes;
      continue;
    }
    EXPECT_EQ(sent, (V{0, 1, 2, 3}));  // 4 + 8 + 16 + 32 ms of probes, then the window
    break;
  }
  EXPECT_EQ(probes, 4);
  EXPECT_FALSE(req_->failed());
  // Progress: the quiet time starts over, so the next timeout probes again.
  clock_.advance(Duration::from_ms(1));
  req_->on_aeth(1, syndrome::kAckUnlimited, clock_.now());
  clock_.advance(req_->next_timeout() - clock_.now());
  req_->poll(clock_.now());
  EXPECT_EQ(drain(), V{2});
}

TEST_F(RequesterTest, TimeoutFollowsTheMeasuredRoundTrip) {
  make(0);
  push(0);
  drain();
  clock_.advance(Duration::from_ms(10));
  req_->on_aeth(0, syndrome::kAckUnlimited, clock_.now());
  EXPECT_EQ(req_->srtt(), Duration::from_ms(10));
  EXPECT_EQ(req_->rto(), Duration::from_ms(30));  // srtt + 4 * rttvar (5 ms)
  push(1);
  drain();
  EXPECT_EQ(req_->next_timeout(), clock_.now() + Duration::from_ms(30));
  // A retransmitted packet gives no sample (Karn).
  clock_.advance(Duration::from_ms(30));
  req_->poll(clock_.now());
  drain();
  clock_.advance(Duration::from_ms(1));
  req_->on_aeth(1, syndrome::kAckUnlimited, clock_.now());
  EXPECT_EQ(req_->srtt(), Duration::from_ms(10));
}

TEST_F(RequesterTest, PsnWrapsAt2To24) {
  make(0xFFFFFD);
  for (uint32_t i = 0; i < 6; ++i) push(0xFFFFFD + i);
  EXPECT_EQ(req_->next_psn(), 3U);
  drain();
  req_->on_aeth(0x000001, syndrome::nak(roce::NakCode::kPsnSequenceError), clock_.now());
  EXPECT_EQ(req_->in_window(), 2U);
  EXPECT_EQ(push(0xFFFFFF), PushResult::kDuplicate);
  req_->on_aeth(0x000002, syndrome::kAckUnlimited, clock_.now());
  EXPECT_EQ(req_->in_window(), 0U);
}

}  // namespace
}  // namespace rowan::split
