// Unit tests of one emulated direction: rate, queue, delay, loss models, ECN,
// corruption, duplication, reordering, link state. Time is injected.
#include "link.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

namespace rowan::wanem {
namespace {

struct FakePkt {
  std::array<uint8_t, 1600> data{};
  uint32_t len = 0;
  int id = 0;
};

TimePoint t0() { return TimePoint::from_ns(1000000000); }

class LinkTest : public ::testing::Test {
 protected:
  FakePkt* make(uint32_t len) {
    auto p = std::make_unique<FakePkt>();
    p->len = len;
    p->id = static_cast<int>(pkts_.size());
    pkts_.push_back(std::move(p));
    return pkts_.back().get();
  }
  Direction::Verdict admit(Direction& d, TimePoint now, FakePkt* p, bool* dup = nullptr,
                           DropReason* why = nullptr) {
    bool dup_local = false;
    DropReason why_local{};
    return d.admit(now, p, p->data.data(), p->len, true, dup != nullptr ? dup : &dup_local,
                   why != nullptr ? why : &why_local);
  }
  std::vector<Scheduled> release_all(Direction& d) {
    std::vector<Scheduled> out(d.in_flight());
    out.resize(d.drain(out.data(), out.size()));
    return out;
  }
  std::vector<std::unique_ptr<FakePkt>> pkts_;
};

TEST_F(LinkTest, SerializesAtTheRateByteAccurately) {
  Direction d(1024, 1);
  DirSettings s;
  s.rate = BitsPerSec::from_mbps(8);  // 1 byte per microsecond
  s.delay = Duration::from_ms(10);
  s.queue_limit = 1 << 20;
  d.configure(s, t0());
  for (int i = 0; i < 10; ++i) ASSERT_EQ(admit(d, t0(), make(1000)), Direction::Verdict::kQueued);
  EXPECT_EQ(d.backlog(t0()), 10000U);
  EXPECT_EQ(d.backlog(t0() + Duration::from_us(2500)), 7500U);
  const auto out = release_all(d);
  ASSERT_EQ(out.size(), 10U);
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].release_ns,
              (t0() + Duration::from_ms(10) + Duration::from_us(1000 * static_cast<int64_t>(i + 1)))
                  .ns());
  }
}

TEST_F(LinkTest, TailDropsAtTheQueueLimitInBytes) {
  Direction d(1024, 1);
  DirSettings s;
  s.rate = BitsPerSec::from_mbps(8);
  s.queue_limit = 4500;
  d.configure(s, t0());
  int queued = 0;
  DropReason why{};
  for (int i = 0; i < 10; ++i) {
    if (admit(d, t0(), make(1000), nullptr, &why) == Direction::Verdict::kQueued) ++queued;
  }
  EXPECT_EQ(queued, 4);
  EXPECT_EQ(why, DropReason::kQueueFull);
  EXPECT_EQ(d.counters().drops[static_cast<size_t>(DropReason::kQueueFull)], 6U);
  // After 1 ms one frame has left: room for exactly one more.
  EXPECT_EQ(admit(d, t0() + Duration::from_ms(1), make(1000)), Direction::Verdict::kQueued);
  EXPECT_EQ(admit(d, t0() + Duration::from_ms(1), make(1000)), Direction::Verdict::kDropped);
}

TEST_F(LinkTest, OverheadCountsTowardSerialization) {
  Direction d(16, 1);
  DirSettings s;
  s.rate = BitsPerSec::from_mbps(8);
  s.overhead = 24;
  d.configure(s, t0());
  admit(d, t0(), make(1000));
  Scheduled out[1];
  ASSERT_EQ(d.release(TimePoint::infinite(), out, 1), 1U);
  EXPECT_EQ(out[0].release_ns, (t0() + Duration::from_us(1024)).ns());
}

