// rowan-sim: the transport and congestion control over a simulated
// bottleneck. CLI contract: docs/rowan-sim.md.
#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/resource.h>

#include "cc_params.h"
#include "registry.h"
#include "sim.h"

#include "rowan/build_version.h"

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) break;
    start = p + 1;
  }
  return out;
}

double parse_percent(const std::string& t) {
  if (!t.empty() && t.back() == '%') return std::stod(t.substr(0, t.size() - 1)) / 100.0;
  return std::stod(t);
}

// "1m" (10^6), "1MiB" (2^20), "64k", "64KiB", "500000" → bytes.
rowan::Bytes parse_size(const std::string& t) {
  std::string v = t;
  for (auto& c : v) c = static_cast<char>(std::tolower(c));
  double mult = 1;
  if (v.size() > 3 && v.substr(v.size() - 2) == "ib") {
    const char u = v[v.size() - 3];
    mult = u == 'k' ? 1024.0 : u == 'm' ? 1048576.0 : u == 'g' ? 1073741824.0 : 0;
    v.resize(v.size() - 3);
  } else if (!v.empty() && (v.back() == 'k' || v.back() == 'm' || v.back() == 'g')) {
    mult = v.back() == 'k' ? 1e3 : v.back() == 'm' ? 1e6 : 1e9;
    v.pop_back();
  }
  if (mult == 0 || v.empty()) throw std::invalid_argument("bad size: " + t);
  const double b = std::stod(v) * mult;
  if (b < 1) throw std::invalid_argument("size must be > 0: " + t);
  return static_cast<rowan::Bytes>(b);
}

// "1bdp", "0.25bdp" → multiple of BDP; "500000", "64k", "2m", "1g" → bytes.
void parse_buffer(const std::string& t, rowan::sim::Scenario& s) {
  std::string v = t;
  for (auto& c : v) c = static_cast<char>(std::tolower(c));
  if (v.size() > 3 && v.substr(v.size() - 3) == "bdp") {
    s.buffer_bdp = std::stod(v.substr(0, v.size() - 3));
    if (s.buffer_bdp <= 0) throw std::invalid_argument("buffer must be > 0");
    s.buffer_bytes = 0;
    return;
  }
  double mult = 1;
  if (!v.empty() && (v.back() == 'k' || v.back() == 'm' || v.back() == 'g')) {
    mult = v.back() == 'k' ? 1e3 : v.back() == 'm' ? 1e6 : 1e9;
    v.pop_back();
  } else if (v.size() > 1 && v.back() == 'b') {
    v.pop_back();
  }
  const double b = std::stod(v) * mult;
  if (b < 1) throw std::invalid_argument("buffer must be > 0");
  s.buffer_bytes = static_cast<rowan::Bytes>(b);
}

// "I@T[+D]": path I down at T, for D (until the end without +D).
rowan::sim::Outage parse_outage(const std::string& t) {
  const size_t at = t.find('@');
  if (at == std::string::npos || at == 0) throw std::invalid_argument("--path-down I@T[+D]: " + t);
  rowan::sim::Outage o;
  o.path = std::stoi(t.substr(0, at));
  const std::string rest = t.substr(at + 1);
  const size_t plus = rest.find('+');
  o.at = rowan::cc::parse_duration(rest.substr(0, plus));
  if (plus != std::string::npos) o.duration = rowan::cc::parse_duration(rest.substr(plus + 1));
  return o;
}

