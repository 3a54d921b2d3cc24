// Worker::fill_metrics and Worker::metrics: the packet lcore's plain
// counters copied into a DataPathMetrics (metrics.h) for the Prometheus
// collector. Runs in publish(), about ten times a second, never per packet.
#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "datapath/worker.h"

namespace rowan::gw {

void Worker::fill_metrics(TimePoint now, DataPathMetrics& m) const {
  // One wall-clock read per publish turns monotonic times into Unix times.
  const double wall_now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  auto unix_s = [&](TimePoint t) { return t.is_zero() ? 0.0 : wall_now - (now - t).seconds(); };

  m.lcores = 1;
  m.loop_iterations = ctr_.loops;
  WorkerMetrics wm;
  wm.worker = worker_.index;
  wm.lcore = worker_.lcore;
  wm.busy = busy_.busy();
  wm.idle = busy_.idle();
  wm.busy_ratio = busy_.busy_ratio();
  wm.active_flows = flows_.size();
  wm.rx_packets = ctr_.local_rx_packets;
  wm.tx_packets = ctr_.local_tx_packets;
  m.workers.push_back(wm);
  m.local_rx_packets = ctr_.local_rx_packets;
  m.local_rx_bytes = ctr_.local_rx_bytes;
  m.local_tx_packets = ctr_.local_tx_packets;
  m.local_tx_bytes = ctr_.local_tx_bytes;
  m.arp_requests = ctr_.arp_requests;
  m.arp_replies = ctr_.arp_replies;
  m.vlan_rx = ctr_.vlan_rx;
  m.vlan_tx = ctr_.vlan_tx;
  m.flows_active = flows_.size();
  m.flows_created = ctr_.flows_created;
  m.flows_expired = ctr_.flows_expired;
  m.neighbors = neigh_.size();
  m.neighbors_unresolved = unresolved_neighbors();
  m.streams_waiting_for_host = streams_waiting_for_host();
  m.drops.assign(ctr_.drops.begin(), ctr_.drops.end());

  m.peers.reserve(peers_.size());
  for (const auto& pp : peers_) {
    const PeerState& p = *pp;
    const transport::ConnStats& s = p.conn->stats();
    PeerMetrics pm;
    pm.peer = p.cfg.name;
    pm.link = p.link().name;
    pm.up = p.health.up();
    pm.last_receive_unix_s = unix_s(p.last_rx);
    if (p.secure()) {
      // An encrypted link is up while a session is (handshake done, peer heard).
      const crypto::SecureStats ss = p.secure_stats();
      pm.up = p.health.up() && p.has_session(now);
      pm.last_handshake_unix_s = unix_s(ss.last_handshake);
      pm.handshakes = ss.handshakes_completed;
      pm.rekeys = ss.rekeys;
      pm.peer_restarts = ss.peer_restarts;
    }
    pm.transport_resets = p.transport_resets;
    pm.outages = p.health.outages();
    pm.outage_total = p.health.outage_total() + p.health.down_for(now);
    pm.srtt = s.srtt;
    pm.min_rtt = s.min_rtt;
    pm.btlbw = s.btlbw;
    const Bytes measured = s.btlbw.bytes_in(s.min_rtt);
    pm.bdp = measured > 0 ? measured : p.conn->bdp();
    pm.cwnd = s.cwnd;
    pm.pacing_rate = s.pacing_rate;
    pm.inflight = s.bytes_in_flight;
    pm.send_buffer_used = s.send_buffer_used;
    pm.send_buffer_capacity = s.send_buffer_capacity;
    pm.send_buffer_budget = p.conn->send_buffer_capacity();
    pm.recv_buffer_used = s.recv_buffer_used;
    pm.recv_buffer_capacity = s.recv_buffer_capacity;
    pm.goodput_bytes = s.delivered_bytes;
    pm.tx_packets = s.packets_sent;
    pm.tx_bytes = s.bytes_sent;
    pm.rx_packets = s.packets_received;
    pm.rx_bytes = s.bytes_received;
    pm.carried_packets = p.carried_packets;
    pm.carried_bytes = p.carried_bytes;
    pm.delivered_packets = p.delivered_packets;
    pm.delivered_bytes = p.delivered_bytes;
    pm.retransmitted_packets = s.retransmitted_packets;
    pm.retransmitted_bytes = s.retransmitted_bytes;
    pm.lost_packets = s.lost_packets;
    pm.loss_events = s.loss_events;
    pm.ptos = s.ptos;
    pm.rtos = s.rtos;
    pm.spurious_losses = s.spurious_losses;
    pm.ecn_marks = p.ce_marked;
    pm.fec_source_packets = s.fec_source_packets;
    pm.fec_repair_packets = s.fec_repair_sent;
    pm.fec_repair_bytes = s.fec_repair_bytes;
    pm.fec_recovered = s.fec_recovered;
    pm.fec_unrecoverable = s.fec_unrecoverable;
    pm.rtt = s.rtt_histogram;
    pm.queue_delay = s.queue_delay_histogram;
    pm.drops = {s.drop_malformed,        s.drop_bad_version, s.drop_bad_connection_id,
                s.drop_bad_integrity,    s.drop_duplicate,   s.drop_flow_control,
                s.drop_too_many_streams, s.drop_no_buffer,   s.drop_invalid_ack};
    const PeerPath& first = p.paths.front();
    pm.link_rate = first.link->rate;
    pm.link_rtt = first.link->rtt;
    const io::IoStats& io = first.link_io().stats();
    pm.link_tx_packets = io.tx_packets;
    pm.link_tx_bytes = io.tx_bytes;
    pm.link_rx_packets = io.rx_packets;
    pm.link_rx_bytes = io.rx_bytes;
    pm.link_tx_full = io.tx_full;
    if (first.io) {
      pm.link_tx_errors = first.io->udp_stats().tx_errors;
      pm.link_rx_wrong_source = first.io->udp_stats().rx_wrong_source;
    } else if (first.shared != nullptr) {
      // The shared socket's counters belong to no one peer: they are the
      // link's: `rowanctl links` shows them (demux_drops, tx_errors).
    } else {  // dpdk backend: frames it could not send, and foreign sources
      const DpdkWanStats& ws = first.dpdk->wan_stats();
      pm.link_tx_errors = ws.drops[static_cast<size_t>(WanDrop::kTxUnresolved)] +
                          ws.drops[static_cast<size_t>(WanDrop::kTxOversize)];
      pm.link_rx_wrong_source = ws.drops[static_cast<size_t>(WanDrop::kWrongSource)];
    }
    m.peers.push_back(std::move(pm));
    for (uint16_t i = 0; i < p.paths.size(); ++i) {
      const transport::PathStats& ps = p.conn->path_stats(transport::PathId{i});
      PathMetrics path;
      path.peer = p.cfg.name;
      path.link = p.paths[i].link->name;
      path.path = i;
      path.up = ps.state == transport::PathState::kUp;
      path.link_rate = p.paths[i].link->rate;
      path.link_rtt = p.paths[i].link->rtt;
      path.srtt = ps.srtt;
      path.min_rtt = ps.min_rtt;
      path.cwnd = ps.cwnd;
      path.pacing_rate = ps.pacing_rate;
      path.inflight = ps.bytes_in_flight;
      path.sent_packets = ps.packets_sent;
      path.sent_bytes = ps.bytes_sent;
      path.received_packets = ps.packets_received;
      path.received_bytes = ps.bytes_received;
      path.lost_packets = ps.lost_packets;
      path.retransmitted_packets = ps.retransmitted_packets;
      path.ptos = ps.ptos;
      path.downs = ps.downs;
      path.ups = ps.ups;
      path.keepalives = ps.keepalives_sent;
      path.fec_source_packets = ps.fec_source_packets;
      path.fec_repair_packets = ps.fec_repair_sent;
      path.fec_repair_bytes = ps.fec_repair_bytes;
      path.fec_recovered = ps.fec_recovered;
      path.fec_k = ps.fec_k;
      path.fec_m = ps.fec_m;
      m.paths.push_back(std::move(path));
    }
  }

  if (worker_.reports_port) {  // the port is one, however many workers read it
    const PortStats ps = local_.stats();
    PortMetrics port;
    port.port = local_.name();
    port.role = "local";
    port.ipackets = ps.ipackets;
    port.opackets = ps.opackets;
    port.ibytes = ps.ibytes;
    port.obytes = ps.obytes;
    port.imissed = ps.imissed;
    port.ierrors = ps.ierrors;
    port.oerrors = ps.oerrors;
    port.rx_nombuf = ps.rx_nombuf;
    m.ports.push_back(std::move(port));
  }

  m.routes.reserve(routes_.size());
  for (const Route& r : routes_) {
    m.routes.push_back(
        RouteMetrics{r.prefix.to_string(), peers_[r.peer]->cfg.name, to_string(r.mode), 0});
  }
  std::vector<const Flow*> used;
  used.reserve(flows_.size());
  for (const Flow& f : flows_.flows()) {
    if (!f.used) continue;
    used.push_back(&f);
    const Route* r = lookup(f.key.dst);
    if (r == nullptr) continue;
    RouteMetrics& rm = m.routes[static_cast<size_t>(r - routes_.data())];
    ++rm.active_flows;
    rm.active_packets += f.packets;
    rm.active_bytes += f.bytes;
  }
  // The largest flows by bytes (the exporter ranks them across lcores).
  const size_t n = std::min(used.size(), kTopFlows);
  std::partial_sort(used.begin(), used.begin() + static_cast<std::ptrdiff_t>(n), used.end(),
                    [](const Flow* a, const Flow* b) { return a->bytes > b->bytes; });
  for (size_t i = 0; i < n; ++i) {
    const Flow& f = *used[i];
    FlowMetrics fm;
    fm.peer = peers_[f.peer]->cfg.name;
    fm.kind = to_string(f.key.kind);
    fm.src = ip_text(f.key.src);
    fm.dst = ip_text(f.key.dst);
    if (f.key.kind == FlowKind::kRoce) {
      fm.id = fmt::format("qp {}", f.key.qp);
    } else if (f.key.kind != FlowKind::kOther) {
      fm.id = fmt::format("{}>{}", f.key.sport, f.key.dport);
    } else {
      fm.id = fmt::format("proto {}", f.key.proto);
    }
    fm.packets = f.packets;
    fm.bytes = f.bytes;
    m.top_flows.push_back(std::move(fm));
  }
  const SplitStats& ss = split_->stats();
  m.split.local_acks = ss.acks_sent;
  m.split.naks = ss.naks_sent;
  m.split.cnps = ss.cnps_sent;
  m.split.reoriginated = ss.reoriginated;
  m.split.retransmitted = ss.retransmitted;
  m.split.paired = ss.flows_paired;
  m.split.fatal = ss.fatal;
  const auto roles = split_->role_counts();
  m.split.tracking = roles[0];
  m.split.ingress = roles[1];
  m.split.egress = roles[2];
}

DataPathMetrics Worker::metrics() const {
  std::lock_guard<std::mutex> lock(snap_mu_);
  return metrics_;
}

}  // namespace rowan::gw