TEST_F(LinkTest, ReleaseHonoursDeadlineAndOrder) {
  Direction d(16, 1);
  DirSettings s;
  s.delay = Duration::from_ms(5);
  d.configure(s, t0());
  admit(d, t0(), make(100));
  admit(d, t0() + Duration::from_ms(1), make(100));
  Scheduled out[4];
  EXPECT_EQ(d.release(t0() + Duration::from_us(4999), out, 4), 0U);
  EXPECT_EQ(d.next_release(), t0() + Duration::from_ms(5));
  EXPECT_EQ(d.release(t0() + Duration::from_ms(5), out, 4), 1U);
  EXPECT_EQ(static_cast<FakePkt*>(out[0].pkt)->id, 0);
  EXPECT_EQ(d.release(t0() + Duration::from_ms(7), out, 4), 1U);
  EXPECT_EQ(static_cast<FakePkt*>(out[0].pkt)->id, 1);
  EXPECT_TRUE(d.next_release().is_infinite());
}

TEST_F(LinkTest, BernoulliLossWithinBinomialInterval) {
  Direction d(16, 42);
  DirSettings s;
  s.loss = 0.01;
  d.configure(s, t0());
  const int n = 200000;
  FakePkt* p = make(100);
  int lost = 0;
  Scheduled out[1];
  for (int i = 0; i < n; ++i) {
    if (admit(d, t0(), p) == Direction::Verdict::kDropped) {
      ++lost;
    } else {
      d.release(TimePoint::infinite(), out, 1);
    }
  }
  const double mean = n * 0.01;
  const double sd = std::sqrt(n * 0.01 * 0.99);
  EXPECT_NEAR(lost, mean, 4 * sd);
  EXPECT_EQ(d.counters().drops[static_cast<size_t>(DropReason::kLoss)],
            static_cast<uint64_t>(lost));
}

TEST_F(LinkTest, GilbertElliottGivesBurstsAtTheStationaryRate) {
  Direction d(16, 7);
  DirSettings s;
  s.ge_p = 0.01;
  s.ge_r = 0.25;  // mean burst 4 frames
  s.ge_bad_loss = 1.0;
  d.configure(s, t0());
  const int n = 400000;
  FakePkt* p = make(100);
  int lost = 0, bursts = 0;
  bool prev_lost = false;
  Scheduled out[1];
  for (int i = 0; i < n; ++i) {
    const bool l = admit(d, t0(), p) == Direction::Verdict::kDropped;
    if (l) {
      ++lost;
      if (!prev_lost) ++bursts;
    } else {
      d.release(TimePoint::infinite(), out, 1);
    }
    prev_lost = l;
  }
  const double expected = 0.01 / (0.01 + 0.25);
  EXPECT_NEAR(static_cast<double>(lost) / n, expected, 0.004);
  EXPECT_NEAR(static_cast<double>(lost) / bursts, 4.0, 0.3);
  EXPECT_EQ(d.counters().drops[static_cast<size_t>(DropReason::kBurstLoss)],
            static_cast<uint64_t>(lost));
}

// An IPv4/UDP frame with a valid header checksum and the given ECN bits.
void fill_ipv4(FakePkt* p, uint8_t ecn) {
  std::memset(p->data.data(), 0, p->data.size());
  p->data[12] = 0x08;
  p->data[13] = 0x00;
  uint8_t* ip = p->data.data() + 14;
  ip[0] = 0x45;
  ip[1] = static_cast<uint8_t>(0xb8 | ecn);
  ip[3] = 100;
  ip[8] = 64;
  ip[9] = 17;
  ip[12] = 198;
  ip[13] = 18;
  ip[14] = 1;
  ip[15] = 10;
  ip[16] = 198;
  ip[17] = 18;
  ip[18] = 2;
  ip[19] = 10;
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += static_cast<uint32_t>((ip[i] << 8) | ip[i + 1]);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  const uint16_t c = static_cast<uint16_t>(~sum);
  ip[10] = static_cast<uint8_t>(c >> 8);
  ip[11] = static_cast<uint8_t>(c & 0xff);
}

bool ipv4_checksum_ok(const FakePkt* p) {
  const uint8_t* ip = p->data.data() + 14;
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += static_cast<uint32_t>((ip[i] << 8) | ip[i + 1]);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return sum == 0xffff;
}

