#include "bbr/bbr.h"

#include <gtest/gtest.h>

#include "cc_test_util.h"
#include "mini_sim.h"
#include "registry.h"
#include "tools/fake_clock.h"

namespace rowan::cc {
namespace {

constexpr Bytes kMss = 1400;

std::unique_ptr<Bbr> make_bbr(const Clock& clock, Bbr::Config cfg = {}) {
  PathHints hints{BitsPerSec::zero(), Duration::zero(), kMss};
  return std::make_unique<Bbr>(clock, hints, cfg);
}

// One flow through a 100 Mbit/s, 20 ms bottleneck with a 1-BDP buffer.
struct BbrSim {
  rowan::test::FakeClock clock{TimePoint::zero()};
  test::SimConfig cfg;
  test::MiniSim sim;
  Bbr* bbr;
  explicit BbrSim(double loss = 0, Duration rtt = Duration::from_ms(20))
      : cfg{BitsPerSec::from_mbps(100), BitsPerSec::from_mbps(100).bytes_in(rtt), loss, kMss},
        sim(cfg, {test::SimFlowSpec{rtt}}) {
    auto b = make_bbr(clock);
    bbr = b.get();
    sim.set_cc(0, std::move(b));
  }
};

TEST(Bbr, StartupDrainProbeBwAndModelEstimates) {
  BbrSim s;
  EXPECT_EQ(s.bbr->mode(), Bbr::Mode::kStartup);
  EXPECT_NEAR(s.bbr->pacing_gain(), 2.885, 1e-9);
  // Startup doubles per round; 100 Mbit/s × 20 ms = 179 packets: ~5 rounds,
  // plus 3 rounds to detect the plateau.
  s.sim.run(TimePoint::from_ns(Duration::from_ms(400).ns()));
  EXPECT_TRUE(s.bbr->full_bw_reached());
  EXPECT_EQ(s.bbr->mode(), Bbr::Mode::kProbeBw);
  s.sim.run(TimePoint::from_ns(Duration::from_s(3).ns()),
            TimePoint::from_ns(Duration::from_s(1).ns()));
  EXPECT_NEAR(s.bbr->btl_bw().gbps(), 0.1, 0.1 * 0.05);
  EXPECT_GE(s.bbr->min_rtt(), Duration::from_ms(20));
  EXPECT_LE(s.bbr->min_rtt(), Duration::from_ms(21));
  EXPECT_GT(s.sim.utilization(), 0.95);
  // cwnd ≈ 2·BDP + allowances, in-flight capped there.
  const Bytes bdp = BitsPerSec::from_mbps(100).bytes_in(Duration::from_ms(20));
  EXPECT_GE(s.bbr->cwnd(), 2 * bdp);
  EXPECT_LE(s.bbr->cwnd(),
            2 * bdp + s.bbr->extra_acked() + 3 * s.bbr->send_quantum() + 2 * kMss + kMss);
}

TEST(Bbr, ProbeBwCyclesGains) {
  BbrSim s;
  s.sim.run(TimePoint::from_ns(Duration::from_ms(500).ns()));
  ASSERT_EQ(s.bbr->mode(), Bbr::Mode::kProbeBw);
  bool saw_up = false, saw_down = false, saw_cruise = false;
  for (int i = 1; i <= 60; ++i) {
    s.sim.run(TimePoint::from_ns(Duration::from_ms(500 + 5 * i).ns()));
    const double g = s.bbr->pacing_gain();
    saw_up |= g == 1.25;
    saw_down |= g == 0.75;
    saw_cruise |= g == 1.0;
  }
  EXPECT_TRUE(saw_up);
  EXPECT_TRUE(saw_down);
  EXPECT_TRUE(saw_cruise);
}

TEST(Bbr, ProbeRttEveryTenSeconds) {
  BbrSim s;
  s.sim.run(TimePoint::from_ns(Duration::from_s(10).ns()));
  EXPECT_EQ(s.bbr->mode(), Bbr::Mode::kProbeBw);
  // The min-RTT sample (taken in the first round) expires after 10 s: with a
  // full pipe no lower RTT is seen, so PROBE_RTT begins shortly after.
  bool saw_probe_rtt = false;
  Bytes min_cwnd_seen = UINT64_MAX;
  TimePoint entered, left;
  for (int i = 1; i <= 200; ++i) {
    const TimePoint t =
        TimePoint::from_ns(Duration::from_s(10).ns() + Duration::from_ms(int64_t{5} * i).ns());
    s.sim.run(t);
    if (s.bbr->mode() == Bbr::Mode::kProbeRtt) {
      if (!saw_probe_rtt) entered = t;
      saw_probe_rtt = true;
      min_cwnd_seen = std::min(min_cwnd_seen, s.bbr->cwnd());
    } else if (saw_probe_rtt && left.is_zero()) {
      left = t;
    }
  }
  ASSERT_TRUE(saw_probe_rtt);
  EXPECT_EQ(min_cwnd_seen, 4 * kMss);
  ASSERT_FALSE(left.is_zero());
  EXPECT_GE(left - entered, Duration::from_ms(200));
  EXPECT_LE(left - entered, Duration::from_ms(300));
  EXPECT_EQ(s.bbr->mode(), Bbr::Mode::kProbeBw);
}

TEST(Bbr, IgnoresRandomLoss) {
  BbrSim s(0.01);
  s.sim.run(TimePoint::from_ns(Duration::from_s(5).ns()),
            TimePoint::from_ns(Duration::from_s(1).ns()));
  EXPECT_GT(s.sim.utilization(), 0.9 * 0.99);
}

TEST(Bbr, MinRttAndBwFromEventsDirectly) {
  rowan::test::FakeClock clock;
  auto b = make_bbr(clock);
  test::AckDriver d(*b, kMss, clock.now());
  const BitsPerSec rate = BitsPerSec::from_gbps(10);
  d.round_trip(Duration::from_ms(50), rate);
  d.round_trip(Duration::from_ms(40), rate);
  d.round_trip(Duration::from_ms(45), BitsPerSec::from_gbps(5));
  EXPECT_EQ(b->min_rtt(), Duration::from_ms(40));
  EXPECT_NEAR(b->btl_bw().gbps(), 10.0, 0.01);
  // A larger app-limited sample still raises the max; a smaller one is ignored.
  d.ack(1, Duration::from_ms(45), BitsPerSec::from_gbps(20), false, 0, true);
  EXPECT_NEAR(b->btl_bw().gbps(), 20.0, 0.01);
  // The windowed max forgets after 10 rounds of lower samples.
  for (int i = 0; i < 12; ++i) d.round_trip(Duration::from_ms(45), BitsPerSec::from_gbps(8));
  EXPECT_NEAR(b->btl_bw().gbps(), 8.0, 0.01);
}

TEST(Bbr, NoOverflowAt400GbitAnd200ms) {
  rowan::test::FakeClock clock;
  auto b = make_bbr(clock);
  test::AckDriver d(*b, kMss, clock.now());
  const BitsPerSec rate = BitsPerSec::from_gbps(400);
  for (int i = 0; i < 40; ++i) d.round_trip(Duration::from_ms(200), rate, 4);
  const Bytes bdp = rate.bytes_in(Duration::from_ms(200));  // 10 GB
  EXPECT_EQ(bdp, 10'000'000'000ULL);
  EXPECT_NEAR(static_cast<double>(b->bdp(1.0)), static_cast<double>(bdp), 1e-6 * 1e10);
  EXPECT_TRUE(b->full_bw_reached()) << "constant samples: plateau after 3 rounds";
  EXPECT_NEAR(b->pacing_rate().gbps(), 400 * b->pacing_gain() * 0.99, 0.001);
  EXPECT_GT(b->cwnd(), bdp);
  EXPECT_LE(b->cwnd(), 2 * bdp + b->extra_acked() + 3 * b->send_quantum() + 2 * kMss);
}

TEST(Bbr, RtoThenRestoresCwnd) {
  BbrSim s;
  s.sim.run(TimePoint::from_ns(Duration::from_s(1).ns()));
  const Bytes before = s.bbr->cwnd();
  s.bbr->on_rto(TimePoint::from_ns(Duration::from_s(1).ns()));
  EXPECT_LT(s.bbr->cwnd(), 4 * kMss);
  s.sim.run(TimePoint::from_ns(Duration::from_s(2).ns()));
  EXPECT_GE(s.bbr->cwnd(), before * 9 / 10);
}

TEST(BbrParams, ParsesAndRejects) {
  rowan::test::FakeClock clock;
  PathHints hints;
  auto cc = Registry::create("bbr", clock, hints,
                             test::params({{"cwnd_gain", "2.5"}, {"probe_rtt_interval", "5s"}}));
  EXPECT_EQ(cc->name(), "bbr");
  EXPECT_THROW(Registry::create("bbr", clock, hints, test::params({{"cwnd_gain", "9"}})),
               CcParamError);
  EXPECT_THROW(Registry::create("bbr", clock, hints, test::params({{"probe_rtt_interval", "1ms"}})),
               CcParamError);
  EXPECT_THROW(Registry::create("bbr", clock, hints, test::params({{"lt_bw", "1"}})), CcParamError);
}

}  // namespace
}  // namespace rowan::cc
