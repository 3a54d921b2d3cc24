#include "datapath/datapath_metrics.h"

#include <algorithm>

namespace rowan::gw {

const char* const PeerMetrics::kDropNames[PeerMetrics::kDropReasons] = {
    "malformed",    "bad_version",      "bad_connection_id", "bad_integrity", "duplicate",
    "flow_control", "too_many_streams", "no_buffer",         "invalid_ack"};

namespace {

void add_hist(LatencyHistogram& a, const LatencyHistogram& b) { a.merge(b); }

// A peer's or a path's state over workers: up while any is, their windows
// and rates added.
template <typename T>
void sum_window(T& a, const T& b) {
  a.up = a.up || b.up;
  a.cwnd += b.cwnd;
  a.pacing_rate = a.pacing_rate + b.pacing_rate;
  a.inflight += b.inflight;
}

// Workers each run a connection over the path: their counters and windows
// add up, the path is up while any worker's is, the RTTs are the first
// worker's (as for peers).
void sum_path(PathMetrics& a, const PathMetrics& b) {
  sum_window(a, b);
  a.sent_packets += b.sent_packets;
  a.sent_bytes += b.sent_bytes;
  a.received_packets += b.received_packets;
  a.received_bytes += b.received_bytes;
  a.lost_packets += b.lost_packets;
  a.retransmitted_packets += b.retransmitted_packets;
  a.ptos += b.ptos;
  a.downs += b.downs;
  a.ups += b.ups;
  a.keepalives += b.keepalives;
  a.fec_source_packets += b.fec_source_packets;
  a.fec_repair_packets += b.fec_repair_packets;
  a.fec_repair_bytes += b.fec_repair_bytes;
  a.fec_recovered += b.fec_recovered;
}

// `from`'s entries into `into`: one with the same peer and link is added by
// `sum`, the others appended.
template <typename T, typename Sum>
void merge_by_peer_link(std::vector<T>& into, const std::vector<T>& from, Sum sum) {
  for (const T& p : from) {
    auto it = std::find_if(into.begin(), into.end(),
                           [&](const T& q) { return q.peer == p.peer && q.link == p.link; });
    if (it == into.end()) {
      into.push_back(p);
    } else {
      sum(*it, p);
    }
  }
}

void sum_peer(PeerMetrics& a, const PeerMetrics& b) {
  sum_window(a, b);
  a.last_receive_unix_s = std::max(a.last_receive_unix_s, b.last_receive_unix_s);
  a.last_handshake_unix_s = std::max(a.last_handshake_unix_s, b.last_handshake_unix_s);
  a.send_buffer_used += b.send_buffer_used;
  a.send_buffer_capacity += b.send_buffer_capacity;
  a.send_buffer_budget += b.send_buffer_budget;
  a.recv_buffer_used += b.recv_buffer_used;
  a.recv_buffer_capacity += b.recv_buffer_capacity;
  a.goodput_bytes += b.goodput_bytes;
  a.tx_packets += b.tx_packets;
  a.tx_bytes += b.tx_bytes;
  a.rx_packets += b.rx_packets;
  a.rx_bytes += b.rx_bytes;
  a.carried_packets += b.carried_packets;
  a.carried_bytes += b.carried_bytes;
  a.delivered_packets += b.delivered_packets;
  a.delivered_bytes += b.delivered_bytes;
  a.retransmitted_packets += b.retransmitted_packets;
  a.retransmitted_bytes += b.retransmitted_bytes;
  a.lost_packets += b.lost_packets;
  a.loss_events += b.loss_events;
  a.ptos += b.ptos;
  a.rtos += b.rtos;
  a.spurious_losses += b.spurious_losses;
  a.ecn_marks += b.ecn_marks;
  a.fec_source_packets += b.fec_source_packets;
  a.fec_repair_packets += b.fec_repair_packets;
  a.fec_repair_bytes += b.fec_repair_bytes;
  a.fec_recovered += b.fec_recovered;
  a.fec_unrecoverable += b.fec_unrecoverable;
  a.handshakes += b.handshakes;
  a.rekeys += b.rekeys;
  a.peer_restarts += b.peer_restarts;
  a.transport_resets += b.transport_resets;
  a.outages += b.outages;
  a.outage_total += b.outage_total;
  add_hist(a.rtt, b.rtt);
  add_hist(a.queue_delay, b.queue_delay);
  for (size_t i = 0; i < a.drops.size(); ++i) a.drops[i] += b.drops[i];
  a.link_tx_packets += b.link_tx_packets;
  a.link_tx_bytes += b.link_tx_bytes;
  a.link_rx_packets += b.link_rx_packets;
  a.link_rx_bytes += b.link_rx_bytes;
  a.link_tx_full += b.link_tx_full;
  a.link_tx_errors += b.link_tx_errors;
  a.link_rx_wrong_source += b.link_rx_wrong_source;
  // Path estimates (RTT, bandwidth, BDP) are properties of the path, not sums:
  // keep the smaller RTTs and the larger bandwidth of the two.
  if (a.min_rtt.is_zero() || (!b.min_rtt.is_zero() && b.min_rtt < a.min_rtt)) a.min_rtt = b.min_rtt;
  if (a.srtt.is_zero() || (!b.srtt.is_zero() && b.srtt < a.srtt)) a.srtt = b.srtt;
  a.btlbw = std::max(a.btlbw, b.btlbw);
  a.bdp = std::max(a.bdp, b.bdp);
}

}  // namespace

void DataPathMetrics::merge(const DataPathMetrics& o) {
  lcores += o.lcores;
  loop_iterations += o.loop_iterations;
  local_rx_packets += o.local_rx_packets;
  local_rx_bytes += o.local_rx_bytes;
  local_tx_packets += o.local_tx_packets;
  local_tx_bytes += o.local_tx_bytes;
  arp_requests += o.arp_requests;
  arp_replies += o.arp_replies;
  vlan_rx += o.vlan_rx;
  vlan_tx += o.vlan_tx;
  flows_active += o.flows_active;
  flows_created += o.flows_created;
  flows_expired += o.flows_expired;
  neighbors += o.neighbors;
  neighbors_unresolved = std::max(neighbors_unresolved, o.neighbors_unresolved);  // same hosts
  streams_waiting_for_host += o.streams_waiting_for_host;
  if (drops.size() < o.drops.size()) drops.resize(o.drops.size());
  for (size_t i = 0; i < o.drops.size(); ++i) drops[i] += o.drops[i];
  merge_by_peer_link(peers, o.peers, sum_peer);
  merge_by_peer_link(paths, o.paths, sum_path);
  for (const PortMetrics& p : o.ports) {
    auto it = std::find_if(ports.begin(), ports.end(),
                           [&](const PortMetrics& q) { return q.port == p.port; });
    if (it == ports.end()) {
      ports.push_back(p);
      continue;
    }
    it->ipackets += p.ipackets;
    it->opackets += p.opackets;
    it->ibytes += p.ibytes;
    it->obytes += p.obytes;
    it->imissed += p.imissed;
    it->ierrors += p.ierrors;
    it->oerrors += p.oerrors;
    it->rx_nombuf += p.rx_nombuf;
  }
  workers.insert(workers.end(), o.workers.begin(), o.workers.end());
  top_flows.insert(top_flows.end(), o.top_flows.begin(), o.top_flows.end());
  split.local_acks += o.split.local_acks;
  split.naks += o.split.naks;
  split.cnps += o.split.cnps;
  split.reoriginated += o.split.reoriginated;
  split.retransmitted += o.split.retransmitted;
  split.paired += o.split.paired;
  split.fatal += o.split.fatal;
  split.tracking += o.split.tracking;
  split.ingress += o.split.ingress;
  split.egress += o.split.egress;
  for (const RouteMetrics& r : o.routes) {
    auto it = std::find_if(routes.begin(), routes.end(), [&](const RouteMetrics& q) {
      return q.prefix == r.prefix && q.peer == r.peer;
    });
    if (it == routes.end()) {
      routes.push_back(r);
    } else {
      it->active_flows += r.active_flows;
      it->active_packets += r.active_packets;
      it->active_bytes += r.active_bytes;
    }
  }
}

}  // namespace rowan::gw