TEST_F(LinkTest, MarksEctFramesAboveThresholdAndFixesChecksum) {
  Direction d(64, 1);
  DirSettings s;
  s.rate = BitsPerSec::from_mbps(8);
  s.ecn_threshold = 2000;
  d.configure(s, t0());
  std::vector<FakePkt*> ps;
  for (int i = 0; i < 4; ++i) {
    FakePkt* p = make(114);
    fill_ipv4(p, i == 3 ? 0 : 2);  // ECT(0), last one Not-ECT
    ps.push_back(p);
  }
  // Fill the queue to 2000 B with unmarked filler first.
  for (int i = 0; i < 2; ++i) admit(d, t0(), make(1000));
  for (FakePkt* p : ps) admit(d, t0(), p);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(ps[static_cast<size_t>(i)]->data[15] & 0x3, 0x3);
    EXPECT_TRUE(ipv4_checksum_ok(ps[static_cast<size_t>(i)]));
  }
  EXPECT_EQ(ps[3]->data[15] & 0x3, 0);
  EXPECT_EQ(d.counters().ecn_marked, 3U);
  EXPECT_EQ(d.counters().ecn_not_ect, 1U);
}

TEST_F(LinkTest, BelowThresholdNothingIsMarked) {
  Direction d(64, 1);
  DirSettings s;
  s.rate = BitsPerSec::from_mbps(8);
  s.ecn_threshold = 5000;
  d.configure(s, t0());
  FakePkt* p = make(114);
  fill_ipv4(p, 1);
  admit(d, t0(), p);
  EXPECT_EQ(p->data[15] & 0x3, 1);
  EXPECT_EQ(d.counters().ecn_marked, 0U);
}

TEST_F(LinkTest, CorruptionFlipsExactlyOneBitPastTheEthernetHeader) {
  Direction d(64, 3);
  DirSettings s;
  s.corrupt = 1.0;
  d.configure(s, t0());
  for (int k = 0; k < 20; ++k) {
    FakePkt* p = make(200);
    const auto before = p->data;
    admit(d, t0(), p);
    int bits = 0;
    for (size_t i = 0; i < 200; ++i) {
      const uint8_t x = before[i] ^ p->data[i];
      if (x != 0) {
        EXPECT_GE(i, 14U);
      }
      bits += __builtin_popcount(x);
    }
    EXPECT_EQ(bits, 1);
  }
  EXPECT_EQ(d.counters().corrupted, 20U);
}

// A UDP or TCP segment over IPv4 or IPv6 with a correct L4 checksum and an
// odd-length payload of pseudo-random bytes; `extra` bytes of Ethernet
// padding follow it in the frame (not covered by the checksum).
uint32_t fill_l4(FakePkt* p, bool v6, uint8_t proto, uint32_t payload, uint32_t extra = 0) {
  std::memset(p->data.data(), 0, p->data.size());
  uint8_t* d = p->data.data();
  const uint32_t hdr = proto == 17 ? 8 : 20;
  const uint32_t l4_len = hdr + payload;
  const uint32_t l3_len = v6 ? 40 : 20;
  d[12] = v6 ? 0x86 : 0x08;
  d[13] = v6 ? 0xdd : 0x00;
  uint8_t* ip = d + 14;
  uint8_t* l4 = ip + l3_len;
  uint32_t sum = 0;
  auto add16 = [&sum](const uint8_t* b, uint32_t n) {
    for (uint32_t i = 0; i < n; i += 2) {
      sum += static_cast<uint32_t>(b[i] << 8) | (i + 1 < n ? b[i + 1] : 0U);
    }
  };
  if (v6) {
    ip[0] = 0x60;
    ip[4] = static_cast<uint8_t>(l4_len >> 8);
    ip[5] = static_cast<uint8_t>(l4_len & 0xff);
    ip[6] = proto;
    ip[7] = 64;
    ip[8] = 0x20;
    ip[9] = 0x01;
    ip[11] = 0x02;
    ip[23] = 0x10;
    ip[24] = 0x20;
    ip[25] = 0x01;
    ip[27] = 0x02;
    ip[39] = 0x11;
    add16(ip + 8, 32);
  } else {
    ip[0] = 0x45;
    ip[2] = static_cast<uint8_t>((20 + l4_len) >> 8);
    ip[3] = static_cast<uint8_t>((20 + l4_len) & 0xff);
    ip[8] = 64;
    ip[9] = proto;
    const uint8_t addrs[8] = {198, 18, 1, 10, 198, 18, 2, 10};
    std::memcpy(ip + 12, addrs, 8);
    add16(ip + 12, 8);
  }
  sum += proto;
  sum += l4_len;
  l4[0] = 0x12;
  l4[1] = 0x34;
  l4[2] = 0x12;
  l4[3] = 0xb7;
  if (proto == 17) {
    l4[4] = static_cast<uint8_t>(l4_len >> 8);
    l4[5] = static_cast<uint8_t>(l4_len & 0xff);
  } else {
    l4[12] = 0x50;
  }
  for (uint32_t i = 0; i < payload; ++i) l4[hdr + i] = static_cast<uint8_t>(i * 37 + 11);
  add16(l4, l4_len);
  while ((sum >> 16) != 0) sum = (sum & 0xffff) + (sum >> 16);
  uint16_t c = static_cast<uint16_t>(~sum);
  if (proto == 17 && c == 0) c = 0xffff;
  const uint32_t at = proto == 17 ? 6 : 16;
  l4[at] = static_cast<uint8_t>(c >> 8);
  l4[at + 1] = static_cast<uint8_t>(c & 0xff);
  for (uint32_t i = 0; i < extra; ++i) l4[l4_len + i] = 0xa5;
  p->len = 14 + l3_len + l4_len + extra;
  return 14 + l3_len;  // where L4 starts
}

