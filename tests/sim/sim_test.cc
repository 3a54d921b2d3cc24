// Small, fast rowan-sim scenarios with behavioural assertions. They run the
// real transport and congestion controllers (label: sim).
#include <gtest/gtest.h>
#include <algorithm>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "registry.h"
#include "sim.h"
#include "tools/paths.h"

namespace rowan::sim {
namespace {

Scenario base(const std::string& cc) {
  Scenario s;
  s.cc = cc;
  s.rate = BitsPerSec::from_mbps(100);
  s.rtt = Duration::from_ms(20);
  s.duration = Duration::from_s(10);
  s.warmup = Duration::from_s(2);
  return s;
}

// The scenario's algorithm, then bbr, on the same path.
std::pair<Result, Result> run_beside_bbr(Scenario s) {
  Result r = run(s);
  s.cc = "bbr";
  return {std::move(r), run(s)};
}

class PerAlgorithm : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (cc::Registry::find(GetParam()) == nullptr) GTEST_SKIP() << GetParam() << " not built";
  }
};

TEST_P(PerAlgorithm, SingleFlowFillsTheLink) {
  const Result r = run(base(GetParam()));
  EXPECT_GE(r.utilization, 0.90);
  EXPECT_GE(r.goodput_bps, 0.88e8);
  EXPECT_EQ(r.flows[0].rtos, 0U);
}

TEST_P(PerAlgorithm, TwoFlowsShareTheLink) {
  Scenario s = base(GetParam());
  s.flows = 2;
  s.stagger = Duration::from_s(1);
  s.duration = Duration::from_s(30);
  s.warmup = Duration::from_s(10);
  const Result r = run(s);
  EXPECT_GE(r.utilization, 0.85);
  EXPECT_GE(r.jain_index, 0.9) << r.flows[0].goodput_bps << " vs " << r.flows[1].goodput_bps;
}

TEST_P(PerAlgorithm, LossIsRepairedAndEveryByteArrivesInOrder) {
  Scenario s = base(GetParam());
  s.rate = BitsPerSec::from_mbps(50);
  s.loss = 0.01;
  s.verify = true;  // real bytes, checked at the receiver
  s.duration = Duration::from_s(5);
  s.warmup = Duration::zero();
  const Result r = run(s);
  EXPECT_GT(r.random_drops, 0U);
  EXPECT_GT(r.retransmit_ratio, 0.0);
  EXPECT_EQ(r.flows[0].verify_errors, 0U);
  EXPECT_GT(r.goodput_bps, 1e6);
}

INSTANTIATE_TEST_SUITE_P(Sim, PerAlgorithm,
                         ::testing::Values(std::string(cc::kDefaultAlgorithm), "cubic", "bbr"),
                         [](const auto& param_info) { return param_info.param; });

// Real-path noise that a clean simulator lacks, and on which the flagship
// once collapsed while meeting every clean simulated target (docs/cc-rowan.md,
// "Real paths"): a host that wakes up late (an event loop on a busy machine)
// and RTT jitter from the path. Measured at the commit that added these: with
// the old 25 us send quantum and the plain minimum-RTT filter, utilization was
// 0.14 (late host) and 0.26 / 0.28 (jitter and a late host, 20 / 80 ms).
TEST(Sim, RowanKeepsTheLinkBusyBehindALateHost) {
  Scenario s = base(std::string(cc::kDefaultAlgorithm));
  s.host_delay = Duration::from_ms(1);
  const Result r = run(s);
  EXPECT_GE(r.utilization, 0.9);
  EXPECT_EQ(r.flows[0].rtos, 0U);
}

TEST(Sim, RowanKeepsTheLinkBusyWithJitterAndALateHost) {
  for (const Duration rtt : {Duration::from_ms(20), Duration::from_ms(80)}) {
    Scenario s = base(std::string(cc::kDefaultAlgorithm));
    s.rtt = rtt;
    s.jitter = Duration::from_ms(1);
    s.host_delay = Duration::from_us(500);
    const auto [r, b] = run_beside_bbr(s);
    // The CC issue's per-cell targets, against bbr in the same run: the
    // link busy, and noise no reason to build a queue.
    EXPECT_GE(r.utilization, 0.9) << rtt.seconds();
    EXPECT_GE(r.utilization, 0.95 * b.utilization) << rtt.seconds();
    EXPECT_LE(r.queue_delay_p95_s, std::max(b.queue_delay_p95_s / 2, 1e-3)) << rtt.seconds();
  }
}

