// What a packet worker publishes for the Prometheus exporter (DataPathMetrics),
// and how the copies of several workers add up (merge).
//
// The packet lcore never touches prometheus-cpp (its Histogram::Observe takes a
// mutex): it keeps plain counters, and about ten times a second its publish()
// copies them into a DataPathMetrics under the snapshot mutex. At scrape time
// the exporter (control/metrics.h) takes one DataPathMetrics per packet lcore,
// sums them, and builds the metric families there.
//
// Threading: DataPathMetrics is filled on a packet lcore and copied to other
// threads; merge() runs on whichever thread holds the copies.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/histogram.h"
#include "base/units.h"

namespace rowan::gw {

/// One peer (and the WAN link it uses), as a packet lcore published it.
struct PeerMetrics {
  std::string peer;
  std::string link;
  bool up = false;
  double last_receive_unix_s = 0;    ///< wall time of the last datagram (0: never)
  double last_handshake_unix_s = 0;  ///< wall time of the last handshake (0: none known)
  Duration srtt, min_rtt;
  BitsPerSec btlbw;  ///< bottleneck bandwidth estimate (0 before the first sample)
  Bytes bdp = 0;     ///< btlbw x min RTT, or the configured BDP until both are measured
  Bytes cwnd = 0;
  BitsPerSec pacing_rate;
  Bytes inflight = 0;
  Bytes send_buffer_used = 0, send_buffer_capacity = 0;
  Bytes send_buffer_budget = 0;  ///< what unacked stream bytes may reach (send_buffer_bdp x BDP)
  Bytes recv_buffer_used = 0, recv_buffer_capacity = 0;
  uint64_t goodput_bytes = 0;  ///< stream bytes the peer acknowledged
  uint64_t tx_packets = 0, tx_bytes = 0, rx_packets = 0, rx_bytes = 0;  ///< datagrams on the wire
  uint64_t carried_packets = 0, carried_bytes = 0;      ///< local IP packets sent to the peer
  uint64_t delivered_packets = 0, delivered_bytes = 0;  ///< IP packets from the peer delivered
  uint64_t retransmitted_packets = 0, retransmitted_bytes = 0;
  uint64_t lost_packets = 0, loss_events = 0, ptos = 0, rtos = 0, spurious_losses = 0;
  uint64_t ecn_marks = 0;  ///< CE marks the gateway applied to this peer's flows
  // Forward error correction over all the peer's paths (docs/wan-transport.md).
  uint64_t fec_source_packets = 0, fec_repair_packets = 0, fec_repair_bytes = 0;
  uint64_t fec_recovered = 0;      ///< the peer's packets rebuilt from repair symbols
  uint64_t fec_unrecoverable = 0;  ///< blocks given up with sources missing
  // Link security (docs/link-security.md); all zero on an insecure link.
  uint64_t handshakes = 0, rekeys = 0, peer_restarts = 0, transport_resets = 0;
  // Outages (peer_health.h): silences longer than PeerHealth::kDeadAfter.
  uint64_t outages = 0;
  Duration outage_total;  ///< finished outages plus the one under way
  LatencyHistogram rtt, queue_delay;
  static constexpr size_t kDropReasons = 9;
  static const char* const kDropNames[kDropReasons];  ///< transport drop reasons
  std::array<uint64_t, kDropReasons> drops{};
  // The WAN link under it (udp backend: socket counters).
  BitsPerSec link_rate;
  Duration link_rtt;
  uint64_t link_tx_packets = 0, link_tx_bytes = 0, link_rx_packets = 0, link_rx_bytes = 0;
  uint64_t link_tx_full = 0, link_tx_errors = 0, link_rx_wrong_source = 0;
};

/// One path of a peer (ARCHITECTURE.md "Paths"): the transport's view of it
/// and the datagrams that crossed its link. A peer has at most one path per
/// link, so (peer, link) names it.
struct PathMetrics {
  std::string peer;
  std::string link;
  uint32_t path = 0;  ///< its index (both gateways number the paths alike)
  bool up = true;
  BitsPerSec link_rate;
  Duration link_rtt;
  Duration srtt, min_rtt;
  Bytes cwnd = 0;
  BitsPerSec pacing_rate;
  Bytes inflight = 0;
  uint64_t sent_packets = 0, sent_bytes = 0, received_packets = 0, received_bytes = 0;
  uint64_t lost_packets = 0, retransmitted_packets = 0, ptos = 0;
  uint64_t downs = 0, ups = 0;  ///< transitions to down and back up
  uint64_t keepalives = 0;      ///< PINGs sent while up and idle
  // Forward error correction on the path.
  uint64_t fec_source_packets = 0, fec_repair_packets = 0, fec_repair_bytes = 0;
  uint64_t fec_recovered = 0;
  uint32_t fec_k = 0, fec_m = 0;  ///< current code rate (k = 0: not coding)
};

/// A DPDK port (rte_eth_stats).
struct PortMetrics {
  std::string port;  ///< device name
  std::string role;  ///< "local" or "wan"
  uint64_t ipackets = 0, opackets = 0, ibytes = 0, obytes = 0, imissed = 0, ierrors = 0,
           oerrors = 0, rx_nombuf = 0;
};

struct RouteMetrics {
  std::string prefix;
  std::string peer;
  std::string mode;
  uint64_t active_flows = 0;
  uint64_t active_packets = 0, active_bytes = 0;  ///< carried so far by the flows in the table
};

/// One of the flows that carried the most bytes (the exporter keeps kTopFlows).
struct FlowMetrics {
  std::string peer, kind, src, dst;
  std::string id;  ///< "qp 17" (RoCE), "5201>40000" (ports), "proto 47"
  uint64_t packets = 0, bytes = 0;
};
inline constexpr size_t kTopFlows = 10;

/// Split mode (split_engine.h): what the gateways did in the hosts' stead,
/// and the flows it follows now.
struct SplitMetrics {
  uint64_t local_acks = 0, naks = 0, cnps = 0;  ///< sent to local requesters
  uint64_t reoriginated = 0;   ///< packets sent to the responder host by the egress gateway
  uint64_t retransmitted = 0;  ///< ... of which again, from the gateway's buffer
  uint64_t paired = 0;         ///< flows switched to split (by ACK or RDMA CM)
  uint64_t fatal = 0;          ///< fatal NAKs / exhausted retries reported
  uint64_t tracking = 0, ingress = 0, egress = 0;  ///< flows now: unpaired, paired by role
};

/// One packet loop (worker): how its time went.
struct WorkerMetrics {
  uint32_t worker = 0;                      ///< the worker's index (0..workers-1)
  Duration busy, idle;                      ///< passes that found work / found none (and slept)
  double busy_ratio = 0;                    ///< busy share of the last second
  uint32_t lcore = 0;                       ///< the EAL lcore it runs on
  uint64_t active_flows = 0;                ///< flows in its table
  uint64_t rx_packets = 0, tx_packets = 0;  ///< frames from / to the site port
  // Queues per worker (handoff.h); zero otherwise.
  uint64_t handoff_out = 0;    ///< frames it read from its queue and handed to their owner
  uint64_t handoff_in = 0;     ///< frames other workers handed to it
  uint64_t handoff_drops = 0;  ///< frames it dropped: the owner's ring was full
};

/// What one packet lcore publishes. merge() sums another lcore's copy in.
struct DataPathMetrics {
  uint64_t lcores = 0;           ///< how many lcores were merged into this one
  uint64_t loop_iterations = 0;  ///< packet-loop passes (the heartbeat)
  uint64_t local_rx_packets = 0, local_rx_bytes = 0, local_tx_packets = 0, local_tx_bytes = 0;
  uint64_t arp_requests = 0, arp_replies = 0;
  uint64_t vlan_rx = 0, vlan_tx = 0;  ///< 802.1Q-tagged frames from / to the site port
  uint64_t flows_active = 0, flows_created = 0, flows_expired = 0, neighbors = 0;
  /// Hosts without a MAC (being asked, or failed: Worker::age_neighbors),
  /// and streams whose next record waits for one (Worker::host_waits).
  uint64_t neighbors_unresolved = 0, streams_waiting_for_host = 0;
  std::vector<uint64_t> drops;  ///< by gateway drop reason (index: Drop)
  std::vector<PeerMetrics> peers;
  std::vector<PathMetrics> paths;
  std::vector<PortMetrics> ports;
  std::vector<RouteMetrics> routes;
  std::vector<WorkerMetrics> workers;  ///< one per packet lcore (merge appends)
  std::vector<FlowMetrics> top_flows;  ///< the lcore's kTopFlows largest (merge appends)
  SplitMetrics split;

  /// Adds `o`: scalar counters and drops are summed; peers, ports and routes
  /// with the same key are summed, others appended.
  void merge(const DataPathMetrics& o);
};

}  // namespace rowan::gw