// The receiver's check: the one's-complement sum over pseudo-header and
// segment, checksum included, is 0xffff.
bool l4_checksum_ok(const FakePkt* p, bool v6, uint8_t proto, uint32_t l4_len) {
  const uint8_t* ip = p->data.data() + 14;
  const uint8_t* l4 = ip + (v6 ? 40 : 20);
  uint32_t sum = 0;
  auto add16 = [&sum](const uint8_t* b, uint32_t n) {
    for (uint32_t i = 0; i < n; i += 2) {
      sum += static_cast<uint32_t>(b[i] << 8) | (i + 1 < n ? b[i + 1] : 0U);
    }
  };
  if (v6) {
    add16(ip + 8, 32);
  } else {
    add16(ip + 12, 8);
  }
  sum += proto;
  sum += l4_len;
  add16(l4, l4_len);
  while ((sum >> 16) != 0) sum = (sum & 0xffff) + (sum >> 16);
  return sum == 0xffff;
}

TEST_F(LinkTest, PayloadCorruptionFlipsOnePayloadBitAndKeepsTheChecksumValid) {
  Direction d(4096, 9);
  DirSettings s;
  s.corrupt = 1.0;
  s.corrupt_payload = true;
  d.configure(s, t0());
  struct Case {
    bool v6;
    uint8_t proto;
  };
  for (const Case c : {Case{false, 17}, Case{true, 17}, Case{false, 6}, Case{true, 6}}) {
    const uint32_t hdr = c.proto == 17 ? 8 : 20;
    for (int k = 0; k < 300; ++k) {
      // Odd payload lengths put the flipped bit into a zero-padded last word
      // now and then; the Ethernet padding after it must not count.
      const uint32_t payload = 1 + static_cast<uint32_t>(k % 7) * 2;
      FakePkt* p = make(0);
      const uint32_t l4 = fill_l4(p, c.v6, c.proto, payload, 6);
      const auto before = p->data;
      admit(d, t0(), p);
      int bits = 0;
      for (size_t i = 0; i < p->len; ++i) {
        const uint8_t x = before[i] ^ p->data[i];
        if (x == 0) continue;
        const bool checksum =
            i >= l4 + (c.proto == 17 ? 6 : 16) && i < l4 + (c.proto == 17 ? 8 : 18);
        if (!checksum) {
          EXPECT_GE(i, l4 + hdr) << "a header bit was flipped";
          EXPECT_LT(i, l4 + hdr + payload) << "padding was touched";
          bits += __builtin_popcount(x);
        }
      }
      EXPECT_EQ(bits, 1) << "v6 " << c.v6 << " proto " << int{c.proto};
      EXPECT_TRUE(l4_checksum_ok(p, c.v6, c.proto, hdr + payload))
          << "v6 " << c.v6 << " proto " << int{c.proto} << " payload " << payload;
    }
  }
  EXPECT_EQ(d.counters().corrupted, 1200U);
  EXPECT_EQ(d.counters().corrupt_skipped, 0U);
}