// Late hosts, as rowand sees them: its RTT samples come from the datagrams'
// receive times with the receiver's hold removed (kernel timestamps on the
// UDP backend, the rx burst's time on DPDK), so they hold none of the hosts'
// lateness. The flight still waits for it: the ACK held at the receiver and
// the sender's own late handling of it. Sized from the path's RTT alone, the
// flagship's cwnd left the link idle while the hosts were late, the delivery
// rate and the model followed it down, and it ended at 0.067 (200 Mbit/s),
// 0.075 (1 Gbit/s) and 0.008 (10 Gbit/s) of the link, where bbr's 2 BDPs
// kept 0.83, 0.37 and 0.01. Without receive timestamps the lateness is in
// the RTT, and a quantum capped at 64 KB (Linux's GSO size) gave a sender
// that woke late 0.5 ms of credit at 1 Gbit/s and 52 us at 10: 0.41 and
// 0.04 of the link.
TEST(Sim, RowanKeepsTheLinkBusyBehindLateHostsAtEveryRate) {
  for (const bool stamps : {false, true}) {
    for (const uint64_t mbps : {200U, 1000U, 10000U}) {
      Scenario s = base(std::string(cc::kDefaultAlgorithm));
      s.rate = BitsPerSec::from_mbps(mbps);
      s.rtt = Duration::from_ms(10);
      s.duration = Duration::from_s(6);
      s.host_delay = Duration::from_ms(2);
      s.host_offset = Duration::from_us(300);
      s.rx_stamps = stamps;
      const auto [r, b] = run_beside_bbr(s);
      const std::string cell = std::to_string(mbps) + " Mbit/s, stamps " + std::to_string(stamps);
      EXPECT_GE(r.utilization, 0.9) << cell;
      EXPECT_GE(r.utilization, 0.95 * b.utilization) << cell;
      EXPECT_EQ(r.flows[0].rtos, 0U) << cell;
    }
  }
}

// Hosts late by more than the path's RTT: 10 km between sites is ~0.1 ms,
// and two gateways sharing a CPU wake each other late by far more (the memif
// bench, docs/performance.md). The hosts' part of the loop is the flight's
// time outside the path, measured by Little's law over each round (the
// round's integral of bytes in flight over the bytes it delivered, less its
// mean RTT). Measured from the newest acked packet only, it missed the wait
// of every older packet an ACK covers (a receiver that wakes late by D acks
// D of data at once), and the ACK-aggregation allowance it subtracted was
// mostly cut away by the slack's cap: the flagship carried 0.64 and 0.39 of
// the link here where bbr carried 1.00 and 0.99.
TEST(Sim, RowanKeepsAShortPathBusyBehindHostsLateByMoreThanItsRtt) {
  for (const int late_us : {150, 300}) {
    Scenario s = base(std::string(cc::kDefaultAlgorithm));
    s.rate = BitsPerSec::from_mbps(10000);
    s.rtt = Duration::from_us(60);
    s.duration = Duration::from_ms(500);
    s.warmup = Duration::from_ms(100);
    s.host_delay = Duration::from_us(late_us);
    s.rx_stamps = true;
    s.buffer_bytes = 64ULL << 20;
    const auto [r, b] = run_beside_bbr(s);
    EXPECT_GE(r.utilization, 0.9) << late_us << " us";
    EXPECT_GE(r.utilization, 0.9 * b.utilization) << late_us << " us";
  }
}

// Jitter kept in FIFO order lays a floor under every RTT sample: at
// 10 Gbit/s × 10 ms with up to 3 ms of jitter each round's least RTT sits
// ~2 ms above the min RTT, which by Little's law the flight must cover and
// which looks like a standing queue. The flagship's drain test finds that it
// does not move and counts it in the flight (docs/cc-rowan.md, "The
// floor"); before, it carried 0.84 / 0.83 / 0.79 of the link at loss
// 0 / 0.1 / 1 % where bbr carried 1.00 / 0.99 / 0.98. The queue the floor's
// allowance builds stays a fraction of bbr's.
TEST(Sim, RowanCoversAJitterFloorItCannotDrain) {
  for (const double loss : {0.0, 0.001}) {
    Scenario s = base(std::string(cc::kDefaultAlgorithm));
    s.rate = BitsPerSec::from_mbps(10000);
    s.rtt = Duration::from_ms(10);
    s.duration = Duration::from_s(10);
    s.warmup = Duration::from_s(3);
    s.jitter = Duration::from_ms(3);
    s.loss = loss;
    const auto [r, b] = run_beside_bbr(s);
    EXPECT_GE(r.utilization, 0.9) << loss;
    EXPECT_GE(r.utilization, 0.95 * b.utilization) << loss;
    EXPECT_LE(r.queue_delay_p95_s, 0.75 * b.queue_delay_p95_s) << loss;
  }
}

