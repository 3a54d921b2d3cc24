// Worker::publish and the snapshot the control socket reads. The worker's
// publish step (about ten times a second and on a control request, never per
// packet) copies its counters and estimates as plain values (copy_state);
// the control thread renders them as JSON (render_*), so no JSON is built on
// a packet lcore. site.cc merges the workers' snapshots.
#include <chrono>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "crypto/aead.h"
#include "datapath/worker.h"
#include "rowan/build_version.h"

namespace rowan::gw {
namespace {

std::string mac_text(const Mac& m) {
  return fmt::format("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4],
                     m[5]);
}

// A peer's event lines into the log (publish, never the packet path).
void log_lines(const std::vector<PeerEvents::Line>& lines) {
  for (const PeerEvents::Line& line : lines) {
    if (line.level == PeerEvents::Level::kWarn) {
      spdlog::warn("{}", line.text);
    } else {
      spdlog::info("{}", line.text);
    }
  }
}

// A path's forward error correction (transport/fec_coder.h): its current
// code rate and what it sent and rebuilt.
nlohmann::ordered_json fec_view(const transport::PathStats& s) {
  return nlohmann::ordered_json{{"k", s.fec_k},
                                {"m", s.fec_m},
                                {"source_packets", s.fec_source_packets},
                                {"repair_packets", s.fec_repair_sent},
                                {"repair_bytes", s.fec_repair_bytes},
                                {"recovered_packets", s.fec_recovered}};
}

}  // namespace

void Worker::copy_state(TimePoint now, Published& out) const {
  out.at = now;
  out.ctr = ctr_;
  out.local_port = local_.stats();
  out.routes = routes_;
  out.flows = flows_.size();
  out.neighbors = neigh_.size();
  out.unresolved = unresolved_neighbors();
  out.waiting = streams_waiting_for_host();
  out.busy = busy_.busy_ratio();
  split_->view(out.split);
  out.peers.resize(peers_.size());
  for (size_t k = 0; k < peers_.size(); ++k) {
    const PeerState& p = *peers_[k];
    PeerCopy& c = out.peers[k];
    c.s = p.conn->stats();
    c.up = p.health.up();
    c.seen = p.health.seen();
    c.outages = p.health.outages();
    c.outage_total = p.health.outage_total();
    c.down_for = p.health.down_for(now);
    c.last_outage = p.health.last_outage();
    c.last_rx = p.last_rx;
    c.cc.assign(p.conn->cc().name());
    c.bdp = p.conn->bdp();
    c.send_budget = p.conn->send_buffer_capacity();
    c.carried_packets = p.carried_packets;
    c.carried_bytes = p.carried_bytes;
    c.delivered_packets = p.delivered_packets;
    c.delivered_bytes = p.delivered_bytes;
    if (p.secure()) {
      c.ss = p.secure_stats();
      c.peer_up = p.peer_up(now);
    }
    c.transport_resets = p.transport_resets;
    c.paths.resize(p.paths.size());
    for (uint16_t i = 0; i < p.paths.size(); ++i) {
      const PeerPath& path = p.paths[i];
      PathCopy& pc = c.paths[i];
      pc.io = path.link_io().stats();
      pc.s = p.conn->path_stats(transport::PathId{i});
      pc.session_up = path.secure && path.secure->peer_up(now);
      // udp_uring.h: the link's socket (its own, or the one the peers of a
      // shared link use).
      const io::UdpUringIo* sock = path.io                  ? path.io.get()
                                   : path.shared != nullptr ? &path.shared->mux().socket()
                                                            : nullptr;
      if (sock != nullptr) {
        pc.udp = sock->udp_stats();
        pc.gso = sock->gso_enabled();
        pc.gro = sock->gro_enabled();
      }
      if (path.shared != nullptr) pc.mux_drops = path.shared->mux().drops();
      if (path.dpdk) {
        pc.wan = path.dpdk->wan_stats();
        pc.resolved = path.dpdk->resolved();
        if (path.dpdk->queue() == 0) pc.port = path.dpdk->port_stats();
      }
    }
  }
  out.listed.clear();
  for (const Flow& f : flows_.flows()) {
    if (!f.used) continue;
    if (out.listed.size() >= kListedFlows) break;
    out.listed.push_back({f.key, f.peer, f.stream, f.packets, f.bytes, f.ce_marked, f.dropped,
                          peers_[f.peer]->conn->stream_unacked(f.stream),
                          (now - f.last_seen).seconds()});
  }
}

void Worker::publish(TimePoint now) {
  // The peers' events, logged here (every 100 ms) rather than on the packet path.
  for (auto& pp : peers_) {
    PeerState& p = *pp;
    transport::PathEvent ev;
    while (p.conn->next_path_event(&ev)) {
      if (ev.path.index >= p.paths.size()) continue;
      const bool up = ev.state == transport::PathState::kUp;
      log_lines(p.events.path_event(ev.path.index, p.paths[ev.path.index].link->name, up, now));
    }
    PeerEvents::Observation o;
    o.up = p.health.up();
    o.seen = p.health.seen();
    o.outages = p.health.outages();
    o.last_outage = p.health.last_outage();
    if (p.secure()) {
      const crypto::SecureStats ss = p.secure_stats();
      o.handshakes = ss.handshakes_completed;
      o.peer_restarts = ss.peer_restarts;
    }
    log_lines(p.events.observe(o, now));
  }
  copy_state(now, pub_next_);
  DataPathMetrics m;
  fill_metrics(now, m);
  {
    std::lock_guard<std::mutex> lock(snap_mu_);
    std::swap(pub_, pub_next_);
    metrics_ = std::move(m);
    ++snap_gen_;
    publish_wanted_.store(false, std::memory_order_release);
  }
  snap_cv_.notify_all();
}

nlohmann::ordered_json Worker::snapshot(const std::string& cmd, Duration wait) const {
  if (cmd != "status" && cmd != "peers" && cmd != "links" && cmd != "flows") {
    throw std::invalid_argument("unknown command '" + cmd + "'");
  }
  Published pub;
  {
    std::unique_lock<std::mutex> lock(snap_mu_);
    const uint64_t gen = snap_gen_;
    publish_wanted_.store(true, std::memory_order_release);
    snap_cv_.wait_for(lock, std::chrono::nanoseconds(wait.ns()), [&] { return snap_gen_ != gen; });
    pub = pub_;  // a copy: the JSON is built after the lock is released
  }
  return render(cmd, pub);
}

nlohmann::ordered_json Worker::render(const std::string& cmd, const Published& pub) const {
  if (cmd == "flows") return render_flows(pub);
  if (cmd == "peers") return render_peers(pub);
  if (cmd == "links") return render_links(pub);
  return render_status(pub);
}

nlohmann::ordered_json Worker::render_flows(const Published& pub) const {
  using J = nlohmann::ordered_json;
  J flows = J::array();
  for (const FlowView& f : pub.listed) {
    J fj{{"kind", to_string(f.key.kind)},
         {"src", ip_text(f.key.src)},
         {"dst", ip_text(f.key.dst)},
         {"peer", peers_[f.peer]->cfg.name},
         {"stream", f.stream},
         {"packets", f.packets},
         {"bytes", f.bytes},
         {"ce_marked", f.ce_marked},
         {"dropped", f.dropped},
         {"buffered_bytes", f.buffered},
         {"idle_s", f.idle_s}};
    if (f.key.kind == FlowKind::kRoce) {
      fj["dest_qp"] = f.key.qp;
    } else if (f.key.kind != FlowKind::kOther) {
      fj["sport"] = f.key.sport;
      fj["dport"] = f.key.dport;
    } else {
      fj["proto"] = f.key.proto;
    }
    flows.push_back(std::move(fj));
  }
  return flows;
}

nlohmann::ordered_json Worker::render_peers(const Published& pub) const {
  using J = nlohmann::ordered_json;
  const TimePoint now = pub.at;
  J peers = J::array();
  for (size_t k = 0; k < peers_.size() && k < pub.peers.size(); ++k) {
    const PeerState& p = *peers_[k];
    const PeerCopy& c = pub.peers[k];
    const transport::ConnStats& s = c.s;
    // A peer's paths as `rowanctl peers` shows them: link, state, RTT, cwnd.
    J paths = J::array();
    for (uint16_t i = 0; i < p.paths.size() && i < c.paths.size(); ++i) {
      const transport::PathStats& ps = c.paths[i].s;
      paths.push_back(J{{"path", i},
                        {"link", p.paths[i].link->name},
                        {"endpoint", p.paths[i].endpoint.to_string()},
                        {"state", transport::to_string(ps.state)},
                        {"srtt_s", ps.srtt.seconds()},
                        {"cwnd_bytes", ps.cwnd},
                        {"bytes_sent", ps.bytes_sent},
                        {"bytes_received", ps.bytes_received},
                        {"fec", fec_view(ps)}});
    }
    J v{
        {"name", p.cfg.name},
        {"endpoint", p.cfg.endpoint.to_string()},
        {"link", p.link().name},
        {"paths", paths},
        {"state", c.up ? "up" : (c.seen ? "down" : "waiting")},
        {"outages", c.outages},
        {"outage_seconds_total", (c.outage_total + c.down_for).seconds()},
        {"last_outage_s", c.last_outage.seconds()},
        {"down_for_s", c.down_for.seconds()},
        {"last_rx_seconds_ago", c.last_rx.is_zero() ? -1.0 : (now - c.last_rx).seconds()},
        {"cc", c.cc},
        {"srtt_s", s.srtt.seconds()},
        {"min_rtt_s", s.min_rtt.seconds()},
        {"rttvar_s", s.rttvar.seconds()},
        {"cwnd_bytes", s.cwnd},
        {"pacing_rate_bps", s.pacing_rate.bps()},
        {"bdp_bytes", c.bdp},
        {"bytes_in_flight", s.bytes_in_flight},
        {"delivered_bytes", s.delivered_bytes},
        {"packets_sent", s.packets_sent},
        {"packets_received", s.packets_received},
        {"retransmitted_packets", s.retransmitted_packets},
        {"retransmitted_bytes", s.retransmitted_bytes},
        {"lost_packets", s.lost_packets},
        {"ptos", s.ptos},
        {"rtos", s.rtos},
        {"fec", J{{"mode", p.cfg.fec ? "auto" : "off"},
                  {"max_overhead", p.cfg.fec_max_overhead},
                  {"source_packets", s.fec_source_packets},
                  {"repair_packets", s.fec_repair_sent},
                  {"repair_bytes", s.fec_repair_bytes},
                  {"recovered_packets", s.fec_recovered},
                  {"unrecoverable_blocks", s.fec_unrecoverable}}},
        {"send_buffer_used_bytes", s.send_buffer_used},
        {"send_buffer_capacity_bytes", s.send_buffer_capacity},
        {"send_buffer_budget_bytes", c.send_budget},
        {"recv_buffer_used_bytes", s.recv_buffer_used},
        {"carried_packets", c.carried_packets},
        {"carried_bytes", c.carried_bytes},
        {"delivered_packets", c.delivered_packets},
        {"delivered_ip_bytes", c.delivered_bytes},
        // Of the stream bytes received, those copied straight from their
        // datagram into the site mbuf (the rest went through the stream's
        // buffer: reordered, or behind a full local queue).
        {"stream_bytes_received", s.stream_bytes_received},
        {"stream_bytes_read_in_place", s.stream_bytes_read_in_place},
        {"transport_drops", J{{"malformed", s.drop_malformed},
                              {"bad_version", s.drop_bad_version},
                              {"bad_connection_id", s.drop_bad_connection_id},
                              {"bad_integrity", s.drop_bad_integrity},
                              {"duplicate", s.drop_duplicate},
                              {"flow_control", s.drop_flow_control},
                              {"too_many_streams", s.drop_too_many_streams}}},
    };
    if (p.secure()) {
      const crypto::SecureStats& ss = c.ss;
      J drops = J::object();
      for (size_t i = 0; i < ss.drops.size(); ++i) {
        drops[crypto::to_string(static_cast<crypto::SecureDrop>(i))] = ss.drops[i];
      }
      v["encryption"] = "aes-256-gcm";
      v["session"] = c.peer_up ? "up" : "down";
      v["last_handshake_seconds_ago"] =
          ss.last_handshake.is_zero() ? -1.0 : (now - ss.last_handshake).seconds();
      v["handshakes"] = ss.handshakes_completed;
      v["rekeys"] = ss.rekeys;
      v["tx_no_session"] = ss.tx_no_session;
      v["records_sealed"] = ss.tx_data;
      v["records_sealed_in_place"] = ss.tx_sealed_in_place;
      v["records_sealed_from_pieces"] = ss.tx_sealed_pieces;
      v["security_drops"] = drops;
      v["transport_resets"] = c.transport_resets;
    } else {
      v["encryption"] = "none (insecure)";
    }
    peers.push_back(std::move(v));
  }
  return peers;
}

// Each path of each peer as `rowanctl links` lists it: the link, its socket
// or port and the counters of what crossed it.
nlohmann::ordered_json Worker::render_links(const Published& pub) const {
  using J = nlohmann::ordered_json;
  J links = J::array();
  for (size_t k = 0; k < peers_.size() && k < pub.peers.size(); ++k) {
    const PeerState& p = *peers_[k];
    for (uint16_t i = 0; i < p.paths.size() && i < pub.peers[k].paths.size(); ++i) {
      const PeerPath& path = p.paths[i];
      const PathCopy& pc = pub.peers[k].paths[i];
      const WanLinkConfig& link = *path.link;
      const io::IoStats& io = pc.io;
      J v{{"name", link.name},
          {"backend", path.dpdk ? "dpdk" : "udp"},
          {"bind", link.bind.to_string()},
          {"peer", p.cfg.name},
          {"endpoint", path.endpoint.to_string()},
          {"path", i},
          {"rate_bps", link.rate.bps()},
          {"rtt_s", link.rtt.seconds()},
          {"mtu", link.mtu},
          {"tx_packets", io.tx_packets},
          {"tx_bytes", io.tx_bytes},
          {"rx_packets", io.rx_packets},
          {"rx_bytes", io.rx_bytes},
          {"tx_full", io.tx_full},
          {"rx_wrong_source", path.io ? pc.udp.rx_wrong_source : 0},
          {"tx_errors", path.io ? pc.udp.tx_errors : 0},
          {"shared_by", path.shared ? path.shared->mux().ports().size() : 1}};
      // The transport's view of the path (transport/connection.h PathStats).
      const transport::PathStats& s = pc.s;
      v["state"] = transport::to_string(s.state);
      v["srtt_s"] = s.srtt.seconds();
      v["min_rtt_s"] = s.min_rtt.seconds();
      v["cwnd_bytes"] = s.cwnd;
      v["pacing_rate_bps"] = s.pacing_rate.bps();
      v["bytes_in_flight"] = s.bytes_in_flight;
      v["packets_sent"] = s.packets_sent;
      v["bytes_sent"] = s.bytes_sent;
      v["packets_received"] = s.packets_received;
      v["bytes_received"] = s.bytes_received;
      v["bytes_acked"] = s.bytes_acked;
      v["lost_packets"] = s.lost_packets;
      v["retransmitted_packets"] = s.retransmitted_packets;
      v["downs"] = s.downs;
      v["ups"] = s.ups;
      v["keepalives"] = s.keepalives_sent;
      v["probes_sent"] = s.probes_sent;
      v["fec"] = fec_view(s);
      if (path.secure) v["session"] = pc.session_up ? "up" : "down";
      if (path.io || path.shared != nullptr) {  // udp_uring.h: segmentation offload
        const io::UdpStats& us = pc.udp;
        v["offload"] = J{{"gso", pc.gso},
                         {"gro", pc.gro},
                         {"gso_sends", us.tx_gso_sends},
                         {"gso_datagrams", us.tx_gso_datagrams},
                         {"gso_fallbacks", us.gso_fallbacks},
                         {"gro_trains", us.rx_gro_trains},
                         {"gro_datagrams", us.rx_gro_datagrams}};
      }
      if (path.shared != nullptr) {  // wan_link_mux.h: the socket's, for every peer on it
        J drops = J::object();
        for (size_t d = 0; d < pc.mux_drops.size(); ++d) drops[kMuxDropNames[d]] = pc.mux_drops[d];
        v["demux_drops"] = drops;
        v["tx_errors"] = pc.udp.tx_errors;
      }
      if (path.dpdk) {  // dpdk_wan_io.h: the port's drops by reason, ARP and device counters
        const DpdkWanStats& ws = pc.wan;
        J drops = J::object();
        for (size_t d = 0; d < ws.drops.size(); ++d) drops[kWanDropNames[d]] = ws.drops[d];
        v["rx_wrong_source"] = ws.drops[static_cast<size_t>(WanDrop::kWrongSource)];
        v["device"] = link.device;
        v["resolved"] = pc.resolved;
        v["drops"] = drops;
        v["arp"] = J{{"requests_sent", ws.arp_requests_sent},
                     {"replies_sent", ws.arp_replies_sent},
                     {"learned", ws.arp_learned}};
        v["queues"] = path.dpdk->port().queues();
        v["steered"] = J{{"out", ws.steered_out}, {"in", ws.steered_in}};
        if (path.dpdk->queue() == 0) {  // the port's counters, once for all its queues
          const PortStats& ps = pc.port;
          v["port"] =
              J{{"ipackets", ps.ipackets}, {"opackets", ps.opackets}, {"imissed", ps.imissed},
                {"ierrors", ps.ierrors},   {"oerrors", ps.oerrors},   {"rx_nombuf", ps.rx_nombuf}};
        }
      }
      links.push_back(std::move(v));
    }
  }
  return links;
}

nlohmann::ordered_json Worker::render_status(const Published& pub) const {
  using J = nlohmann::ordered_json;
  uint64_t carried = 0;
  uint64_t delivered = 0;
  for (const PeerCopy& c : pub.peers) {
    carried += c.carried_packets;
    delivered += c.delivered_packets;
  }
  J drops = J::object();
  for (size_t i = 0; i < pub.ctr.drops.size(); ++i) drops[kDropNames[i]] = pub.ctr.drops[i];
  J flow_drops = J::object();
  for (size_t i = 0; i < pub.ctr.flow_drops.size(); ++i) {
    flow_drops[to_string(static_cast<FlowKind>(i))] = pub.ctr.flow_drops[i];
  }
  const PortStats& ps = pub.local_port;
  J routes = J::array();
  for (const Route& r : pub.routes) {
    routes.push_back(J{{"prefix", r.prefix.to_string()},
                       {"peer", peers_[r.peer]->cfg.name},
                       {"mode", to_string(r.mode)}});
  }
  J status{{"version", ROWAN_BUILD_VERSION},
           {"uptime_s", (pub.at - started_).seconds()},
           {"config", cfg_.path},
           {"local", J{{"device", cfg_.local.device},
                       {"address",
                        ip_text(cfg_.local.address) + "/" + std::to_string(cfg_.local.prefix_len)},
                       {"mac", mac_text(mac_)},
                       {"rx_packets", pub.ctr.local_rx_packets},
                       {"rx_bytes", pub.ctr.local_rx_bytes},
                       {"tx_packets", pub.ctr.local_tx_packets},
                       {"tx_bytes", pub.ctr.local_tx_bytes},
                       {"port", J{{"ipackets", ps.ipackets},
                                  {"opackets", ps.opackets},
                                  {"imissed", ps.imissed},
                                  {"ierrors", ps.ierrors},
                                  {"oerrors", ps.oerrors},
                                  {"rx_nombuf", ps.rx_nombuf}}}}},
           {"routes", routes},
           {"security", cfg_.local.insecure ? "INSECURE (plaintext WAN links)" : "aes-256-gcm"},
           {"aead_impl", cfg_.local.insecure ? std::string_view("none")
                                             : crypto::AesGcm::default_backend_name()},
           {"peers", peers_.size()},
           {"flows", pub.flows},
           {"flows_created", pub.ctr.flows_created},
           {"flows_expired", pub.ctr.flows_expired},
           {"neighbors", pub.neighbors},
           {"neighbors_unresolved", pub.unresolved},
           {"streams_waiting_for_host", pub.waiting},
           {"carried_packets", carried},
           {"delivered_packets", delivered},
           {"ce_marked", pub.ctr.ce_marked},
           {"arp_replies", pub.ctr.arp_replies},
           {"arp_requests", pub.ctr.arp_requests},
           {"vlan_rx", pub.ctr.vlan_rx},
           {"vlan_tx", pub.ctr.vlan_tx},
           {"drops", drops},
           {"flow_drops", flow_drops},
           {"split", SplitEngine::render(pub.split)},
           {"worker", J{{"index", worker_.index},
                        {"lcore", worker_.lcore},
                        {"active_flows", pub.flows},
                        {"rx_packets", pub.ctr.local_rx_packets},
                        {"tx_packets", pub.ctr.local_tx_packets},
                        {"rx_holds", pub.ctr.rx_holds},
                        {"flow_cache_hits", pub.ctr.flow_cache_hits},
                        {"busy", pub.busy}}}};
  return status;
}

}  // namespace rowan::gw