// Comma lists of --rate, --rtt and --loss, one value per path (a single
// value applies to every path); --paths N repeats them to N paths.
void parse_paths(const std::string& rate, const std::string& rtt, const std::string& loss,
                 int paths, rowan::sim::Scenario& s) {
  const auto rates = split(rate, ','), rtts = split(rtt, ','), losses = split(loss, ',');
  size_t n = std::max({rates.size(), rtts.size(), losses.size()});
  for (const auto* v : {&rates, &rtts, &losses})
    if (v->size() != 1 && v->size() != n)
      throw std::invalid_argument("--rate, --rtt and --loss lists must have one value or " +
                                  std::to_string(n));
  if (paths > 1) {
    if (n != 1 && static_cast<size_t>(paths) != n)
      throw std::invalid_argument("--paths disagrees with the lists' length");
    n = static_cast<size_t>(paths);
  }
  auto at = [](const std::vector<std::string>& v, size_t i) { return v.size() == 1 ? v[0] : v[i]; };
  s.rate = rowan::cc::parse_rate(at(rates, 0));
  s.rtt = rowan::cc::parse_duration(at(rtts, 0));
  s.loss = parse_percent(at(losses, 0));
  if (n == 1 && paths < 1) return;
  if (n == 1 && paths == 1) return;
  for (size_t i = 0; i < n; ++i)
    s.paths.push_back(rowan::sim::PathSpec{rowan::cc::parse_rate(at(rates, i)),
                                           rowan::cc::parse_duration(at(rtts, i)),
                                           parse_percent(at(losses, i))});
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "rowan-sim: the real rowan transport and congestion control over a simulated bottleneck"};
  app.set_version_flag("--version", std::string("rowan-sim ") + ROWAN_BUILD_VERSION);
  rowan::sim::Scenario s;
  s.cc = std::string(rowan::cc::kDefaultAlgorithm);
  std::string rate = "10gbit", rtt = "40ms", loss = "0", buffer = "1bdp", stagger = "0s",
              duration = "30s", warmup = "0s", rtts, flow_ccs, burst_loss, sample, jitter = "0s",
              ack_jitter = "0s", host_delay = "0s", host_offset = "0s", rr, fec = "adaptive";
  std::vector<std::string> params, steps, downs;
  int paths = 0;
  bool json = false, list = false;
  app.add_option("--cc", s.cc, "congestion control (default: the flagship, as rowand)");
  app.add_option("--cc-param", params, "algorithm parameter k=v (repeatable)");
  app.add_option("--rate", rate, "bottleneck rate, e.g. 10gbit; per path: 100mbit,50mbit");
  app.add_option("--rtt", rtt, "base round-trip propagation delay, e.g. 40ms; per path: 20ms,30ms");
  app.add_option("--loss", loss, "random loss on the bottleneck, e.g. 0.5%; per path: 0,0.1%");
  app.add_option("--paths", paths, "paths per flow (the lists' values repeated to N paths)")
      ->check(CLI::Range(1, 256));
  app.add_option("--path-down", downs,
                 "I@T[+D]: path I (from 0) is cut at T for D, e.g. 1@10s+10s (repeatable)");
  app.add_flag("--drain", s.drain,
               "after --duration, run until every written byte is read; report lost_bytes");
  app.add_option("--burst-loss", burst_loss,
                 "Gilbert-Elliott loss P_GB:P_BG[:LOSS_BAD[:LOSS_GOOD]], e.g. 0.001:0.2");
  app.add_option("--buffer", buffer, "bottleneck buffer: 1bdp, 0.25bdp or bytes (64k, 2m)");
  app.add_option("--flows", s.flows, "number of flows")->check(CLI::Range(1, 10000));
  app.add_option("--stagger", stagger, "flow i starts at i x stagger");
  app.add_option("--rtts", rtts, "per-flow RTTs, comma-separated, cycled (e.g. 10ms,100ms)");
  app.add_option("--flow-cc", flow_ccs, "per-flow algorithms, comma-separated, cycled");
  app.add_option("--duration", duration, "simulated time");
  app.add_option("--warmup", warmup, "initial time excluded from the measurements");
  app.add_option("--rate-step", steps, "AT:RATE, change the bottleneck rate (repeatable)");
  app.add_option("--seed", s.seed, "random seed (runs are deterministic)");
  app.add_option("--mss", s.mss, "datagram bytes (default 9000 at >= 1 Gbit/s, else 1500)");
  app.add_option("--ack-every", s.ack_every, "ack-eliciting packets per ACK")
      ->check(CLI::Range(1, 64));
  app.add_option("--jitter", jitter,
                 "extra one-way delay after the bottleneck, uniform in [0, J], no reordering");
  app.add_option("--ack-jitter", ack_jitter,
                 "the same on the reverse path (ACKs): uniform in [0, J], no reordering");
  app.add_option("--host-delay", host_delay,
                 "hosts wake late by uniform [0, D] for timers and arrivals (batched)");
  app.add_option("--host-offset", host_offset,
                 "constant extra RTT the hinted base RTT does not include (gateway processing)");
  app.add_option("--hint-rate", s.hint_rate,
                 "the link rate the endpoints are told, as a factor of the true one (0.5: "
                 "half)")
      ->check(CLI::Range(0.01, 100.0));
  app.add_option("--hint-rtt", s.hint_rtt,
                 "the base RTT the endpoints are told, as a factor of the true one")
      ->check(CLI::Range(0.01, 100.0));
  app.add_option("--window-bdp", s.window_bdp,
                 "send buffer and receive window in hinted BDPs, as rowand's send_buffer_bdp "
                 "and recv_window_bdp (default: sized from the true path, never limiting)")
      ->check(CLI::Range(0.0, 1000.0));
  app.add_flag("--rx-stamps", s.rx_stamps,
               "endpoints know each datagram's arrival time (kernel receive timestamps)");
  app.add_flag("--tcp-source", s.tcp_source,
               "the application is a host TCP through a passthrough gateway (slow start up to "
               "2 BDP end to end) instead of a bulk source");
  app.add_flag("--verify", s.verify, "carry real payload and check every byte (slower)");
  app.add_option("--rr", rr,
                 "request-response: request SIZE (e.g. 1MiB); measures message completion times");
  app.add_option("--rr-response", s.rr_response, "response bytes per request (default 64)");
  app.add_option("--fec", fec, "forward error correction: adaptive (default) or off")
      ->check(CLI::IsMember({"adaptive", "off"}));
  app.add_option("--series", s.series_path, "write per-flow throughput and queue delay CSV");
  app.add_option("--sample-interval", sample,
                 "series/convergence sampling interval (default: RTT)");
  app.add_flag("--json", json, "print one JSON object");
  app.add_flag("--list-cc", list, "list the registered algorithms");
  CLI11_PARSE(app, argc, argv);

  if (list) {
    for (const auto& n : rowan::cc::Registry::names()) fmt::print("{}\n", n);
    return 0;
  }
  try {
    parse_paths(rate, rtt, loss, paths, s);
    for (const auto& d : downs) s.outages.push_back(parse_outage(d));
    parse_buffer(buffer, s);
    s.stagger = rowan::cc::parse_duration(stagger);
    s.duration = rowan::cc::parse_duration(duration);
    s.warmup = rowan::cc::parse_duration(warmup);
    s.jitter = rowan::cc::parse_duration(jitter);
    s.ack_jitter = rowan::cc::parse_duration(ack_jitter);
    s.host_delay = rowan::cc::parse_duration(host_delay);
    s.host_offset = rowan::cc::parse_duration(host_offset);
    if (!rr.empty()) s.rr_request = parse_size(rr);
    s.fec = fec == "off" ? rowan::transport::FecMode::kOff : rowan::transport::FecMode::kAdaptive;
    if (!sample.empty()) s.sample_interval = rowan::cc::parse_duration(sample);
    if (!rtts.empty())
      for (const auto& t : split(rtts, ',')) s.flow_rtts.push_back(rowan::cc::parse_duration(t));
    if (!flow_ccs.empty()) s.flow_ccs = split(flow_ccs, ',');
    if (!burst_loss.empty()) {
      const auto v = split(burst_loss, ':');
      if (v.size() < 2 || v.size() > 4)
        throw std::invalid_argument("--burst-loss P_GB:P_BG[:LB[:LG]]");
      s.ge_p_gb = parse_percent(v[0]);
      s.ge_p_bg = parse_percent(v[1]);
      if (v.size() > 2) s.ge_loss_bad = parse_percent(v[2]);
      if (v.size() > 3) s.ge_loss_good = parse_percent(v[3]);
    }
    for (const auto& st : steps) {
      const auto v = split(st, ':');
      if (v.size() != 2) throw std::invalid_argument("--rate-step AT:RATE");
      s.rate_steps.emplace_back(rowan::cc::parse_duration(v[0]), rowan::cc::parse_rate(v[1]));
    }
    for (const auto& p : params) {
      const size_t eq = p.find('=');
      if (eq == std::string::npos) throw std::invalid_argument("--cc-param wants k=v: " + p);
      s.cc_params.set(p.substr(0, eq), p.substr(eq + 1));
    }
    rowan::sim::Result r = rowan::sim::run(s);
    rusage ru{};
    if (getrusage(RUSAGE_SELF, &ru) == 0)
      r.max_rss_bytes = static_cast<uint64_t>(ru.ru_maxrss) * 1024;
    if (json) {
      fmt::print("{}\n", rowan::sim::to_json(s, r));
    } else {
      fmt::print("cc={} rate={:.3f} Gbit/s rtt={:.3f} ms loss={:.4f}% flows={} duration={:.1f} s\n",
                 s.cc, r.capacity_bps * 1e-9, s.rtt.seconds() * 1e3, s.loss * 100, s.flows,
                 s.duration.seconds());
      fmt::print(
          "utilization {:.4f}  goodput {:.3f} Gbit/s  queue delay p50/p95/p99 "
          "{:.3f}/{:.3f}/{:.3f} ms\n",
          r.utilization, r.goodput_bps * 1e-9, r.queue_delay_p50_s * 1e3, r.queue_delay_p95_s * 1e3,
          r.queue_delay_p99_s * 1e3);
      fmt::print("jain {:.4f}  retransmit ratio {:.5f}  tail drops {}  random drops {}\n",
                 r.jain_index, r.retransmit_ratio, r.tail_drops, r.random_drops);
      for (const auto& f : r.flows)
        fmt::print(
            "  flow {} {:<8} start {:.2f} s rtt {:.1f} ms goodput {:.3f} Gbit/s srtt {:.2f} ms "
            "retx {:.5f} rtos {} converge {}\n",
            f.id, f.cc, f.start_s, f.rtt_s * 1e3, f.goodput_bps * 1e-9, f.srtt_s * 1e3,
            f.retransmit_ratio, f.rtos,
            f.converge_s >= 0 ? fmt::format("{:.3f} s", f.converge_s) : std::string("never"));
      fmt::print(
          "fec {}: repair {} packets ({:.4f} of the other wire bytes), {} rebuilt, {} "
          "retransmitted\n",
          fec, r.repair_packets,
          r.wire_bytes > r.repair_bytes ? static_cast<double>(r.repair_bytes) /
                                              static_cast<double>(r.wire_bytes - r.repair_bytes)
                                        : 0.0,
          r.recovered, r.retx_packets);
      if (s.rr_request > 0)
        fmt::print(
            "messages {}  completion mean {:.2f} ms p50 {:.2f} p99 {:.2f} p99.9 {:.2f} max "
            "{:.2f}\n",
            r.messages, r.rr_mean_s * 1e3, r.rr_p50_s * 1e3, r.rr_p99_s * 1e3, r.rr_p999_s * 1e3,
            r.rr_max_s * 1e3);
      if (!s.paths.empty()) {
        for (const auto& p : r.paths)
          fmt::print(
              "  path {} rate {:.3f} Gbit/s rtt {:.1f} ms loss {:.4f}% utilization {:.4f} "
              "throughput {:.3f} Gbit/s downs {} ups {}\n",
              p.id, p.rate_bps * 1e-9, p.rtt_s * 1e3, p.loss * 100, p.utilization,
              p.throughput_bps * 1e-9, p.downs, p.ups);
      }
      for (const auto& o : r.outages)
        fmt::print(
            "  path {} down at {:.2f} s for {:.2f} s: detected {:.3f} s, recovered {:.3f} s, "
            "rejoined {:.3f} s (-1: never)\n",
            o.path, o.at_s, o.duration_s, o.detect_s, o.recovery_s, o.rejoin_s);
      if (s.drain || !s.outages.empty())
        fmt::print("drained {}  lost bytes {}\n", r.drained, r.lost_bytes);
      fmt::print(
          "{} packets, {} events, {:.2f} s wall ({:.2f} simulated s per wall s), peak RSS {:.1f} "
          "MB\n",
          r.packets, r.events, r.wall_s, r.wall_s > 0 ? r.simulated_s / r.wall_s : 0,
          static_cast<double>(r.max_rss_bytes) * 1e-6);
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "rowan-sim: {}\n", e.what());
    return 2;
  }
  return 0;
}
