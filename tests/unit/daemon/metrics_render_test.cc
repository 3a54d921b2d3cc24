// The exposition text of rowand's collector: every series (name and label
// set) appears once, also when two peers share a WAN link; timestamps of
// things that never happened are absent, not 0; process_* is there.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "control/metrics.h"

namespace rowan::gw {
namespace {

// "name{labels}" of every sample line, counted.
std::map<std::string, int> series_of(const std::string& text) {
  std::map<std::string, int> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t close = line.find('}');
    const size_t end = close != std::string::npos ? close + 1 : line.find(' ');
    ++out[line.substr(0, end)];
  }
  return out;
}

// The value of the sample whose series is exactly `series`.
double value_of(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  ADD_FAILURE() << "no series " << series;
  return -1;
}

PeerMetrics peer_on(const std::string& name, const std::string& link, uint64_t tx) {
  PeerMetrics p;
  p.peer = name;
  p.link = link;
  p.link_rate = BitsPerSec::from_gbps(1);
  p.link_rtt = Duration::from_ms(20);
  p.link_tx_packets = tx;
  p.link_tx_bytes = tx * 1000;
  return p;
}

TEST(MetricsRender, EverySeriesIsUniqueWhenTwoPeersShareALink) {
  DataPathMetrics m;
  m.lcores = 1;
  m.drops.assign(3, 0);
  m.peers.push_back(peer_on("site-b", "wan0", 10));
  m.peers.back().fec_repair_packets = 15;
  m.peers.back().fec_repair_bytes = 15 * 1472;
  m.peers.back().fec_recovered = 3;
  m.peers.push_back(peer_on("site-c", "wan0", 20));
  m.peers.push_back(peer_on("site-d", "wan1", 30));
  m.routes.push_back({"198.18.2.0/24", "site-b", "passthrough", 1});
  // Paths: site-b over wan0 and wan2 (a link no peer has first), site-c over
  // wan0 too.
  for (const auto& [peer, link, idx] :
       {std::tuple{"site-b", "wan0", 0u}, {"site-b", "wan2", 1u}, {"site-c", "wan0", 0u}}) {
    PathMetrics pm;
    pm.peer = peer;
    pm.link = link;
    pm.path = idx;
    pm.up = idx == 0;
    pm.link_rate = BitsPerSec::from_mbps(50);
    pm.sent_bytes = 1000 + idx;
    pm.downs = idx;
    pm.keepalives = 40 + idx;
    pm.fec_repair_packets = 7 + idx;
    pm.fec_repair_bytes = (7 + idx) * 1472;
    pm.fec_recovered = 3 * idx;
    pm.fec_k = idx == 1 ? 16 : 0;  // site-b's wan2 is coded at (16, 2)
    pm.fec_m = idx == 1 ? 2 : 0;
    m.paths.push_back(pm);
  }
  m.workers.push_back({0, Duration::from_s(2), Duration::from_s(8), 0.25});
  m.workers.back().active_flows = 3;
  m.workers.back().rx_packets = 700;
  const ControlPlaneMetrics control(1.7e9);
  const std::string text = render_metrics([&] { return std::vector<DataPathMetrics>{m}; }, control);
  const auto series = series_of(text);
  ASSERT_FALSE(series.empty());
  for (const auto& [s, n] : series) EXPECT_EQ(n, 1) << s << " appears " << n << " times";

  // Each peer's link counters under its own labels; the link's configuration once.
  EXPECT_EQ(value_of(text, R"(rowan_link_transmit_packets_total{peer="site-b",link="wan0"})"), 10);
  EXPECT_EQ(value_of(text, R"(rowan_link_transmit_packets_total{peer="site-c",link="wan0"})"), 20);
  EXPECT_EQ(value_of(text, R"(rowan_link_transmit_bytes_total{peer="site-d",link="wan1"})"), 30000);
  EXPECT_EQ(value_of(text, R"(rowan_link_capacity_bytes_per_second{link="wan0"})"), 125e6);
  EXPECT_EQ(value_of(text, R"(rowan_link_configured_rtt_seconds{link="wan1"})"), 0.02);
  EXPECT_EQ(series.count(R"(rowan_peer_up{peer="site-c",link="wan0"})"), 1u);
  EXPECT_EQ(value_of(text, R"(rowan_path_up{peer="site-b",link="wan2"})"), 0);
  EXPECT_EQ(value_of(text, R"(rowan_path_up{peer="site-c",link="wan0"})"), 1);
  EXPECT_EQ(value_of(text, R"(rowan_path_sent_bytes_total{peer="site-b",link="wan2"})"), 1001);
  EXPECT_EQ(value_of(text, R"(rowan_path_transitions_total{peer="site-b",link="wan2",to="down"})"),
            1);
  EXPECT_EQ(value_of(text, R"(rowan_link_capacity_bytes_per_second{link="wan2"})"), 6.25e6);
  // FEC per peer and per path, and the current code rate.
  EXPECT_EQ(value_of(text, R"(rowan_peer_fec_repair_packets_total{peer="site-b",link="wan0"})"),
            15);
  EXPECT_EQ(value_of(text, R"(rowan_peer_fec_repair_bytes_total{peer="site-b",link="wan0"})"),
            15 * 1472);
  EXPECT_EQ(value_of(text, R"(rowan_peer_fec_recovered_packets_total{peer="site-b",link="wan0"})"),
            3);
  EXPECT_EQ(value_of(text, R"(rowan_peer_fec_repair_packets_total{peer="site-c",link="wan0"})"), 0);
  EXPECT_EQ(value_of(text, R"(rowan_path_fec_repair_packets_total{peer="site-b",link="wan2"})"), 8);
  EXPECT_EQ(value_of(text, R"(rowan_path_fec_repair_bytes_total{peer="site-b",link="wan2"})"),
            8 * 1472);
  EXPECT_EQ(value_of(text, R"(rowan_path_fec_recovered_packets_total{peer="site-b",link="wan2"})"),
            3);
  EXPECT_DOUBLE_EQ(value_of(text, R"(rowan_path_fec_code_rate{peer="site-b",link="wan2"})"),
                   16.0 / 18.0);
  EXPECT_EQ(value_of(text, R"(rowan_path_fec_block_source_packets{peer="site-b",link="wan2"})"),
            16);
  EXPECT_EQ(value_of(text, R"(rowan_path_fec_block_repair_packets{peer="site-b",link="wan2"})"), 2);
  EXPECT_EQ(value_of(text, R"(rowan_path_fec_code_rate{peer="site-b",link="wan0"})"), 1);
  EXPECT_EQ(value_of(text, R"(rowan_path_fec_block_repair_packets{peer="site-c",link="wan0"})"), 0);
  EXPECT_EQ(value_of(text, R"(rowan_path_keepalives_total{peer="site-c",link="wan0"})"), 40);
  EXPECT_EQ(value_of(text, R"(rowan_worker_busy_seconds_total{worker="0"})"), 2);
  EXPECT_EQ(value_of(text, R"(rowan_worker_idle_seconds_total{worker="0"})"), 8);
  EXPECT_EQ(value_of(text, R"(rowan_worker_busy_ratio{worker="0"})"), 0.25);
  EXPECT_EQ(value_of(text, R"(rowan_worker_active_flows{worker="0"})"), 3);
  EXPECT_EQ(value_of(text, R"(rowan_worker_local_rx_packets_total{worker="0"})"), 700);
}

TEST(MetricsRender, NeverIsAbsentNotZero) {
  DataPathMetrics m;
  m.peers.push_back(peer_on("fresh", "wan0", 0));
  PeerMetrics seen = peer_on("seen", "wan1", 1);
  seen.last_receive_unix_s = 1.7e9 + 5;
  seen.last_handshake_unix_s = 1.7e9 + 4;
  m.peers.push_back(seen);
  const ControlPlaneMetrics control(1.7e9);
  const std::string text = render_metrics([&] { return std::vector<DataPathMetrics>{m}; }, control);
  const auto series = series_of(text);
  EXPECT_EQ(series.count(R"(rowan_peer_last_receive_timestamp_seconds{peer="fresh",link="wan0"})"),
            0u);
  EXPECT_EQ(
      series.count(R"(rowan_peer_last_handshake_timestamp_seconds{peer="fresh",link="wan0"})"), 0u);
  EXPECT_EQ(value_of(text, R"(rowan_peer_last_receive_timestamp_seconds{peer="seen",link="wan1"})"),
            1.7e9 + 5);
  EXPECT_EQ(
      value_of(text, R"(rowan_peer_last_handshake_timestamp_seconds{peer="seen",link="wan1"})"),
      1.7e9 + 4);
}

// Flow telemetry stays bounded: per route, and the kTopFlows largest flows by
// rank, however many flows there are; split mode's counters and flow states.
TEST(MetricsRender, TopFlowsAreRankedAndBounded) {
  DataPathMetrics a, b;  // two lcores' copies
  for (int i = 0; i < 30; ++i) {
    FlowMetrics f{"site-b",
                  "tcp",
                  "198.18.1.10",
                  "198.18.2.10",
                  fmt::format("{}>5201", 40000 + i),
                  static_cast<uint64_t>(i),
                  static_cast<uint64_t>(1000 * i)};
    (i % 2 == 0 ? a : b).top_flows.push_back(f);
  }
  a.routes.push_back({"198.18.2.0/24", "site-b", "split", 2, 10, 5000});
  b.routes.push_back({"198.18.2.0/24", "site-b", "split", 1, 4, 1000});
  a.split.local_acks = 5;
  b.split.local_acks = 2;
  a.split.tracking = 1;
  b.split.ingress = 3;
  const ControlPlaneMetrics control(1.7e9);
  const std::string text = render_metrics(
      [&] {
        return std::vector<DataPathMetrics>{a, b};
      },
      control);
  const auto series = series_of(text);
  size_t top = 0;
  for (const auto& [s, n] : series) {
    EXPECT_EQ(n, 1) << s;
    if (s.rfind("rowan_top_flow_bytes{", 0) == 0) ++top;
  }
  EXPECT_EQ(top, kTopFlows);
  EXPECT_EQ(value_of(text, R"(rowan_top_flow_bytes{rank="1",peer="site-b",kind="tcp",)"
                           R"(src="198.18.1.10",dst="198.18.2.10",flow="40029>5201"})"),
            29000);
  EXPECT_EQ(value_of(text, R"(rowan_top_flow_bytes{rank="10",peer="site-b",kind="tcp",)"
                           R"(src="198.18.1.10",dst="198.18.2.10",flow="40020>5201"})"),
            20000);
  EXPECT_EQ(
      value_of(text, R"(rowan_route_active_flow_bytes{prefix="198.18.2.0/24",peer="site-b"})"),
      6000);
  EXPECT_EQ(value_of(text, R"(rowan_route_active_flows{prefix="198.18.2.0/24",peer="site-b"})"), 3);
  EXPECT_EQ(value_of(text, "rowan_split_local_acks_total"), 7);
  EXPECT_EQ(value_of(text, R"(rowan_split_flows{state="unpaired"})"), 1);
  EXPECT_EQ(value_of(text, R"(rowan_split_flows{state="ingress"})"), 3);
  EXPECT_EQ(value_of(text, R"(rowan_split_flows{state="egress"})"), 0);
}

TEST(MetricsRender, ProcessMetricsDescribeThisProcess) {
  const ProcessStats s = read_process_stats();
  ASSERT_TRUE(s.ok) << "/proc/self is not readable";
  EXPECT_GT(s.resident_bytes, 1 << 20);
  EXPECT_GE(s.virtual_bytes, s.resident_bytes);
  EXPECT_GT(s.open_fds, 2);  // stdin, stdout, stderr at least
  EXPECT_GE(s.max_fds, s.open_fds);
  EXPECT_GE(s.cpu_seconds, 0);
  const double now = unix_now();
  EXPECT_LE(s.start_time_unix_s, now + 1);
  EXPECT_GT(s.start_time_unix_s, now - 3600) << "this test process started over an hour ago?";
  const ControlPlaneMetrics control(now);
  const std::string text = render_metrics([] { return std::vector<DataPathMetrics>{}; }, control);
  for (const char* name : {"process_cpu_seconds_total", "process_resident_memory_bytes",
                           "process_virtual_memory_bytes", "process_start_time_seconds",
                           "process_open_fds", "process_max_fds"}) {
    EXPECT_EQ(series_of(text).count(name), 1u) << name;
  }
  EXPECT_GT(value_of(text, "process_resident_memory_bytes"), 1 << 20);
}

}  // namespace
}  // namespace rowan::gw
