// cc-mini-bench: runs one scenario of the CC unit tests' bottleneck model
// (mini_sim.h) from the command line, for tuning the algorithms before and
// beside tools/rowan-sim. Not a test; prints one line of results.
//
//   cc-mini-bench --cc rowan --rate 10 --rtt 100 --loss 0.01 --buffer 1
//                 --flows 2 [--rtt-ratio 10] [--stagger 1] [--duration 20]
//                 [--mss 8000] [--ack-every 1] [--mix cubic] [--hints 1]
//                 [--param k=v]...
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mini_sim.h"
#include "registry.h"
#include "tools/fake_clock.h"

namespace simm = rowan::cc::test;
using namespace rowan;      // NOLINT
using namespace rowan::cc;  // NOLINT

int main(int argc, char** argv) {
  std::string algo = "rowan", mix;
  double rate_gbps = 1, rtt_ms = 10, loss = 0, buffer_bdp = 1, duration = 10, stagger = 0;
  double rtt_ratio = 1, measure_from = -1, trace = 0;
  int flows = 1, ack_every = 1;
  Bytes mss = 1400;
  bool hints_on = true, series = false;
  CcParams params;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--cc")
      algo = v;
    else if (k == "--mix")
      mix = v;
    else if (k == "--rate")
      rate_gbps = std::atof(v);
    else if (k == "--rtt")
      rtt_ms = std::atof(v);
    else if (k == "--loss")
      loss = std::atof(v);
    else if (k == "--buffer")
      buffer_bdp = std::atof(v);
    else if (k == "--duration")
      duration = std::atof(v);
    else if (k == "--measure-from")
      measure_from = std::atof(v);
    else if (k == "--trace")
      trace = std::atof(v);
    else if (k == "--stagger")
      stagger = std::atof(v);
    else if (k == "--rtt-ratio")
      rtt_ratio = std::atof(v);
    else if (k == "--flows")
      flows = std::atoi(v);
    else if (k == "--ack-every")
      ack_every = std::atoi(v);
    else if (k == "--mss")
      mss = static_cast<Bytes>(std::atoll(v));
    else if (k == "--hints")
      hints_on = std::atoi(v) != 0;
    else if (k == "--series")
      series = std::atoi(v) != 0;
    else if (k == "--param") {
      const char* eq = std::strchr(v, '=');
      if (eq == nullptr) return 2;
      params.set(std::string(v, eq), std::string(eq + 1));
    } else {
      std::fprintf(stderr, "unknown flag %s\n", k.c_str());
      return 2;
    }
  }
  const BitsPerSec rate = BitsPerSec::from_bps(static_cast<uint64_t>(rate_gbps * 1e9));
  const Duration rtt = Duration::from_seconds(rtt_ms / 1000);
  simm::SimConfig cfg;
  cfg.rate = rate;
  cfg.buffer = std::max<Bytes>(
      static_cast<Bytes>(buffer_bdp * static_cast<double>(rate.bytes_in(rtt))), 2 * mss);
  cfg.loss = loss;
  cfg.mss = mss;
  cfg.ack_every = static_cast<uint32_t>(ack_every);
  cfg.sample_interval = Duration::from_seconds(std::max(0.1, rtt_ms / 1000 * 10));
  std::vector<simm::SimFlowSpec> specs;
  for (int i = 0; i < flows; ++i) {
    simm::SimFlowSpec s;
    s.rtt = (i >= (flows + 1) / 2 && rtt_ratio != 1) ? rtt.scaled(rtt_ratio) : rtt;
    if (flows == 1) s.rtt = rtt;
    s.start = TimePoint::from_ns(Duration::from_seconds(stagger * i).ns());
    specs.push_back(s);
  }
  simm::MiniSim sim(cfg, specs);
  rowan::test::FakeClock clock{TimePoint::zero()};
  for (int i = 0; i < flows; ++i) {
    PathHints h;
    h.mss = mss;
    if (hints_on) {
      h.link_rate = rate;
      h.base_rtt = specs[static_cast<size_t>(i)].rtt;
    }
    clock.set(specs[static_cast<size_t>(i)].start + Duration::from_ns(1 + i));
    const std::string name = (!mix.empty() && i % 2 == 1) ? mix : algo;
    CcParams p = name == algo ? params : CcParams();
    sim.set_cc(static_cast<size_t>(i), Registry::create(name, clock, h, p));
  }
  const double mf = measure_from >= 0
                        ? measure_from
                        : std::min(duration / 2, stagger * (flows - 1) + duration / 3);
  if (trace > 0) {
    for (double t = trace; t < duration; t += trace) {
      sim.run(TimePoint::from_ns(Duration::from_seconds(t).ns()),
              TimePoint::from_ns(Duration::from_seconds(mf).ns()));
      std::printf("t=%.3f q=%.3fms", t, sim.queue_now().seconds() * 1e3);
      for (int i = 0; i < flows; ++i) {
        auto& c = sim.cc(static_cast<size_t>(i));
        std::printf(" | %.3fG w=%.0f", c.pacing_rate().gbps(), static_cast<double>(c.cwnd()) / mss);
      }
      std::printf("\n");
    }
  }
  sim.run(TimePoint::from_ns(Duration::from_seconds(duration).ns()),
          TimePoint::from_ns(Duration::from_seconds(mf).ns()));
  std::printf(
      "cc=%s rate=%.3gG rtt=%.3gms loss=%.4g buf=%.3gBDP flows=%d util=%.4f p50q=%.3fms "
      "p95q=%.3fms p95q/rtt=%.4f jain=%.4f",
      algo.c_str(), rate_gbps, rtt_ms, loss, buffer_bdp, flows, sim.utilization(),
      sim.queue_delay_percentile(0.5).seconds() * 1e3,
      sim.queue_delay_percentile(0.95).seconds() * 1e3,
      sim.queue_delay_percentile(0.95).seconds() * 1e3 / rtt_ms, sim.jain());
  std::printf(" tput=");
  for (int i = 0; i < flows; ++i)
    std::printf("%s%.3f", i ? "," : "", sim.throughput_gbps(static_cast<size_t>(i)));
  uint64_t rtos = 0;
  for (int i = 0; i < flows; ++i) rtos += sim.stats(static_cast<size_t>(i)).rtos;
  std::printf(" rtos=%llu\n", static_cast<unsigned long long>(rtos));
  if (series) {
    for (int i = 0; i < flows; ++i) {
      std::printf("flow%d:", i);
      for (Bytes b : sim.stats(static_cast<size_t>(i)).series)
        std::printf(" %.2f", static_cast<double>(b) * 8 / cfg.sample_interval.seconds() / 1e9);
      std::printf("\n");
    }
  }
  return 0;
}