// The testbed's shape in rowan-sim: 100 Mbit/s x 8 ms, rowan-wanem's FIFO
// jitter in both directions (2 ms each way here), hosts late by up to 300 us,
// receive timestamps.
Scenario testbed_jitter_path(const std::string& cc) {
  Scenario s = base(cc);
  s.rtt = Duration::from_ms(8);
  s.jitter = Duration::from_ms(2);
  s.ack_jitter = Duration::from_ms(2);
  s.host_delay = Duration::from_us(300);
  s.rx_stamps = true;
  return s;
}

// A flow alone on its path sees the empty queue whenever its own queue is at
// target, so it skips the min-RTT drain (half a BDP for 200 ms every 5 s),
// which cost it 1-2 % of the link: in these 12 s runs it carried 0.989 at
// 200 Mbit/s x 20 ms, clean, and 0.980 on the testbed's jittery path (now
// 0.999 and 0.999; bbr, whose PROBE_RTT at 10 s falls inside them, 0.970
// and 0.977).
TEST(Sim, RowanAloneOnItsPathSkipsTheMinRttDrain) {
  for (const bool jittery : {false, true}) {
    const std::string cc(cc::kDefaultAlgorithm);
    Scenario s = jittery ? testbed_jitter_path(cc) : base(cc);
    if (!jittery) s.rate = BitsPerSec::from_mbps(200);
    s.duration = Duration::from_s(12);
    const auto [r, b] = run_beside_bbr(s);
    EXPECT_GE(r.utilization, 0.99) << jittery;
    EXPECT_GE(r.utilization, 0.995 * b.utilization) << jittery;
    EXPECT_LE(r.queue_delay_p95_s, b.queue_delay_p95_s) << jittery;
  }
}

// rowan-wanem jitters both directions in FIFO order (±1 ms each on the
// testbed), so ACKs bunch too and every round's least RTT moves by about as
// much as the answer test's drain takes out: one test, or two in a row, says
// "floor" or "answers" at random, and with the floor uncounted the flagship
// held its flight under what the jitter needs (rowan-perf 0.81-0.89 of Linux
// BBR at 10 ms on the testbed). The floor is judged on the tests' running
// means (docs/cc-rowan.md, "The floor"). Here, the testbed's 100 Mbit/s ×
// 10 ms path with the hosts' late wake-ups and receive timestamps: before,
// 0.96 / 0.87 / 0.86 of the link at loss 0 / 0.1 / 1 % without late hosts
// and 0.92 / 0.80 / 0.77 with them, where bbr carried 0.99-1.00.
TEST(Sim, RowanCoversAJitterFloorInBothDirections) {
  for (const double loss : {0.0, 0.001, 0.01}) {
    Scenario s = testbed_jitter_path(std::string(cc::kDefaultAlgorithm));
    s.loss = loss;
    const auto [r, b] = run_beside_bbr(s);
    EXPECT_GE(r.utilization, 0.9) << loss;
    EXPECT_GE(r.utilization, 0.93 * b.utilization) << loss;
    EXPECT_LE(r.queue_delay_p95_s, 0.5 * b.queue_delay_p95_s) << loss;
  }
}

