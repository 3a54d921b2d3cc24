// Pairing by PSN match: the MSN offset, retransmissions, unmatched ACKs.
#include "split/pairing.h"

#include <gtest/gtest.h>

namespace rowan::split {
namespace {

namespace op = roce::op;

TEST(PairingTest, MatchesAckPsnAndDerivesMsn) {
  PairingTracker t;
  // The remote host had already completed 9 messages before we saw the flow.
  t.on_forwarded(op::kRcWriteFirst, 100, false, 0, 1024);
  t.on_forwarded(op::kRcWriteLast, 101, true, 0, 1024);
  t.on_forwarded(op::kRcSendOnly, 102, true, 0, 1024);
  t.on_forwarded(op::kRcSendFirst, 103, false, 0, 1024);
  EXPECT_FALSE(t.on_ack(100, 9));  // not an acknowledgeable PSN we forwarded
  EXPECT_FALSE(t.matched());
  EXPECT_TRUE(t.on_ack(101, 10));
  EXPECT_TRUE(t.matched());
  EXPECT_FALSE(t.quiescent());
  EXPECT_EQ(t.next_psn(), 104U);
  EXPECT_EQ(t.next_msn(), 11U);  // 101's message was the 10th, 102's the 11th
  t.on_forwarded(op::kRcSendLast, 104, true, 0, 1024);
  EXPECT_EQ(t.next_msn(), 12U);
  EXPECT_TRUE(t.on_ack(104, 12));
  EXPECT_TRUE(t.quiescent());
}

TEST(PairingTest, RetransmissionsAreNotCountedTwice) {
  PairingTracker t;
  t.on_forwarded(op::kRcSendOnly, 0xFFFFFF, true, 0, 1024);
  t.on_forwarded(op::kRcSendOnly, 0, true, 0, 1024);
  t.on_forwarded(op::kRcSendOnly, 0xFFFFFF, true, 0, 1024);  // go-back
  t.on_forwarded(op::kRcSendOnly, 0, true, 0, 1024);
  t.on_forwarded(op::kRcReadRequest, 1, true, 4096, 1024);  // PSNs 1..4
  EXPECT_EQ(t.next_psn(), 5U);
  EXPECT_TRUE(t.on_ack(0, 2));
  EXPECT_EQ(t.next_msn(), 3U);
}

}  // namespace
}  // namespace rowan::split