TEST_F(LinkTest, PayloadCorruptionLeavesFramesWithoutAPayloadIntact) {
  Direction d(64, 9);
  DirSettings s;
  s.corrupt = 1.0;
  s.corrupt_payload = true;
  d.configure(s, t0());
  FakePkt* arp = make(60);
  arp->data[12] = 0x08;
  arp->data[13] = 0x06;
  FakePkt* empty = make(0);
  fill_l4(empty, false, 17, 0);
  FakePkt* frag = make(0);
  fill_l4(frag, false, 17, 100);
  frag->data[14 + 6] = 0x20;  // more fragments
  for (FakePkt* p : {arp, empty, frag}) {
    const auto before = p->data;
    admit(d, t0(), p);
    EXPECT_EQ(before, p->data);
  }
  EXPECT_EQ(d.counters().corrupted, 0U);
  EXPECT_EQ(d.counters().corrupt_skipped, 3U);
}

TEST_F(LinkTest, DuplicationAsksForCopiesThatGoThroughTheLink) {
  Direction d(4096, 5);
  DirSettings s;
  s.duplicate = 0.1;
  d.configure(s, t0());
  int dups = 0;
  for (int i = 0; i < 2000; ++i) {
    bool dup = false;
    FakePkt* p = make(100);
    admit(d, t0(), p, &dup);
    if (dup) {
      ++dups;
      bool again = false;
      DropReason why{};
      d.admit(t0(), p, p->data.data(), p->len, false, &again, &why);
      EXPECT_FALSE(again);
    }
  }
  EXPECT_NEAR(dups, 200, 4 * std::sqrt(2000 * 0.1 * 0.9));
  EXPECT_EQ(d.counters().duplicated, static_cast<uint64_t>(dups));
  EXPECT_EQ(d.counters().rx_frames, 2000U);
  EXPECT_EQ(d.in_flight(), static_cast<size_t>(2000 + dups));
}

TEST_F(LinkTest, JitterKeepsOrderUnlessAllowedToReorder) {
  for (bool allow : {false, true}) {
    Direction d(4096, 9);
    DirSettings s;
    s.delay = Duration::from_ms(10);
    s.jitter = Duration::from_ms(2);
    s.jitter_reorder = allow;
    d.configure(s, t0());
    for (int i = 0; i < 1000; ++i) admit(d, t0() + Duration::from_us(int64_t{10} * i), make(100));
    const auto out = release_all(d);
    ASSERT_EQ(out.size(), 1000U);
    int inversions = 0;
    int64_t lo = INT64_MAX, hi = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      if (i > 0) {
        EXPECT_LE(out[i - 1].release_ns, out[i].release_ns);
      }
      const int id = static_cast<FakePkt*>(out[i].pkt)->id;
      if (i > 0 && id < static_cast<FakePkt*>(out[i - 1].pkt)->id) ++inversions;
      const int64_t applied = out[i].release_ns - (t0() + Duration::from_us(int64_t{10} * id)).ns();
      lo = std::min(lo, applied);
      hi = std::max(hi, applied);
    }
    if (allow) {
      EXPECT_GT(inversions, 100);
      EXPECT_GE(lo, Duration::from_ms(8).ns());
      EXPECT_LE(hi, Duration::from_ms(12).ns());
    } else {
      EXPECT_EQ(inversions, 0);
      EXPECT_GE(lo, Duration::from_ms(8).ns());
    }
    pkts_.clear();
  }
}