// Host TCP through a passthrough gateway (issue 5): the two-site testbed's
// gateways take ~0.3 ms more than the configured 20 ms base RTT (bench/
// cc-pt-trace: wire-to-wire 20.04-20.14 ms, the transport's minimum 20.32 ms)
// and wake late by up to a millisecond or so. With the hinted base RTT taken
// as the floor, that offset alone read as a standing queue (a lone bulk flow
// cut to 0.58 of the link), and host TCP's app-limited slow start left
// startup at 5-15 Mbit/s, where the noise then held it: utilization 0.016 in
// the last case here before the fix (testbed: 2.4-4 Mbit/s of 200).
TEST(Sim, RowanFillsTheLinkForHostTcpBehindGatewaysThatAddDelay) {
  struct Case {
    bool tcp;
    Duration host_delay, jitter;
  };
  for (const Case& c : {Case{false, Duration::zero(), Duration::zero()},
                        Case{true, Duration::zero(), Duration::zero()},
                        Case{true, Duration::from_ms(1), Duration::from_us(200)}}) {
    Scenario s = base(std::string(cc::kDefaultAlgorithm));
    s.rate = BitsPerSec::from_mbps(200);
    s.host_offset = Duration::from_us(300);
    s.tcp_source = c.tcp;
    s.host_delay = c.host_delay;
    s.jitter = c.jitter;
    // The queue, as a ratio in the same run: no more than the gateway's bbr
    // keeps on the same path (the flagship's model mode probes as bbr does).
    const auto [r, rb] = run_beside_bbr(s);
    EXPECT_GE(r.utilization, 0.9) << "tcp " << c.tcp << " host " << c.host_delay.seconds();
    EXPECT_GE(r.utilization, 0.95 * rb.utilization) << "tcp " << c.tcp;
    EXPECT_LE(r.queue_delay_p95_s, rb.queue_delay_p95_s) << "tcp " << c.tcp;
    EXPECT_EQ(r.flows[0].rtos, 0U);
  }
}

// The CC issue: a configured rate or base RTT wrong by 50 % either way
// costs the flagship no more than 5 % of goodput. The hints seed its start,
// first RTT and flow-scaling capacity; the model takes over from there.
// The flagship on 200 Mbit/s × 20 ms with 1 ms jitter and `loss`.
Scenario jittery(double loss) {
  Scenario s = base(std::string(cc::kDefaultAlgorithm));
  s.rate = BitsPerSec::from_mbps(200);
  s.jitter = Duration::from_ms(1);
  s.loss = loss;
  return s;
}

TEST(Sim, RowanShrugsOffAHintWrongByHalf) {
  const Scenario s = jittery(0.001);
  const Result right = run(s);
  for (const double f : {0.5, 1.5}) {
    Scenario sr = s;
    sr.hint_rate = f;
    EXPECT_GE(run(sr).utilization, 0.95 * right.utilization) << "rate hint x" << f;
    Scenario st = s;
    st.hint_rtt = f;
    EXPECT_GE(run(st).utilization, 0.95 * right.utilization) << "rtt hint x" << f;
  }
}

// The same with rowand's own window sizing (send buffer and receive window
// 2 × the hinted BDP): the windows grow to what the path needs (loss
// recovery holds data behind holes; a hint short by half halves them),
// so that neither a lossy path nor a wrong hint costs more than 5 % of what
// windows that never limit give.
TEST(Sim, RowandWindowsGrowToWhatTheLossyPathNeeds) {
  const Scenario s = jittery(0.01);
  const Result unlimited = run(s);
  for (const double f : {0.5, 1.0}) {
    Scenario w = s;
    w.window_bdp = 2.0;
    w.hint_rate = f;
    const Result r = run(w);
    EXPECT_GE(r.utilization, 0.95 * unlimited.utilization) << "rate hint x" << f;
    EXPECT_GE(r.flows[0].send_window_growths + r.flows[0].recv_window_growths, 1U);
  }
}

TEST(Sim, IsDeterministic) {
  Scenario s = base("cubic");
  s.loss = 0.001;
  s.flows = 2;
  s.duration = Duration::from_s(3);
  Result a = run(s), b = run(s);
  a.wall_s = b.wall_s = 0;
  EXPECT_EQ(to_json(s, a), to_json(s, b));
  s.seed = 2;
  Result c = run(s);
  c.wall_s = 0;
  EXPECT_NE(to_json(s, a), to_json(s, c));
}

TEST(Sim, TailDropBoundsTheQueue) {
  // CUBIC fills any buffer: queue delay can never exceed buffer / rate.
  Scenario s = base("cubic");
  s.buffer_bdp = 0.5;  // 125 kB at 100 Mbit/s = 10 ms
  const Result r = run(s);
  EXPECT_GT(r.tail_drops, 0U);
  EXPECT_LE(r.queue_delay_p99_s, 0.0105);
  EXPECT_GT(r.queue_delay_p99_s, 0.002);
}

