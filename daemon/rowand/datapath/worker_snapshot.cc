// Worker::publish and the snapshot the control socket reads, made in the
// worker's publish step (about ten times a second and on a control request),
// never per packet; site.cc merges the workers' snapshots. The flow list
// (up to 1,000 flows, the bulk of it) is copied as plain records and
// rendered as JSON on the control thread; status, peers and links (a few
// objects per peer) are still rendered by the worker.
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

// One path of a peer as `rowanctl links` lists it: the link, its socket or
// port and the counters of what crossed it.
// A peer's paths as `rowanctl peers` shows them: link, state, RTT, cwnd.
nlohmann::ordered_json Worker::path_summary(const PeerState& p) const {
  using J = nlohmann::ordered_json;
  J out = J::array();
  for (uint16_t i = 0; i < p.paths.size(); ++i) {
    const transport::PathStats& s = p.conn->path_stats(transport::PathId{i});
    out.push_back(J{{"path", i},
                    {"link", p.paths[i].link->name},
                    {"endpoint", p.paths[i].endpoint.to_string()},
                    {"state", transport::to_string(s.state)},
                    {"srtt_s", s.srtt.seconds()},
                    {"cwnd_bytes", s.cwnd},
                    {"bytes_sent", s.bytes_sent},
                    {"bytes_received", s.bytes_received},
                    {"fec", fec_view(s)}});
  }
  return out;
}

nlohmann::ordered_json Worker::link_view(const PeerState& p, const PeerPath& path,
                                         TimePoint now) const {
  using J = nlohmann::ordered_json;
  const WanLinkConfig& link = *path.link;
  const io::IoStats& io = path.link_io().stats();
  J v{{"name", link.name},
      {"backend", path.dpdk ? "dpdk" : "udp"},
      {"bind", link.bind.to_string()},
      {"peer", p.cfg.name},
      {"endpoint", path.endpoint.to_string()},
      {"path", static_cast<uint64_t>(&path - p.paths.data())},
      {"rate_bps", link.rate.bps()},
      {"rtt_s", link.rtt.seconds()},
      {"mtu", link.mtu},
      {"tx_packets", io.tx_packets},
      {"tx_bytes", io.tx_bytes},
      {"rx_packets", io.rx_packets},
      {"rx_bytes", io.rx_bytes},
      {"tx_full", io.tx_full},
      {"rx_wrong_source", path.io ? path.io->udp_stats().rx_wrong_source : 0},
      {"tx_errors", path.io ? path.io->udp_stats().tx_errors : 0},
      {"shared_by", path.shared ? path.shared->mux().ports().size() : 1}};
  // The transport's view of the path (transport/connection.h PathStats).
  const auto index = static_cast<uint16_t>(&path - p.paths.data());
  const transport::PathStats& s = p.conn->path_stats(transport::PathId{index});
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
  if (path.secure) v["session"] = path.secure->peer_up(now) ? "up" : "down";
  // udp_uring.h: segmentation offload of the link's socket (its own, or the
  // one the peers of a shared link use).
  const io::UdpUringIo* sock = path.io                  ? path.io.get()
                               : path.shared != nullptr ? &path.shared->mux().socket()
                                                        : nullptr;
  if (sock != nullptr) {
    const io::UdpStats& us = sock->udp_stats();
    v["offload"] = J{{"gso", sock->gso_enabled()},          {"gro", sock->gro_enabled()},
                     {"gso_sends", us.tx_gso_sends},        {"gso_datagrams", us.tx_gso_datagrams},
                     {"gso_fallbacks", us.gso_fallbacks},   {"gro_trains", us.rx_gro_trains},
                     {"gro_datagrams", us.rx_gro_datagrams}};
  }
  if (path.shared != nullptr) {  // wan_link_mux.h: the socket's, for every peer on it
    const UdpLinkMux& mux = path.shared->mux();
    J drops = J::object();
    for (size_t i = 0; i < mux.drops().size(); ++i) drops[kMuxDropNames[i]] = mux.drops()[i];
    v["demux_drops"] = drops;
    v["tx_errors"] = mux.socket().udp_stats().tx_errors;
  }
  if (path.dpdk) {  // dpdk_wan_io.h: the port's drops by reason, ARP and device counters
    const DpdkWanStats& ws = path.dpdk->wan_stats();
    J drops = J::object();
    for (size_t i = 0; i < ws.drops.size(); ++i) drops[kWanDropNames[i]] = ws.drops[i];
    const PortStats ps = path.dpdk->port_stats();
    v["rx_wrong_source"] = ws.drops[static_cast<size_t>(WanDrop::kWrongSource)];
    v["device"] = link.device;
    v["resolved"] = path.dpdk->resolved();
    v["drops"] = drops;
    v["arp"] = J{{"requests_sent", ws.arp_requests_sent},
                 {"replies_sent", ws.arp_replies_sent},
                 {"learned", ws.arp_learned}};
    v["queues"] = path.dpdk->port().queues();
    v["steered"] = J{{"out", ws.steered_out}, {"in", ws.steered_in}};
    if (path.dpdk->queue() == 0) {  // the port's counters, once for all its queues
      v["port"] =
          J{{"ipackets", ps.ipackets}, {"opackets", ps.opackets}, {"imissed", ps.imissed},
            {"ierrors", ps.ierrors},   {"oerrors", ps.oerrors},   {"rx_nombuf", ps.rx_nombuf}};
    }
  }
  return v;
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
  nlohmann::ordered_json s = make_snapshot(now);
  DataPathMetrics m;
  fill_metrics(now, m);
  // The flows as plain records (up to kListedFlows); the control thread
  // renders them as JSON (render_flows), not this worker.
  flow_views_next_.clear();
  for (const Flow& f : flows_.flows()) {
    if (!f.used) continue;
    if (flow_views_next_.size() >= kListedFlows) break;
    flow_views_next_.push_back({f.key, f.peer, f.stream, f.packets, f.bytes, f.ce_marked, f.dropped,
                                peers_[f.peer]->conn->stream_unacked(f.stream),
                                (now - f.last_seen).seconds()});
  }
  {
    std::lock_guard<std::mutex> lock(snap_mu_);
    snap_ = std::move(s);
    metrics_ = std::move(m);
    flow_views_.swap(flow_views_next_);
    ++snap_gen_;
    publish_wanted_.store(false, std::memory_order_release);
  }
  snap_cv_.notify_all();
}