TEST_F(LinkTest, ReorderLetsFramesOvertake) {
  Direction d(4096, 11);
  DirSettings s;
  s.delay = Duration::from_ms(10);
  s.reorder = 0.25;
  d.configure(s, t0());
  for (int i = 0; i < 1000; ++i) admit(d, t0() + Duration::from_us(int64_t{100} * i), make(100));
  const auto out = release_all(d);
  int inversions = 0;
  for (size_t i = 1; i < out.size(); ++i) {
    if (static_cast<FakePkt*>(out[i].pkt)->id < static_cast<FakePkt*>(out[i - 1].pkt)->id) {
      ++inversions;
    }
  }
  EXPECT_GT(inversions, 100);
  EXPECT_NEAR(static_cast<double>(d.counters().reordered), 250, 4 * std::sqrt(1000 * 0.25 * 0.75));
}

TEST_F(LinkTest, SameSeedSameDecisions) {
  auto run = [this](uint64_t seed) {
    Direction d(8192, seed);
    DirSettings s;
    s.loss = 0.05;
    s.delay = Duration::from_ms(1);
    s.jitter = Duration::from_us(500);
    s.jitter_reorder = true;
    d.configure(s, t0());
    std::vector<int64_t> trace;
    for (int i = 0; i < 2000; ++i) {
      if (admit(d, t0() + Duration::from_us(i), make(100)) == Direction::Verdict::kDropped) {
        trace.push_back(-i);
      }
    }
    for (const Scheduled& x : release_all(d)) trace.push_back(x.release_ns);
    return trace;
  };
  EXPECT_EQ(run(1), run(1));
  EXPECT_NE(run(1), run(2));
}

TEST_F(LinkTest, LinkDownDropsEverything) {
  Direction d(16, 1);
  DirSettings s;
  s.up = false;
  d.configure(s, t0());
  DropReason why{};
  EXPECT_EQ(admit(d, t0(), make(100), nullptr, &why), Direction::Verdict::kDropped);
  EXPECT_EQ(why, DropReason::kLinkDown);
}

TEST_F(LinkTest, RateChangeKeepsTheBacklog) {
  Direction d(64, 1);
  DirSettings s;
  s.rate = BitsPerSec::from_mbps(8);
  d.configure(s, t0());
  for (int i = 0; i < 4; ++i) admit(d, t0(), make(1000));
  s.rate = BitsPerSec::from_mbps(16);
  d.configure(s, t0() + Duration::from_ms(1));
  EXPECT_EQ(d.backlog(t0() + Duration::from_ms(1)), 3000U);
  EXPECT_EQ(d.backlog(t0() + Duration::from_ms(2)), 1000U);
}

TEST_F(LinkTest, ReleaseErrorStatisticsAndQuantiles) {
  Direction d(16, 1);
  // 98 frames on time, one 30 µs late, one 5 ms late (clamped into the top bucket).
  for (int i = 0; i < 98; ++i) d.note_tx(t0(), t0().ns(), 100);
  d.note_tx(t0() + Duration::from_us(30), t0().ns(), 100);
  d.note_tx(t0() + Duration::from_ms(5), t0().ns(), 100);
  const DirCounters& c = d.counters();
  EXPECT_EQ(c.tx_frames, 100U);
  EXPECT_EQ(c.tx_bytes, 10000U);
  EXPECT_EQ(c.late_max_ns, Duration::from_ms(5).ns());
  EXPECT_EQ(c.late_quantile_us(0.5), 0.0);
  EXPECT_EQ(c.late_quantile_us(0.99), 30.0);
  EXPECT_EQ(c.late_quantile_us(1.0), 2047.0);
}

TEST_F(LinkTest, SchedulerCapacityIsBounded) {
  Direction d(4, 1);
  DirSettings s;
  s.delay = Duration::from_ms(1);
  d.configure(s, t0());
  DropReason why{};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(admit(d, t0(), make(100)), Direction::Verdict::kQueued);
  EXPECT_EQ(admit(d, t0(), make(100), nullptr, &why), Direction::Verdict::kDropped);
  EXPECT_EQ(why, DropReason::kSchedulerFull);
}

}  // namespace
}  // namespace rowan::wanem