TEST(Sim, RateStepIsFollowed) {
  Scenario s = base("cubic");
  s.rate_steps.emplace_back(Duration::from_s(5), BitsPerSec::from_mbps(50));
  const Result r = run(s);
  // Measured 2..10 s: 3 s at 100 Mbit/s then 5 s at 50 Mbit/s = 68.75 Mbit/s.
  EXPECT_LT(r.goodput_bps, 0.70e8);
  EXPECT_GT(r.goodput_bps, 0.58e8);
  EXPECT_GT(r.utilization, 0.85);  // against the integrated capacity
}

TEST(Sim, GilbertElliottLossHasTheStationaryRate) {
  Scenario s = base(std::string(cc::kDefaultAlgorithm));
  s.ge_p_gb = 0.0005;
  s.ge_p_bg = 0.3;  // bursts of 3.3 packets on average, all lost
  s.duration = Duration::from_s(20);
  const Result r = run(s);
  const double expected = 0.0005 / (0.0005 + 0.3);
  const double got = static_cast<double>(r.random_drops) / static_cast<double>(r.packets);
  EXPECT_NEAR(got, expected, expected * 0.4);
}

// The flagship's fairness cells (bench/cc-fairness, docs/cc-rowan.md): delay
// mode's headroom and probe excess are bytes at the link's capacity, an
// additive increase that is the same for every flow. When they were bytes at
// the flow's own rate (a multiplicative increase) 8 staggered flows ended at
// Jain 0.36 and a 10 ms flow got 1/2.06 of a 100 ms flow's rate.
TEST(Sim, RowanFlowsConvergeToEqualShares) {
  Scenario s = base(std::string(cc::kDefaultAlgorithm));
  s.rate = BitsPerSec::from_mbps(200);
  s.flows = 8;
  s.stagger = Duration::from_s(1);
  s.duration = Duration::from_s(40);
  s.warmup = Duration::from_s(18);
  const Result r = run(s);
  EXPECT_GE(r.jain_index, 0.95);
  EXPECT_GE(r.utilization, 0.9);
}

// 16 staggered flows keep equal shares at two datagram sizes. A delay-mode
// probe that found more bandwidth probed again at once with twice the
// excess even above target, where the growth was taken from the others'
// share of the queue: one flow ran away to 70 of 200 Mbit/s and squeezed the
// rest into model mode (Jain 0.84 at 1500 B and 0.53 at 1200 B).
TEST(Sim, RowanSixteenFlowsKeepEqualShares) {
  for (const uint32_t mss : {1500U, 1200U}) {
    Scenario s = base(std::string(cc::kDefaultAlgorithm));
    s.rate = BitsPerSec::from_mbps(200);
    s.mss = mss;
    s.flows = 16;
    s.stagger = Duration::from_s(1);
    s.duration = Duration::from_s(46);
    s.warmup = Duration::from_s(26);
    const Result r = run(s);
    EXPECT_GE(r.jain_index, 0.95) << mss << " B";
    EXPECT_GE(r.utilization, 0.9) << mss << " B";
  }
}

TEST(Sim, RowanSharesAcrossATenfoldRttSpread) {
  Scenario s = base(std::string(cc::kDefaultAlgorithm));
  s.rate = BitsPerSec::from_mbps(200);
  s.flows = 2;
  s.flow_rtts = {Duration::from_ms(10), Duration::from_ms(100)};
  s.duration = Duration::from_s(40);
  s.warmup = Duration::from_s(10);
  const Result r = run(s);
  ASSERT_EQ(r.flows.size(), 2U);
  const double hi = std::max(r.flows[0].goodput_bps, r.flows[1].goodput_bps);
  const double lo = std::min(r.flows[0].goodput_bps, r.flows[1].goodput_bps);
  EXPECT_LE(hi, 2.0 * lo) << r.flows[0].goodput_bps << " (10 ms) vs " << r.flows[1].goodput_bps;
}

TEST(Sim, PerFlowRttsAndAlgorithms) {
  Scenario s = base("cubic");
  s.flows = 2;
  s.flow_rtts = {Duration::from_ms(10), Duration::from_ms(40)};
  s.flow_ccs = {"cubic", std::string(cc::kDefaultAlgorithm)};
  const Result r = run(s);
  ASSERT_EQ(r.flows.size(), 2U);
  EXPECT_EQ(r.flows[1].cc, cc::kDefaultAlgorithm);
  EXPECT_NEAR(r.flows[0].min_rtt_s, 0.010, 0.002);
  EXPECT_NEAR(r.flows[1].min_rtt_s, 0.040, 0.002);
}

