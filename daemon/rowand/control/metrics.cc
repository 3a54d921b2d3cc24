#include "control/metrics.h"

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

#include <rte_version.h>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "datapath/worker.h"
#include "rowan/build_version.h"

namespace rowan::gw {

ProcessStats read_process_stats() {
  ProcessStats s;
  // /proc/self/stat: the fields after the command (which may hold spaces and
  // parentheses, so parse from the last ')'): state is field 3, utime 14,
  // stime 15, starttime 22, vsize 23, rss 24 (pages).
  std::ifstream stat_file("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return s;
  std::istringstream fields(stat.substr(close + 1));
  std::vector<std::string> v;
  for (std::string w; fields >> w;) v.push_back(w);
  if (v.size() < 22) return s;  // v[0] is field 3
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(::sysconf(_SC_PAGESIZE));
  if (ticks <= 0 || page <= 0) return s;
  try {
    s.cpu_seconds = (std::stod(v[11]) + std::stod(v[12])) / ticks;
    const double start_ticks = std::stod(v[19]);
    s.virtual_bytes = std::stod(v[20]);
    s.resident_bytes = std::stod(v[21]) * page;
    // starttime counts from boot; /proc/stat's btime is the boot's unix time.
    std::ifstream boot("/proc/stat");
    double btime = 0;
    for (std::string line; std::getline(boot, line);) {
      if (line.rfind("btime ", 0) == 0) btime = std::stod(line.substr(6));
    }
    if (btime <= 0) return s;
    s.start_time_unix_s = btime + start_ticks / ticks;
  } catch (const std::exception&) {
    return s;
  }
  std::error_code ec;
  double fds = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++fds;
  }
  if (ec) return s;
  s.open_fds = fds;
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return s;
  s.max_fds = lim.rlim_cur == RLIM_INFINITY ? std::numeric_limits<double>::infinity()
                                            : static_cast<double>(lim.rlim_cur);
  s.ok = true;
  return s;
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

namespace {

/// Prometheus' base unit for rates is bytes per second (promtool lints bits).
double bytes_per_s(BitsPerSec r) { return static_cast<double>(r.bps()) / 8.0; }

}  // namespace

ControlPlaneMetrics::ControlPlaneMetrics(double start_unix_s) {
  s_.start_unix_s = start_unix_s;
  s_.last_success_unix_s = start_unix_s;
}

void ControlPlaneMetrics::reload_result(bool ok, double unix_s) {
  std::lock_guard<std::mutex> lock(mu_);
  s_.last_reload_ok = ok;
  if (ok) {
    s_.last_success_unix_s = unix_s;
    ++s_.reloads_ok;
  } else {
    ++s_.reloads_failed;
  }
}

ControlPlaneMetrics::State ControlPlaneMetrics::get() const {
  std::lock_guard<std::mutex> lock(mu_);
  return s_;
}

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using Labels = std::vector<ClientMetric::Label>;

// A counter family whose value is a member of M (the tables below).
template <class M>
struct CounterOf {
  const char* name;
  const char* help;
  uint64_t M::*value;
};

class Collector final : public prometheus::Collectable {
 public:
  Collector(MetricsSource source, const ControlPlaneMetrics& control)
      : source_(std::move(source)), control_(control) {}

  std::vector<MetricFamily> Collect() const override {
    DataPathMetrics m;
    for (const DataPathMetrics& l : source_()) m.merge(l);
    Families f;
    build_info(f);
    control(f);
    datapath(f, m);
    for (const PeerMetrics& p : m.peers) peer(f, p);
    links(f, m.peers, m.paths);
    for (const PathMetrics& p : m.paths) path(f, p);
    process(f);
    std::vector<MetricFamily> out;
    out.reserve(f.order.size());
    for (const std::string& name : f.order) out.push_back(std::move(f.by_name[name]));
    return out;
  }

 private:
  /// Families in first-use order, so each name appears once.
  struct Families {
    std::map<std::string, MetricFamily> by_name;
    std::vector<std::string> order;
    MetricFamily& get(const std::string& name, const char* help, MetricType type) {
      auto [it, fresh] = by_name.try_emplace(name);
      if (fresh) {
        it->second.name = name;
        it->second.help = help;
        it->second.type = type;
        order.push_back(name);
      }
      return it->second;
    }
    void counter(const std::string& name, const char* help, Labels labels, double v) {
      ClientMetric c;
      c.label = std::move(labels);
      c.counter.value = v;
      get(name, help, MetricType::Counter).metric.push_back(std::move(c));
    }
    void gauge(const std::string& name, const char* help, Labels labels, double v) {
      ClientMetric c;
      c.label = std::move(labels);
      c.gauge.value = v;
      get(name, help, MetricType::Gauge).metric.push_back(std::move(c));
    }
    void histogram(const std::string& name, const char* help, Labels labels,
                   const LatencyHistogram& h) {
      ClientMetric c;
      c.label = std::move(labels);
      c.histogram.sample_count = h.count();
      c.histogram.sample_sum = h.sum().seconds();
      uint64_t cum = 0;
      for (size_t i = 0; i < LatencyHistogram::kBuckets; ++i) {
        cum += h.bucket(i);
        ClientMetric::Bucket b;
        b.cumulative_count = cum;
        b.upper_bound = i < LatencyHistogram::kBoundsNs.size()
                            ? static_cast<double>(LatencyHistogram::kBoundsNs[i]) * 1e-9
                            : std::numeric_limits<double>::infinity();
        c.histogram.bucket.push_back(b);
      }
      get(name, help, MetricType::Histogram).metric.push_back(std::move(c));
    }
  };

  static void build_info(Families& f) {
    f.gauge("rowan_build_info", "rowand's version and build; always 1.",
            {{"version", ROWAN_BUILD_VERSION}, {"dpdk", rte_version()}, {"compiler", compiler()}},
            1);
  }

  static std::string compiler() {
#if defined(__clang__)
    return std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
    return std::string("gcc ") + __VERSION__;
#else
    return "unknown";
#endif
  }

  void control(Families& f) const {
    const ControlPlaneMetrics::State s = control_.get();
    f.gauge("rowan_config_last_reload_successful",
            "1 if the last configuration reload (SIGHUP or rowanctl reload) was applied, 0 if it "
            "was rejected.",
            {}, s.last_reload_ok ? 1 : 0);
    f.gauge("rowan_config_last_reload_success_timestamp_seconds",
            "Unix time of the last successful configuration load (start-up or reload).", {},
            s.last_success_unix_s);
    f.counter("rowan_config_reloads_total", "Configuration reloads, by result.",
              {{"result", "success"}}, static_cast<double>(s.reloads_ok));
    f.counter("rowan_config_reloads_total", "Configuration reloads, by result.",
              {{"result", "failure"}}, static_cast<double>(s.reloads_failed));
    f.gauge("rowan_start_time_seconds", "Unix time rowand started.", {}, s.start_unix_s);
  }

  static void datapath(Families& f, const DataPathMetrics& m) {
    f.gauge("rowan_packet_lcores", "Packet lcores whose counters are summed here.", {},
            static_cast<double>(m.lcores));
    f.counter("rowan_packet_loop_iterations_total",
              "Passes of the packet loops (the heartbeat the systemd watchdog follows).", {},
              static_cast<double>(m.loop_iterations));
    f.counter("rowan_local_receive_packets_total", "IP and ARP frames received on the local port.",
              {}, static_cast<double>(m.local_rx_packets));
    f.counter("rowan_local_receive_bytes_total", "Bytes of frames received on the local port.", {},
              static_cast<double>(m.local_rx_bytes));
    f.counter("rowan_local_transmit_packets_total", "Frames sent to local hosts.", {},
              static_cast<double>(m.local_tx_packets));
    f.counter("rowan_local_transmit_bytes_total", "Bytes of frames sent to local hosts.", {},
              static_cast<double>(m.local_tx_bytes));
    f.counter("rowan_arp_requests_total", "ARP requests the gateway sent for local hosts.", {},
              static_cast<double>(m.arp_requests));
    f.counter("rowan_arp_replies_total", "ARP replies the gateway sent.", {},
              static_cast<double>(m.arp_replies));
    f.counter("rowan_local_vlan_receive_packets_total",
              "802.1Q-tagged frames taken from the local port (one tag; PCP kept).", {},
              static_cast<double>(m.vlan_rx));
    f.counter("rowan_local_vlan_transmit_packets_total",
              "802.1Q-tagged frames sent to local hosts.", {}, static_cast<double>(m.vlan_tx));
    f.gauge("rowan_flows_active", "Flows in the flow table.", {},
            static_cast<double>(m.flows_active));
    f.counter("rowan_flows_created_total", "Flows created.", {},
              static_cast<double>(m.flows_created));
    f.counter("rowan_flows_expired_total", "Flows removed after being idle.", {},
              static_cast<double>(m.flows_expired));
    f.gauge("rowan_neighbors", "Entries in the local neighbour (ARP) table.", {},
            static_cast<double>(m.neighbors));
    f.gauge("rowan_neighbors_unresolved",
            "Local hosts without a MAC: being asked, or not answering.", {},
            static_cast<double>(m.neighbors_unresolved));
    f.gauge("rowan_streams_waiting_for_host",
            "Streams from peers whose next packet waits for its host's MAC.", {},
            static_cast<double>(m.streams_waiting_for_host));
    for (size_t i = 0; i < m.drops.size(); ++i) {
      f.counter("rowan_drops_total", "Packets the gateway dropped, by reason.",
                {{"reason", kDropNames[i]}}, static_cast<double>(m.drops[i]));
    }
    for (const PortMetrics& p : m.ports) {
      const Labels l{{"port", p.port}, {"role", p.role}};
      f.counter("rowan_port_receive_packets_total",
                "Packets the DPDK port received (rte_eth_stats).", l,
                static_cast<double>(p.ipackets));
      f.counter("rowan_port_transmit_packets_total", "Packets the DPDK port sent (rte_eth_stats).",
                l, static_cast<double>(p.opackets));
      f.counter("rowan_port_receive_bytes_total", "Bytes the DPDK port received (rte_eth_stats).",
                l, static_cast<double>(p.ibytes));
      f.counter("rowan_port_transmit_bytes_total", "Bytes the DPDK port sent (rte_eth_stats).", l,
                static_cast<double>(p.obytes));
      f.counter("rowan_port_receive_missed_total",
                "Packets the port dropped because the RX ring was full (rte_eth_stats imissed).", l,
                static_cast<double>(p.imissed));
      f.counter("rowan_port_receive_errors_total", "Erroneous received packets (ierrors).", l,
                static_cast<double>(p.ierrors));
      f.counter("rowan_port_transmit_errors_total", "Failed transmissions (oerrors).", l,
                static_cast<double>(p.oerrors));
      f.counter("rowan_port_receive_nombuf_total", "RX mbuf allocation failures (rx_nombuf).", l,
                static_cast<double>(p.rx_nombuf));
    }
    for (const WorkerMetrics& w : m.workers) {
      const Labels l{{"worker", std::to_string(w.worker)}};
      f.counter("rowan_worker_busy_seconds_total",
                "Time the packet loop spent in passes that found work.", l, w.busy.seconds());
      f.counter("rowan_worker_idle_seconds_total",
                "Time the packet loop spent in passes that found none, sleeping included.", l,
                w.idle.seconds());
      f.gauge("rowan_worker_busy_ratio", "Busy share (0 to 1) of the packet loop's last second.", l,
              w.busy_ratio);
      f.gauge("rowan_worker_active_flows", "Flows in the worker's flow table.", l,
              static_cast<double>(w.active_flows));
      f.counter("rowan_worker_local_rx_packets_total",
                "Frames the worker took from the site port (or its distributor ring).", l,
                static_cast<double>(w.rx_packets));
      f.counter("rowan_worker_local_tx_packets_total",
                "Frames the worker sent toward the site port.", l,
                static_cast<double>(w.tx_packets));
      f.counter("rowan_worker_handoff_out_total",
                "Frames the worker read from its own queue of the site port and handed to the "
                "worker that owns them (queues per worker; 0 otherwise).",
                l, static_cast<double>(w.handoff_out));
      f.counter("rowan_worker_handoff_in_total",
                "Frames other workers read from their queues and handed to this one.", l,
                static_cast<double>(w.handoff_in));
      f.counter("rowan_worker_handoff_drops_total",
                "Frames the worker dropped because their owner's hand-over ring was full.", l,
                static_cast<double>(w.handoff_drops));
    }
    for (const RouteMetrics& r : m.routes) {
      f.gauge("rowan_route_mode", "A configured route and its mode; always 1.",
              {{"prefix", r.prefix}, {"peer", r.peer}, {"mode", r.mode}}, 1);
      const Labels rl{{"prefix", r.prefix}, {"peer", r.peer}};
      f.gauge("rowan_route_active_flows",
              "Flows in the flow table whose destination this route covers.", rl,
              static_cast<double>(r.active_flows));
      f.gauge("rowan_route_active_flow_packets",
              "Packets the route's flows now in the flow table have carried.", rl,
              static_cast<double>(r.active_packets));
      f.gauge("rowan_route_active_flow_bytes",
              "Bytes the route's flows now in the flow table have carried.", rl,
              static_cast<double>(r.active_bytes));
    }
    top_flows(f, m.top_flows);
    split(f, m.split);
  }

  static void peer(Families& f, const PeerMetrics& p) {
    const Labels l{{"peer", p.peer}, {"link", p.link}};
    auto d = [](uint64_t v) { return static_cast<double>(v); };
    f.gauge("rowan_peer_up",
            "1 while the peer is reachable: a datagram (keepalives are sent every second) arrived "
            "within the last 3 s and, on an encrypted link, its session is up.",
            l, p.up ? 1 : 0);
    // Absent until it happened: a 0 would read as "54 years ago".
    if (p.last_receive_unix_s > 0) {
      f.gauge("rowan_peer_last_receive_timestamp_seconds",
              "Unix time of the last datagram from the peer (absent before the first).", l,
              p.last_receive_unix_s);
    }
    if (p.last_handshake_unix_s > 0) {
      f.gauge("rowan_peer_last_handshake_timestamp_seconds",
              "Unix time of the last completed handshake with the peer (absent before the "
              "first).",
              l, p.last_handshake_unix_s);
    }
    f.histogram("rowan_peer_rtt_seconds", "Round-trip time samples (ACK delay removed).", l, p.rtt);
    f.histogram("rowan_peer_queueing_delay_seconds",
                "RTT samples minus the min RTT: the time packets spent in queues.", l,
                p.queue_delay);
    f.gauge("rowan_peer_min_rtt_seconds", "Minimum RTT over the transport's window.", l,
            p.min_rtt.seconds());
    f.gauge("rowan_peer_smoothed_rtt_seconds", "Smoothed RTT (RFC 6298).", l, p.srtt.seconds());
    f.gauge("rowan_peer_bottleneck_bandwidth_bytes_per_second",
            "Estimated bottleneck bandwidth: the max delivery rate over about 10 round trips.", l,
            bytes_per_s(p.btlbw));
    f.gauge("rowan_peer_bdp_bytes",
            "Bandwidth-delay product: bottleneck bandwidth x min RTT (the configured link's "
            "until both are measured).",
            l, d(p.bdp));
    f.gauge("rowan_peer_cwnd_bytes", "Congestion window.", l, d(p.cwnd));
    f.gauge("rowan_peer_pacing_rate_bytes_per_second", "Rate the pacer sends at.", l,
            bytes_per_s(p.pacing_rate));
    f.gauge("rowan_peer_inflight_bytes", "Bytes sent and not yet acknowledged or lost.", l,
            d(p.inflight));
    f.gauge("rowan_peer_send_buffer_used_bytes", "Send buffer in use.", l, d(p.send_buffer_used));
    f.gauge("rowan_peer_send_buffer_capacity_bytes",
            "Send buffer's chunk pool (memory reserved; the budget is "
            "rowan_peer_send_buffer_budget_bytes).",
            l, d(p.send_buffer_capacity));
    f.gauge("rowan_peer_send_buffer_budget_bytes",
            "Send buffer budget: what unacknowledged stream bytes may reach "
            "(send_buffer_bdp x BDP, at least 256 KiB).",
            l, d(p.send_buffer_budget));
    f.gauge("rowan_peer_receive_buffer_used_bytes", "Receive buffer in use.", l,
            d(p.recv_buffer_used));
    f.gauge("rowan_peer_receive_buffer_capacity_bytes", "Receive buffer size.", l,
            d(p.recv_buffer_capacity));
    f.counter("rowan_peer_goodput_bytes_total",
              "Stream bytes the peer acknowledged (each byte once, retransmissions not counted).",
              l, d(p.goodput_bytes));
    f.counter("rowan_peer_transmit_packets_total", "Transport datagrams sent to the peer.", l,
              d(p.tx_packets));
    f.counter("rowan_peer_transmit_bytes_total", "Transport bytes sent to the peer (wire).", l,
              d(p.tx_bytes));
    f.counter("rowan_peer_receive_packets_total", "Transport datagrams received from the peer.", l,
              d(p.rx_packets));
    f.counter("rowan_peer_receive_bytes_total", "Transport bytes received from the peer (wire).", l,
              d(p.rx_bytes));
    f.counter("rowan_peer_carried_packets_total", "Local IP packets sent on to the peer.", l,
              d(p.carried_packets));
    f.counter("rowan_peer_carried_bytes_total", "Bytes of local IP packets sent on to the peer.", l,
              d(p.carried_bytes));
    f.counter("rowan_peer_delivered_packets_total",
              "IP packets from the peer delivered to local hosts.", l, d(p.delivered_packets));
    f.counter("rowan_peer_delivered_bytes_total",
              "Bytes of IP packets from the peer delivered to local hosts.", l,
              d(p.delivered_bytes));
    f.counter("rowan_peer_retransmitted_packets_total", "Packets that carried retransmitted data.",
              l, d(p.retransmitted_packets));
    f.counter("rowan_peer_retransmitted_bytes_total", "Stream bytes sent again.", l,
              d(p.retransmitted_bytes));
    f.counter("rowan_peer_lost_packets_total", "Packets declared lost.", l, d(p.lost_packets));
    static const CounterOf<PeerMetrics> kFec[] = {
        {"rowan_peer_fec_source_packets_total",
         "Data packets sent as FEC source symbols, all paths.", &PeerMetrics::fec_source_packets},
        {"rowan_peer_fec_repair_packets_total", "FEC repair packets sent, all paths.",
         &PeerMetrics::fec_repair_packets},
        {"rowan_peer_fec_repair_bytes_total", "Wire bytes of FEC repair packets sent.",
         &PeerMetrics::fec_repair_bytes},
        {"rowan_peer_fec_recovered_packets_total",
         "The peer's packets rebuilt from repair symbols (not retransmitted).",
         &PeerMetrics::fec_recovered},
        {"rowan_peer_fec_unrecoverable_blocks_total",
         "FEC blocks given up with source packets missing (retransmission repairs them).",
         &PeerMetrics::fec_unrecoverable},
    };
    for (const auto& c : kFec) f.counter(c.name, c.help, l, d(p.*c.value));
    f.counter("rowan_peer_spurious_losses_total", "Packets declared lost and acknowledged later.",
              l, d(p.spurious_losses));
    f.counter("rowan_peer_loss_events_total",
              "Loss events (congestion events): losses of packets sent after the previous event "
              "began.",
              l, d(p.loss_events));
    f.counter("rowan_peer_retransmission_timeouts_total", "Retransmission timeouts (RTOs).", l,
              d(p.rtos));
    f.counter("rowan_peer_probe_timeouts_total", "Probe timeouts (tail-loss probes).", l,
              d(p.ptos));
    f.counter("rowan_peer_ecn_marks_total",
              "ECN CE marks the gateway applied to packets of this peer's flows.", l,
              d(p.ecn_marks));
    f.counter("rowan_peer_handshakes_total",
              "Link-security sessions confirmed with the peer (0 on an insecure link).", l,
              d(p.handshakes));
    f.counter("rowan_peer_rekeys_total", "Handshakes started while a session existed.", l,
              d(p.rekeys));
    f.counter("rowan_peer_restarts_total",
              "Authenticated handshakes from a new incarnation of the peer (it restarted).", l,
              d(p.peer_restarts));
    f.counter("rowan_peer_transport_resets_total",
              "Transports dropped and recreated because the peer restarted.", l,
              d(p.transport_resets));
    f.counter("rowan_peer_outages_total",
              "Times the peer fell silent for more than 3 s (keepalives are sent every second).", l,
              d(p.outages));
    f.counter("rowan_peer_outage_seconds_total",
              "Seconds the peer was silent in outages, from the last datagram before each to the "
              "first after it (an outage under way counts up to now).",
              l, p.outage_total.seconds());
    for (size_t i = 0; i < p.drops.size(); ++i) {
      f.counter("rowan_peer_transport_drops_total",
                "Datagrams from the peer the transport dropped, by reason.",
                {{"peer", p.peer}, {"link", p.link}, {"reason", PeerMetrics::kDropNames[i]}},
                d(p.drops[i]));
    }
  }

  // The kTopFlows flows that carried the most bytes, by rank: at most
  // kTopFlows series at a time, whatever the number of flows.
  static void top_flows(Families& f, std::vector<FlowMetrics> flows) {
    const size_t n = std::min(flows.size(), kTopFlows);
    std::partial_sort(flows.begin(), flows.begin() + static_cast<std::ptrdiff_t>(n), flows.end(),
                      [](const FlowMetrics& a, const FlowMetrics& b) { return a.bytes > b.bytes; });
    for (size_t i = 0; i < n; ++i) {
      const FlowMetrics& fl = flows[i];
      const Labels l{{"rank", std::to_string(i + 1)},
                     {"peer", fl.peer},
                     {"kind", fl.kind},
                     {"src", fl.src},
                     {"dst", fl.dst},
                     {"flow", fl.id}};
      f.gauge("rowan_top_flow_bytes",
              "Bytes carried by the flows that carried the most (rank 1: the largest).", l,
              static_cast<double>(fl.bytes));
      f.gauge("rowan_top_flow_packets", "Packets carried by the flows that carried the most bytes.",
              l, static_cast<double>(fl.packets));
    }
  }

  static void split(Families& f, const SplitMetrics& s) {
    auto d = [](uint64_t v) { return static_cast<double>(v); };
    f.counter("rowan_split_local_acks_total",
              "ACKs the ingress gateway sent local requesters in the responder's stead.", {},
              d(s.local_acks));
    f.counter("rowan_split_naks_total", "NAKs sent to local requesters (out-of-sequence packets).",
              {}, d(s.naks));
    f.counter("rowan_split_cnps_total", "CNPs sent to local requesters.", {}, d(s.cnps));
    f.counter("rowan_split_reoriginated_packets_total",
              "Packets the egress gateway sent to the responder host (retransmissions included).",
              {}, d(s.reoriginated));
    f.counter("rowan_split_retransmitted_packets_total",
              "Packets the egress gateway sent again from its buffer (NAK or timeout).", {},
              d(s.retransmitted));
    f.counter("rowan_split_flows_paired_total",
              "Flows switched to split mode (paired by an ACK or by RDMA CM).", {}, d(s.paired));
    f.counter("rowan_split_fatal_total", "Fatal NAKs or exhausted retries reported to hosts.", {},
              d(s.fatal));
    for (const auto& [role, n] : {std::pair{"unpaired", s.tracking},
                                  std::pair{"ingress", s.ingress}, std::pair{"egress", s.egress}}) {
      f.gauge("rowan_split_flows",
              "Flows of split routes now: unpaired (still in passthrough), ingress, egress.",
              {{"state", role}}, d(n));
    }
  }

  // The WAN links. Their configuration once per link; their counters per
  // peer and link, as each peer counts the socket or port it sends on: two
  // peers on one link are two series, never one name and label set twice.
  static void links(Families& f, const std::vector<PeerMetrics>& peers,
                    const std::vector<PathMetrics>& paths) {
    auto d = [](uint64_t v) { return static_cast<double>(v); };
    std::set<std::string> seen;
    auto config = [&](const std::string& link, BitsPerSec rate, Duration rtt) {
      if (!seen.insert(link).second) return;
      const Labels ll{{"link", link}};
      f.gauge("rowan_link_capacity_bytes_per_second", "Configured capacity of the WAN link.", ll,
              bytes_per_s(rate));
      f.gauge("rowan_link_configured_rtt_seconds", "Configured base RTT of the WAN link.", ll,
              rtt.seconds());
    };
    for (const PeerMetrics& p : peers) config(p.link, p.link_rate, p.link_rtt);
    for (const PathMetrics& p : paths) config(p.link, p.link_rate, p.link_rtt);
    static const CounterOf<PeerMetrics> kCounters[] = {
        {"rowan_link_transmit_packets_total", "Datagrams sent on the WAN link to the peer.",
         &PeerMetrics::link_tx_packets},
        {"rowan_link_transmit_bytes_total", "Bytes sent on the WAN link to the peer.",
         &PeerMetrics::link_tx_bytes},
        {"rowan_link_receive_packets_total",
         "Datagrams received on the WAN link from the peer's address.",
         &PeerMetrics::link_rx_packets},
        {"rowan_link_receive_bytes_total",
         "Bytes received on the WAN link from the peer's address.", &PeerMetrics::link_rx_bytes},
        {"rowan_link_transmit_full_total",
         "Sends to the peer refused because the link's queue was full.",
         &PeerMetrics::link_tx_full},
        {"rowan_link_transmit_errors_total", "Sends to the peer that failed.",
         &PeerMetrics::link_tx_errors},
        {"rowan_link_receive_wrong_source_total",
         "Datagrams received on the peer's socket from an address that is not the peer.",
         &PeerMetrics::link_rx_wrong_source},
    };
    for (const PeerMetrics& p : peers) {
      const Labels ll{{"peer", p.peer}, {"link", p.link}};
      for (const auto& c : kCounters) f.counter(c.name, c.help, ll, d(p.*c.value));
    }
  }

  // One path of a peer: its own RTT, congestion window and losses, and its
  // transitions (docs/telemetry.md).
  static void path(Families& f, const PathMetrics& p) {
    const Labels l{{"peer", p.peer}, {"link", p.link}};
    auto d = [](uint64_t v) { return static_cast<double>(v); };
    f.gauge("rowan_path_up",
            "1 while the path to the peer over this link is up (its ACKs arrive), 0 while it is "
            "down and probed.",
            l, p.up ? 1 : 0);
    f.gauge("rowan_path_srtt_seconds", "Smoothed RTT of the path.", l, p.srtt.seconds());
    f.gauge("rowan_path_min_rtt_seconds", "Minimum RTT of the path.", l, p.min_rtt.seconds());
    f.gauge("rowan_path_cwnd_bytes", "Congestion window of the path's controller.", l, d(p.cwnd));
    f.gauge("rowan_path_pacing_rate_bytes_per_second", "Pacing rate of the path.", l,
            bytes_per_s(p.pacing_rate));
    f.gauge("rowan_path_inflight_bytes", "Bytes in flight on the path.", l, d(p.inflight));
    f.counter("rowan_path_sent_packets_total", "Datagrams the transport sent on the path.", l,
              d(p.sent_packets));
    f.counter("rowan_path_sent_bytes_total", "Bytes the transport sent on the path.", l,
              d(p.sent_bytes));
    f.counter("rowan_path_received_packets_total", "Datagrams that arrived on the path.", l,
              d(p.received_packets));
    f.counter("rowan_path_received_bytes_total", "Bytes that arrived on the path.", l,
              d(p.received_bytes));
    f.counter("rowan_path_lost_packets_total", "Packets the path's loss detection declared lost.",
              l, d(p.lost_packets));
    f.counter("rowan_path_retransmitted_packets_total",
              "Packets on the path that carried retransmitted stream data.", l,
              d(p.retransmitted_packets));
    f.counter("rowan_path_probe_timeouts_total", "Probe timeouts on the path.", l, d(p.ptos));
    f.counter("rowan_path_keepalives_total",
              "PINGs sent on the path while it was up and idle (its liveness measured).", l,
              d(p.keepalives));
    static const CounterOf<PathMetrics> kFec[] = {
        {"rowan_path_fec_source_packets_total",
         "Data packets sent on the path as FEC source symbols.", &PathMetrics::fec_source_packets},
        {"rowan_path_fec_repair_packets_total", "FEC repair packets sent on the path.",
         &PathMetrics::fec_repair_packets},
        {"rowan_path_fec_repair_bytes_total", "Wire bytes of FEC repair packets sent on the path.",
         &PathMetrics::fec_repair_bytes},
        {"rowan_path_fec_recovered_packets_total",
         "Packets the peer sent on the path that were rebuilt from repair symbols.",
         &PathMetrics::fec_recovered},
    };
    for (const auto& c : kFec) f.counter(c.name, c.help, l, d(p.*c.value));
    const double k = p.fec_k, m = p.fec_m;
    f.gauge("rowan_path_fec_code_rate",
            "Current FEC code rate of the path, k / (k + m); 1 while it is not coded.", l,
            p.fec_k > 0 ? k / (k + m) : 1.0);
    f.gauge("rowan_path_fec_block_source_packets",
            "Source packets per FEC block at the current code rate (0: not coding).", l, k);
    f.gauge("rowan_path_fec_block_repair_packets",
            "Repair packets per FEC block at the current code rate (0: not coding).", l, m);
    f.counter("rowan_path_transitions_total", "Times the path went down or came back up.",
              {{"peer", p.peer}, {"link", p.link}, {"to", "down"}}, d(p.downs));
    f.counter("rowan_path_transitions_total", "Times the path went down or came back up.",
              {{"peer", p.peer}, {"link", p.link}, {"to", "up"}}, d(p.ups));
  }

  // The process, under the names every Prometheus client library uses.
  static void process(Families& f) {
    const ProcessStats s = read_process_stats();
    if (!s.ok) return;  // no /proc: leave them out rather than report zeros
    f.counter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", {},
              s.cpu_seconds);
    f.gauge("process_resident_memory_bytes", "Resident memory size in bytes.", {},
            s.resident_bytes);
    f.gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", {}, s.virtual_bytes);
    f.gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
            {}, s.start_time_unix_s);
    f.gauge("process_open_fds", "Number of open file descriptors.", {}, s.open_fds);
    f.gauge("process_max_fds", "Maximum number of open file descriptors.", {}, s.max_fds);
  }

  MetricsSource source_;
  const ControlPlaneMetrics& control_;
};

MetricsServer::MetricsServer(const MetricsConfig& cfg, MetricsSource source,
                             const ControlPlaneMetrics& control)
    : collector_(std::make_shared<Collector>(std::move(source), control)) {
  address_ = cfg.listen.to_string();
  try {
    // civetweb: one listening port, two worker threads are plenty for scrapes.
    exposer_ = std::make_unique<prometheus::Exposer>(address_, 2);
  } catch (const std::exception& e) {
    throw std::runtime_error("[metrics] cannot listen on " + address_ + ": " + e.what());
  }
  exposer_->RegisterCollectable(collector_);
}

MetricsServer::~MetricsServer() = default;

std::string MetricsServer::address() const { return address_; }

std::string render_metrics(MetricsSource source, const ControlPlaneMetrics& control) {
  const Collector c(std::move(source), control);
  return prometheus::TextSerializer().Serialize(c.Collect());
}

}  // namespace rowan::gw
