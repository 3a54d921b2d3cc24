#include "rowan/rowan.h"

#include <gtest/gtest.h>

#include "cc_test_util.h"
#include "mini_sim.h"
#include "registry.h"
#include "tools/fake_clock.h"

namespace rowan::cc {
namespace {

constexpr Bytes kMss = 1400;

TimePoint at(Duration d) { return TimePoint::from_ns(d.ns()); }

std::unique_ptr<Rowan> make(const Clock& clock, BitsPerSec link, Duration base,
                            Rowan::Config cfg = {}) {
  return std::make_unique<Rowan>(clock, PathHints{link, base, kMss}, cfg);
}

// Builds ACKs for one flow behind a fixed-rate bottleneck whose queueing
// delay the test sets per round.
struct Driver {
  Rowan& cc;
  TimePoint now;
  Duration base;
  uint64_t round = 0;

  // One round trip at delivery rate `rate` with queueing delay `queue`; the
  // round's bytes arrive in `acks` ACKs; `lost` packets are reported with it.
  void round_trip(BitsPerSec rate, Duration queue, uint32_t lost = 0, uint32_t acks = 8) {
    const Duration rtt = base + queue;
    const Bytes bytes = std::max<Bytes>(rate.bytes_in(rtt), kMss);
    const Bytes per_ack = std::max<Bytes>(bytes / acks, kMss);
    for (uint32_t i = 0; i < acks; ++i) {
      now += rtt / acks;
      AckEvent ev;
      ev.now = now;
      ev.rtt = rtt;
      ev.min_rtt = base;
      ev.acked_bytes = per_ack;
      ev.acked_packets = static_cast<uint32_t>(per_ack / kMss);
      if (i == 0) {
        ev.lost_packets = lost;
        ev.lost_bytes = lost * kMss;
      }
      // What a pacer at `rate` keeps in flight over the round trip.
      ev.prior_in_flight = std::min(cc.cwnd(), bytes);
      ev.in_flight = ev.prior_in_flight - std::min(ev.prior_in_flight, per_ack);
      ev.round_start = i == 0;
      ev.round_count = round;
      ev.largest_acked_sent_time = now - rtt;
      ev.rate.delivered = per_ack;
      ev.rate.interval = rate.transfer_time(per_ack);
      cc.on_ack(ev);
    }
    ++round;
  }
};

// Runs `d` until the flow leaves startup and drain, offering at most `link`.
void settle(Rowan& r, Driver& d, BitsPerSec link, int rounds = 40) {
  for (int i = 0; i < rounds && r.phase() != Rowan::Phase::kSteady; ++i)
    d.round_trip(std::min(r.pacing_rate(), link), i > 6 ? Duration::from_ms(1) : Duration::zero());
  for (int i = 0; i < 4; ++i) d.round_trip(std::min(r.pacing_rate(), link), Duration::zero());
}

// A flow past startup on a `link` × `base` path, hinted with the true path.
struct Settled {
  rowan::test::FakeClock clock;
  std::unique_ptr<Rowan> r;
  Driver d;
  Settled(BitsPerSec link, Duration base) : r(make(clock, link, base)), d{*r, clock.now(), base} {
    settle(*r, d, link);
  }
};

TEST(Rowan, StartsFromHintsAndFindsTheLink) {
  rowan::test::FakeClock clock;
  const BitsPerSec link = BitsPerSec::from_gbps(10);
  const Duration base = Duration::from_ms(50);
  auto r = make(clock, link, base);
  EXPECT_EQ(r->phase(), Rowan::Phase::kStartup);
  EXPECT_GE(r->pacing_rate(), BitsPerSec::from_bps(link.bps() / 8)) << "starts at 1/8 of the link";
  Driver d{*r, clock.now(), base};
  settle(*r, d, link);
  EXPECT_EQ(r->phase(), Rowan::Phase::kSteady);
  EXPECT_EQ(r->mode(), Rowan::Mode::kDelay);
  EXPECT_NEAR(r->bw().gbps(), 10.0, 0.3);
  // cwnd is sized from the model: one BDP plus a few targets of headroom.
  const Bytes bdp = link.bytes_in(base);
  EXPECT_GE(r->cwnd(), bdp);
  EXPECT_LE(r->cwnd(), bdp * 5 / 4);
}

TEST(Rowan, AWrongHintCostsNoRate) {
  // The hinted link rate is half the real one, the hinted RTT 50 % off: the
  // model finds the path and nothing caps the rate at the hint.
  rowan::test::FakeClock clock;
  const BitsPerSec link = BitsPerSec::from_gbps(10);
  const Duration base = Duration::from_ms(20);
  auto r = make(clock, BitsPerSec::from_gbps(5), Duration::from_ms(30));
  Driver d{*r, clock.now(), base};
  settle(*r, d, link);
  for (int i = 0; i < 20; ++i) d.round_trip(std::min(r->pacing_rate(), link), Duration::zero());
  EXPECT_GE(r->pacing_rate().bps(), link.bps() * 95 / 100);
  EXPECT_NEAR(r->min_rtt().seconds(), base.seconds(), 1e-6) << "the measured RTT, not the hint";
}

TEST(Rowan, DelayMovesTheHeadroomNotTheRate) {
  const BitsPerSec link = BitsPerSec::from_gbps(10);
  const Duration base = Duration::from_ms(20);
  Settled f(link, base);
  Rowan* const r = f.r.get();
  Driver& d = f.d;
  ASSERT_EQ(r->mode(), Rowan::Mode::kDelay);
  ASSERT_GT(r->headroom(), Duration::zero());
  // A 2 ms standing queue (target ~0.25 ms) while the link still delivers:
  // the headroom above the BDP goes, the model's rate stays.
  for (int i = 0; i < 3; ++i) d.round_trip(link, Duration::from_ms(2));
  EXPECT_EQ(r->headroom(), Duration::zero());
  EXPECT_GE(r->rate().bps(), link.bps() * 95 / 100) << "delay never cuts below the model";
  EXPECT_GE(r->cwnd(), link.bytes_in(base)) << "at least the BDP in flight";
  // An empty queue: the headroom grows back, at most a few targets.
  for (int i = 0; i < 10; ++i) d.round_trip(std::min(r->pacing_rate(), link), Duration::zero());
  EXPECT_GT(r->headroom(), r->target());
  EXPECT_LE(r->headroom(), r->target() * 4);
  EXPECT_LE(r->cwnd(), link.bytes_in(base + r->target() * 4) + r->extra_acked() +
                           3 * r->send_quantum() + kMss);
}

TEST(Rowan, AQueueThatDoesNotAnswerSwitchesToTheModel) {
  // A buffer-filling competitor: the queue stays at 15 ms (three quarters
  // of the min RTT) whatever the flow does, and takes half the link. Delay
  // mode gives up its headroom, finds itself squeezed, and the model's rate
  // takes over instead of starving.
  const BitsPerSec link = BitsPerSec::from_gbps(1);
  const Duration base = Duration::from_ms(20);
  Settled f(link, base);
  Rowan* const r = f.r.get();
  Driver& d = f.d;
  ASSERT_EQ(r->mode(), Rowan::Mode::kDelay);
  const BitsPerSec share = BitsPerSec::from_mbps(500);
  for (int i = 0; i < 12; ++i)
    d.round_trip(std::min(r->pacing_rate(), share), Duration::from_ms(15));
  EXPECT_EQ(r->mode(), Rowan::Mode::kDelay) << "not before inelastic_rounds";
  for (int i = 0; i < 20; ++i)
    d.round_trip(std::min(r->pacing_rate(), share), Duration::from_ms(15));
  EXPECT_EQ(r->mode(), Rowan::Mode::kModel);
  for (int i = 0; i < 16; ++i)
    d.round_trip(std::min(r->pacing_rate(), share), Duration::from_ms(15));
  EXPECT_GE(r->pacing_rate().bps(), share.bps() * 7 / 10) << "holds its share";
  // The competitor leaves: the queue empties and the flow is back in delay mode.
  for (int i = 0; i < 64; ++i) d.round_trip(std::min(r->pacing_rate(), link), Duration::zero());
  EXPECT_EQ(r->mode(), Rowan::Mode::kDelay);
}

TEST(Rowan, ModelModeYieldsToLossAboveTwoPercentOnly) {
  // In model mode against a buffer-filler, 1 % loss a round (random loss)
  // leaves the rate alone; 5 % (a shallow buffer that the competitor
  // overflows) brings the model down, as BBRv2's loss threshold does.
  const BitsPerSec link = BitsPerSec::from_gbps(1);
  const Duration base = Duration::from_ms(20);
  Settled f(link, base);
  Rowan* const r = f.r.get();
  Driver& d = f.d;
  const BitsPerSec share = BitsPerSec::from_mbps(500);
  for (int i = 0; i < 32; ++i)
    d.round_trip(std::min(r->pacing_rate(), share), Duration::from_ms(15));
  ASSERT_EQ(r->mode(), Rowan::Mode::kModel);
  // A round at 500 Mbit/s and 35 ms carries ~1,560 packets.
  for (int i = 0; i < 8; ++i)
    d.round_trip(std::min(r->pacing_rate(), share), Duration::from_ms(15), /*lost=*/15);
  const BitsPerSec held = r->rate();
  EXPECT_GE(held.bps(), share.bps() * 9 / 10) << "1 % is not congestion";
  // The competitor overflows the buffer and takes more: without the loss
  // response the windowed-max rate would hold 500 Mbit/s for 10 rounds.
  const BitsPerSec squeezed = BitsPerSec::from_mbps(400);
  for (int i = 0; i < 4; ++i)
    d.round_trip(std::min(r->pacing_rate(), squeezed), Duration::from_ms(15), /*lost=*/80);
  EXPECT_LE(r->rate().bps(), squeezed.bps()) << "5 % a round is";
  EXPECT_EQ(r->mode(), Rowan::Mode::kModel);
}

TEST(Rowan, NoisyDelayDoesNotStarve) {
  // Every other round's least RTT is 3 ms late (a late host, jitter): noise
  // above any target takes the headroom, never the model's rate.
  const BitsPerSec link = BitsPerSec::from_gbps(1);
  const Duration base = Duration::from_ms(20);
  Settled f(link, base);
  Rowan* const r = f.r.get();
  Driver& d = f.d;
  for (int i = 0; i < 60; ++i) {
    d.round_trip(std::min(r->pacing_rate(), link),
                 i % 2 == 0 ? Duration::from_ms(3) : Duration::from_us(100));
    ASSERT_GE(r->rate().bps(), link.bps() * 9 / 10) << "round " << i;
    ASSERT_GE(r->cwnd(), link.bytes_in(base)) << "round " << i;
  }
}

TEST(Rowan, DrainsForTheMinRttOncePerHalfWindow) {
  // The RTT stays a few µs above the min RTT it found: the drain must still
  // come only once per half window (it refreshes the min RTT even when it
  // finds the same one), not every other round. The flow is told a link
  // twice the path's, so it does not carry the link and others may hold a
  // queue that its min RTT includes: it drains. Told the path's rate, it
  // carries the link and sees its queue at target: it never drains.
  const BitsPerSec link = BitsPerSec::from_gbps(1);
  const Duration base = Duration::from_ms(20);
  for (const bool carries : {false, true}) {
    rowan::test::FakeClock clock;
    auto r = make(clock, carries ? link : link.scaled(2.0), base);
    Driver d{*r, clock.now(), base};
    settle(*r, d, link);
    int drains = 0;
    int drain_rounds = 0;
    bool in_drain = false;
    const int rounds = 600;  // 12 s at 20 ms
    for (int i = 0; i < rounds; ++i) {
      d.round_trip(std::min(r->pacing_rate(), link), Duration::from_us(5));
      // A drain holds half a BDP in flight for 200 ms (10 rounds here).
      const bool now = r->cwnd() < link.bytes_in(base) * 6 / 10;
      if (now && !in_drain) ++drains;
      if (now) ++drain_rounds;
      in_drain = now;
    }
    if (carries) {
      EXPECT_EQ(drains, 0) << "alone on its path, the flow sees the empty queue";
    } else {
      EXPECT_GE(drains, 1);
      EXPECT_LE(drains, 3) << "one drain per 5 s";
      EXPECT_LE(drain_rounds, drains * 12) << "200 ms each";
    }
    EXPECT_GE(r->bw().bps(), link.bps() * 95 / 100) << "the model survives the drains";
  }
}

TEST(Rowan, IgnoresRandomLossCutsOnHeavyLoss) {
  const BitsPerSec link = BitsPerSec::from_gbps(10);
  const Duration base = Duration::from_ms(10);
  Settled f(link, base);
  Rowan* const r = f.r.get();
  Driver& d = f.d;
  const BitsPerSec before = r->pacing_rate();
  // One or two lost packets per round: no reaction.
  for (int i = 0; i < 20; ++i) d.round_trip(std::min(r->pacing_rate(), link), Duration::zero(), 2);
  EXPECT_GE(r->pacing_rate().bps(), before.bps() * 97 / 100);
  // A policer: 20 % of every round lost.
  const uint32_t pkts = static_cast<uint32_t>(link.bytes_in(base) / kMss);
  ASSERT_EQ(r->mode(), Rowan::Mode::kDelay);
  for (int i = 0; i < 3; ++i) d.round_trip(BitsPerSec::from_gbps(8), Duration::zero(), pkts / 5);
  EXPECT_LT(r->rate(), before);

  // Closed loop at 1 % random loss: utilization ≥ 0.95 × (1 − loss).
  rowan::test::FakeClock c0{TimePoint::zero()};
  const BitsPerSec l1 = BitsPerSec::from_gbps(1);
  const Duration rtt = Duration::from_ms(20);
  test::SimConfig sc{l1, l1.bytes_in(rtt) / 4, 0.01, kMss};
  test::MiniSim sim(sc, {test::SimFlowSpec{rtt}});
  sim.set_cc(0, make(c0, BitsPerSec::zero(), Duration::zero()));
  sim.run(at(Duration::from_s(4)), at(Duration::from_s(1)));
  EXPECT_GT(sim.utilization(), 0.95 * 0.99);
}

TEST(Rowan, ClosedLoopFillsTheLinkWithAShortQueue) {
  rowan::test::FakeClock clock{TimePoint::zero()};
  const BitsPerSec link = BitsPerSec::from_gbps(1);
  const Duration rtt = Duration::from_ms(10);
  test::SimConfig sc{link, link.bytes_in(rtt), 0, kMss};
  test::MiniSim sim(sc, {test::SimFlowSpec{rtt}});
  sim.set_cc(0, make(clock, BitsPerSec::zero(), Duration::zero()));
  sim.run(at(Duration::from_s(4)), at(Duration::from_s(2)));
  EXPECT_GT(sim.utilization(), 0.95);
  EXPECT_LE(sim.queue_delay_percentile(0.5), Duration::from_ms(5)) << "half a BDP at most";
}

TEST(Rowan, RtoHalvesTheModel) {
  const BitsPerSec link = BitsPerSec::from_gbps(1);
  const Duration base = Duration::from_ms(10);
  Settled f(link, base);
  Rowan* const r = f.r.get();
  Driver& d = f.d;
  const BitsPerSec bw = r->bw();
  const BitsPerSec rate = r->rate();
  r->on_rto(d.now);
  EXPECT_LE(r->bw().bps(), bw.bps() / 2 + 1);
  EXPECT_LE(r->rate().bps(), rate.bps() / 2 + 1);
}

TEST(Rowan, NoOverflowAt400GbitAnd200ms) {
  const BitsPerSec link = BitsPerSec::from_gbps(400);
  const Duration base = Duration::from_ms(200);
  Settled f(link, base);
  Rowan* const r = f.r.get();
  Driver& d = f.d;
  EXPECT_NEAR(r->bw().gbps(), 400.0, 8.0);
  // About 400 Gbit/s × 200 ms = 10 GB plus a few targets: no wrap.
  EXPECT_GT(r->cwnd(), 9'500'000'000ULL);
  EXPECT_LT(r->cwnd(), 40'000'000'000ULL);
  for (int i = 0; i < 4; ++i) d.round_trip(link, Duration::from_ms(20), 0, 4);
  EXPECT_EQ(r->headroom(), Duration::zero()) << "a 20 ms queue takes the headroom";
  EXPECT_GE(r->pacing_rate().bps(), link.bps() / 4);
}

TEST(Rowan, SmallestCornerKeepsSaneWindow) {
  // 100 Mbit/s × 0.1 ms: the BDP (1250 B) is below one packet.
  const BitsPerSec link = BitsPerSec::from_mbps(100);
  const Duration base = Duration::from_us(100);
  Settled f(link, base);
  Rowan* const r = f.r.get();
  EXPECT_GE(r->cwnd(), 4 * kMss);
  EXPECT_LE(r->cwnd(), 128 * kMss);
  EXPECT_GE(r->target(), link.transfer_time(2 * kMss));
}

TEST(Rowan, SendQuantumFollowsTheRtt) {
  rowan::test::FakeClock clock{TimePoint::zero()};
  Rowan::Config cfg;
  cfg.startup_fraction = 1.0;
  auto r = make(clock, BitsPerSec::from_mbps(100), Duration::from_ms(20), cfg);
  EXPECT_GE(r->send_quantum(), r->pacing_rate().bytes_in(Duration::from_us(900)));
  EXPECT_LE(r->send_quantum(), r->pacing_rate().bytes_in(Duration::from_us(1100)) + 2 * kMss);
  auto s = make(clock, BitsPerSec::from_gbps(10), Duration::from_us(200), cfg);
  EXPECT_LE(s->send_quantum(),
            std::max<Bytes>(s->pacing_rate().bytes_in(Duration::from_us(25)), 2 * kMss));
}

TEST(RowanParams, ParsesAndRejects) {
  rowan::test::FakeClock clock;
  PathHints hints;
  auto cc = Registry::create(
      "rowan", clock, hints,
      test::params({{"target_queue", "200us"}, {"gain_up", "0.25"}, {"probe_rounds", "10"}}));
  EXPECT_EQ(cc->name(), "rowan");
  EXPECT_THROW(Registry::create("rowan", clock, hints, test::params({{"target_queue", "0"}})),
               CcParamError);
  EXPECT_THROW(Registry::create("rowan", clock, hints, test::params({{"gain_up", "9"}})),
               CcParamError);
  EXPECT_THROW(Registry::create("rowan", clock, hints, test::params({{"min_rtt_window", "1ms"}})),
               CcParamError);
  EXPECT_THROW(Registry::create("rowan", clock, hints, test::params({{"probe_rounds", "1"}})),
               CcParamError);
  EXPECT_THROW(Registry::create("rowan", clock, hints, test::params({{"target", "1ms"}})),
               CcParamError);
  EXPECT_THROW(Registry::create("rowan", clock, hints, test::params({{"fs_range", "fast"}})),
               CcParamError);
}

}  // namespace
}  // namespace rowan::cc