TEST(Sim, CliPrintsItsVersion) {
  const std::string cmd = test::binary_dir() + "/tools/rowan-sim/rowan-sim --version";
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  ASSERT_TRUE(p);
  char buf[256] = {};
  ASSERT_NE(fgets(buf, sizeof buf, p.get()), nullptr);
  EXPECT_EQ(std::string(buf).rfind("rowan-sim ", 0), 0U) << buf;
}

TEST(Sim, CliPrintsTheJsonContract) {
  const std::string bin = test::binary_dir() + "/tools/rowan-sim/rowan-sim";
  const std::string series = test::binary_dir() + "/sim_test_series.csv";
  const std::string cmd = bin +
                          " --cc cubic --rate 100mbit --rtt 10ms --loss 0.1% --buffer 1bdp "
                          "--flows 2 --stagger 1s --duration 4s --seed 3 --json --series " +
                          series;
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  ASSERT_TRUE(p);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p.get())) out.append(buf, n);
  const auto j = nlohmann::json::parse(out);
  for (const char* k : {"capacity_bps", "utilization", "goodput_bps", "queue_delay_p50_s",
                        "queue_delay_p95_s", "queue_delay_p99_s", "jain_index", "retransmit_ratio"})
    EXPECT_TRUE(j.contains(k) && j[k].is_number()) << k;
  EXPECT_EQ(j["capacity_bps"].get<double>(), 1e8);
  ASSERT_EQ(j["flows"].size(), 2U);
  EXPECT_EQ(j["flows"][1]["id"], 1);
  EXPECT_EQ(j["flows"][1]["start_s"], 1.0);
  EXPECT_GT(j["flows"][1]["goodput_bps"].get<double>(), 0);
  FILE* f = std::fopen(series.c_str(), "r");
  ASSERT_NE(f, nullptr);
  int lines = 0;
  while (std::fgets(buf, sizeof buf, f) != nullptr) ++lines;
  std::fclose(f);
  EXPECT_GT(lines, 300);  // 10 ms samples × 4 s, two flows
  std::remove(series.c_str());
}

// Adaptive FEC (the transport's default) against selective repeat alone on
// 1 MiB request-response at 50 ms: with loss it rebuilds most lost packets,
// so far fewer are retransmitted and no message waits as long; on a clean
// path it sends no repair at all.
TEST(Sim, FecRebuildsLossesAndSendsNoRepairOnACleanPath) {
  Scenario s = base(std::string(cc::kDefaultAlgorithm));
  s.rate = BitsPerSec::from_gbps(1);
  s.rtt = Duration::from_ms(50);
  s.mss = 1500;
  s.rr_request = Bytes{1} << 20;
  s.duration = Duration::from_s(20);
  s.loss = 0.01;
  ASSERT_EQ(s.fec, transport::FecMode::kAdaptive);  // the default is what is measured
  const Result fec = run(s);
  Scenario off = s;
  off.fec = transport::FecMode::kOff;
  const Result plain = run(off);
  ASSERT_GT(fec.messages, 100U);
  ASSERT_GT(plain.messages, 100U);
  EXPECT_GT(fec.repair_packets, 0U);
  EXPECT_GT(fec.recovered, 0U);
  EXPECT_EQ(plain.repair_packets, 0U);
  EXPECT_LT(fec.retx_packets * 10, plain.retx_packets);
  EXPECT_LT(fec.rr_p99_s, plain.rr_p99_s);
  EXPECT_LT(fec.rr_mean_s, plain.rr_mean_s);
  // Within the cap: repair bytes at most 15 % of the rest.
  EXPECT_LE(static_cast<double>(fec.repair_bytes),
            0.15 * static_cast<double>(fec.wire_bytes - fec.repair_bytes));

  Scenario clean = s;
  clean.loss = 0;
  const Result c = run(clean);
  EXPECT_GT(c.messages, 100U);
  EXPECT_EQ(c.repair_packets, 0U);
  EXPECT_EQ(c.recovered, 0U);
}

}  // namespace
}  // namespace rowan::sim