nlohmann::ordered_json Worker::snapshot(const std::string& cmd, Duration wait) const {
  std::unique_lock<std::mutex> lock(snap_mu_);
  const uint64_t gen = snap_gen_;
  publish_wanted_.store(true, std::memory_order_release);
  snap_cv_.wait_for(lock, std::chrono::nanoseconds(wait.ns()), [&] { return snap_gen_ != gen; });
  if (cmd == "flows") return render_flows();
  if (!snap_.contains(cmd)) throw std::invalid_argument("unknown command '" + cmd + "'");
  return snap_[cmd];
}

// Control thread, under snap_mu_. Peer names are set at construction and
// never change, so reading them here races with nothing.
nlohmann::ordered_json Worker::render_flows() const {
  using J = nlohmann::ordered_json;
  J flows = J::array();
  for (const FlowView& f : flow_views_) {
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

nlohmann::ordered_json Worker::make_snapshot(TimePoint now) const {
  using J = nlohmann::ordered_json;
  J peers = J::array();
  J links = J::array();
  uint64_t carried = 0;
  uint64_t delivered = 0;
  for (const auto& pp : peers_) {
    const PeerState& p = *pp;
    const transport::ConnStats& s = p.conn->stats();
    const bool up = p.health.up();
    carried += p.carried_packets;
    delivered += p.delivered_packets;
    peers.push_back(J{
        {"name", p.cfg.name},
        {"endpoint", p.cfg.endpoint.to_string()},
        {"link", p.link().name},
        {"paths", path_summary(p)},
        {"state", up ? "up" : (p.health.seen() ? "down" : "waiting")},
        {"outages", p.health.outages()},
        {"outage_seconds_total", (p.health.outage_total() + p.health.down_for(now)).seconds()},
        {"last_outage_s", p.health.last_outage().seconds()},
        {"down_for_s", p.health.down_for(now).seconds()},
        {"last_rx_seconds_ago", p.last_rx.is_zero() ? -1.0 : (now - p.last_rx).seconds()},
        {"cc", std::string(p.conn->cc().name())},
        {"srtt_s", s.srtt.seconds()},
        {"min_rtt_s", s.min_rtt.seconds()},
        {"rttvar_s", s.rttvar.seconds()},
        {"cwnd_bytes", s.cwnd},
        {"pacing_rate_bps", s.pacing_rate.bps()},
        {"bdp_bytes", p.conn->bdp()},
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
        {"send_buffer_budget_bytes", p.conn->send_buffer_capacity()},
        {"recv_buffer_used_bytes", s.recv_buffer_used},
        {"carried_packets", p.carried_packets},
        {"carried_bytes", p.carried_bytes},
        {"delivered_packets", p.delivered_packets},
        {"delivered_ip_bytes", p.delivered_bytes},
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
    });
    if (p.secure()) {
      const crypto::SecureStats ss = p.secure_stats();
      J drops = J::object();
      for (size_t i = 0; i < ss.drops.size(); ++i) {
        drops[crypto::to_string(static_cast<crypto::SecureDrop>(i))] = ss.drops[i];
      }
      peers.back()["encryption"] = "aes-256-gcm";
      peers.back()["session"] = p.peer_up(now) ? "up" : "down";
      peers.back()["last_handshake_seconds_ago"] =
          ss.last_handshake.is_zero() ? -1.0 : (now - ss.last_handshake).seconds();
      peers.back()["handshakes"] = ss.handshakes_completed;
      peers.back()["rekeys"] = ss.rekeys;
      peers.back()["tx_no_session"] = ss.tx_no_session;
      peers.back()["records_sealed"] = ss.tx_data;
      peers.back()["records_sealed_in_place"] = ss.tx_sealed_in_place;
      peers.back()["security_drops"] = drops;
      peers.back()["transport_resets"] = p.transport_resets;
    } else {
      peers.back()["encryption"] = "none (insecure)";
    }
    for (const PeerPath& path : p.paths) links.push_back(link_view(p, path, now));
  }
  J drops = J::object();
  for (size_t i = 0; i < ctr_.drops.size(); ++i) drops[kDropNames[i]] = ctr_.drops[i];
  J flow_drops = J::object();
  for (size_t i = 0; i < ctr_.flow_drops.size(); ++i) {
    flow_drops[to_string(static_cast<FlowKind>(i))] = ctr_.flow_drops[i];
  }
  const PortStats ps = local_.stats();
  J routes = J::array();
  for (const Route& r : routes_) {
    routes.push_back(J{{"prefix", r.prefix.to_string()},
                       {"peer", peers_[r.peer]->cfg.name},
                       {"mode", to_string(r.mode)}});
  }
  J status{{"version", ROWAN_BUILD_VERSION},
           {"uptime_s", (now - started_).seconds()},
           {"config", cfg_.path},
           {"local", J{{"device", cfg_.local.device},
                       {"address",
                        ip_text(cfg_.local.address) + "/" + std::to_string(cfg_.local.prefix_len)},
                       {"mac", mac_text(mac_)},
                       {"rx_packets", ctr_.local_rx_packets},
                       {"rx_bytes", ctr_.local_rx_bytes},
                       {"tx_packets", ctr_.local_tx_packets},
                       {"tx_bytes", ctr_.local_tx_bytes},
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
           {"peers", peers.size()},
           {"flows", flows_.size()},
           {"flows_created", ctr_.flows_created},
           {"flows_expired", ctr_.flows_expired},
           {"neighbors", neigh_.size()},
           {"neighbors_unresolved", unresolved_neighbors()},
           {"streams_waiting_for_host", streams_waiting_for_host()},
           {"carried_packets", carried},
           {"delivered_packets", delivered},
           {"ce_marked", ctr_.ce_marked},
           {"arp_replies", ctr_.arp_replies},
           {"arp_requests", ctr_.arp_requests},
           {"vlan_rx", ctr_.vlan_rx},
           {"vlan_tx", ctr_.vlan_tx},
           {"drops", drops},
           {"flow_drops", flow_drops},
           {"split", split_->snapshot()},
           {"worker", J{{"index", worker_.index},
                        {"lcore", worker_.lcore},
                        {"active_flows", flows_.size()},
                        {"rx_packets", ctr_.local_rx_packets},
                        {"tx_packets", ctr_.local_tx_packets},
                        {"rx_holds", ctr_.rx_holds},
                        {"flow_cache_hits", ctr_.flow_cache_hits},
                        {"busy", busy_.busy_ratio()}}}};
  return J{{"status", status}, {"peers", peers}, {"links", links}};
}

}  // namespace rowan::gw
