// Send-buffer admission (daemon/rowand/datapath/send_admission.h) and the root cause of
// the 30 s flap's RoCE losses (docs/faults.md): flows active when an outage
// begins fill the reserve of a buffer that no longer drains, and a flow that
// starts during the outage finds no room.
#include "datapath/send_admission.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>

namespace rowan::gw {
namespace {

constexpr Duration kSrtt = Duration::from_ms(20);

TimePoint at_ms(int64_t ms) { return TimePoint::from_ns(ms * 1000000); }

TEST(DrainWatch, StallsOnlyWhenDataWaitsWithoutAcknowledgement) {
  DrainWatch w;
  w.update(at_ms(1000), 0, 0, kSrtt);
  // Nothing waits: never stalled, however long.
  w.update(at_ms(5000), 0, 0, kSrtt);
  EXPECT_FALSE(w.stalled());
  // Data written at 5000 ms; ACKs keep coming every millisecond.
  for (int64_t t = 5001; t <= 5100; ++t) {
    w.update(at_ms(t), static_cast<uint64_t>(t - 5000) * 3000, 500000, kSrtt);
    EXPECT_FALSE(w.stalled()) << t;
  }
  // The ACKs stop (an outage): stalled after half an RTT plus the slack.
  const uint64_t delivered = uint64_t{100} * 3000;
  for (int64_t t = 5101; t <= 5115; ++t) {
    w.update(at_ms(t), delivered, 500000, kSrtt);
    EXPECT_FALSE(w.stalled()) << t;
  }
  w.update(at_ms(5116), delivered, 500000, kSrtt);
  EXPECT_TRUE(w.stalled());
  w.update(at_ms(35000), delivered, 500000, kSrtt);
  EXPECT_TRUE(w.stalled());
  // The link is back: the first acknowledgement ends the stall.
  w.update(at_ms(35001), delivered + 1400, 498600, kSrtt);
  EXPECT_FALSE(w.stalled());
}

TEST(DrainWatch, ALatePassReadsItsAcksBeforeCallingTheLinkStalled) {
  DrainWatch w;
  w.update(at_ms(0), 1000, 500000, kSrtt);
  // The gateway was descheduled for 50 ms while ACKs kept arriving: the
  // packets it takes in before reading them see no stall (stalled() answers
  // as of the last update), and reading them shows progress.
  EXPECT_FALSE(w.stalled());
  w.update(at_ms(50), 90000, 410000, kSrtt);
  EXPECT_FALSE(w.stalled());
  // No ACK in the 50 ms after that: stalled.
  w.update(at_ms(100), 90000, 410000, kSrtt);
  EXPECT_TRUE(w.stalled());
}

TEST(Admission, UnchangedWhileTheLinkDrains) {
  const Bytes cap = 1000000;
  AdmissionView v{cap, cap, 0, 1502, 2, false};
  EXPECT_TRUE(admit(v));
  // Beyond its share (cap / 2): only while the reserve (cap / 8) stays free.
  v.held = 600000;
  v.free = cap / 8 + 1502;
  EXPECT_TRUE(admit(v));
  v.free = cap / 8 + 1501;
  EXPECT_FALSE(admit(v));
  // Under its share a flow may use the reserve (a stalled receiver's
  // neighbour keeps its rate: faults_test StalledReceiver...).
  v.held = 280000;
  v.free = 40000;
  EXPECT_TRUE(admit(v));
}

TEST(Admission, StalledLinkKeepsTheReserveForFlowsHoldingLittle) {
  const Bytes cap = 1000000;
  AdmissionView v{cap, 40000, 280000, 1502, 2, true};
  EXPECT_FALSE(admit(v)) << "a flow holding 280 kB takes the last of a stalled buffer";
  v.held = 18000;
  v.record = 320;
  EXPECT_TRUE(admit(v)) << "a new flow finds no room";
  v.held = admission_small_flow(cap) - 320;
  EXPECT_TRUE(admit(v));
  v.held += 1;
  EXPECT_FALSE(admit(v));
  v.free = cap / 2;  // outside the reserve: anyone, stalled or not
  v.held = 400000;
  EXPECT_TRUE(admit(v));
}

// The outage of bench/faults-long replayed on one send buffer (1 MB budget:
// 200 Mbit/s x 20 ms x 2), with the figures gateway A showed: at the outage's
// start a bulk TCP flow held 458 kB and a 20 Mbit/s TCP flow 112 kB; their
// hosts keep sending what their windows allow (the bulk flow at 200 Mbit/s,
// the other at 20 Mbit/s up to a 300 kB window) into a buffer that no longer
// drains. One second in, two RoCE QPs start: 150 records of 320 B each at 50
// packets a second in all. Returns how many RoCE records were refused.
int replay_outage(bool detect_stall) {
  const Bytes cap = 1000000;
  std::array<Bytes, 4> held = {458000, 112000, 0, 0};  // bulk, 20M, QP 1, QP 2
  Bytes used = held[0] + held[1];
  DrainWatch watch;
  const uint64_t delivered = 7000000;
  watch.update(at_ms(0), delivered - 1, used, kSrtt);  // the last ACK
  int refused = 0, roce_sent = 0;
  for (int64_t ms = 1; ms <= 10000; ++ms) {
    const TimePoint now = at_ms(ms);
    watch.update(now, delivered, used, kSrtt);
    const uint32_t flows = ms < 1000 ? 2 : 4;  // flows that sent in the window
    auto offer = [&](size_t f, Bytes rec) {
      AdmissionView v{cap, cap - used, held[f], rec, flows, detect_stall && watch.stalled()};
      if (v.free < rec || !admit(v)) return false;
      held[f] += rec;
      used += rec;
      return true;
    };
    for (int i = 0; i < 16; ++i) offer(0, 1502);  // 24 kB a millisecond
    if (ms % 3 != 0 && held[1] + 1502 <= 300000) offer(1, 1502);
    if (ms >= 1000 && ms % 20 == 0 && roce_sent < 300) {
      if (!offer(2 + static_cast<size_t>(roce_sent % 2), 320)) ++refused;
      ++roce_sent;
    }
  }
  EXPECT_EQ(roce_sent, 300);
  EXPECT_LE(used, cap);
  return refused;
}

TEST(Admission, FlowsStartingDuringAnOutageFindRoom) {
  // Before: the 20 Mbit/s flow, under its share of a two-flow buffer, filled
  // the reserve after the bulk flow had stopped at it; the QPs found none.
  const int before = replay_outage(false);
  EXPECT_GT(before, 100);
  // Now: once the ACKs have stopped for half an RTT plus 5 ms, only flows
  // holding little may take reserve space, and both QPs fit.
  const int after = replay_outage(true);
  EXPECT_EQ(after, 0);
  std::printf("RoCE records refused of 300: %d without stall detection, %d with\n", before, after);
}

}  // namespace
}  // namespace rowan::gw
