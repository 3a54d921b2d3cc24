#include "datapath/worker.h"

#include <rte_ether.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <time.h>

#include "net/packet_util.h"
#include "registry.h"

// One packet worker's forwarding (worker.h); its neighbours are in
// worker_neighbors.cc, its snapshot in worker_snapshot.cc, its metrics in
// worker_metrics.cc.

namespace rowan::gw {
namespace {

using namespace pkt;  // NOLINT: the packet helpers of packet_util.h

constexpr uint32_t kMaxRecord = 65535;

}  // namespace

const char* const kDropNames[] = {
    "runt_frame", "not_for_us",    "unsupported_l2", "malformed_ip",   "malformed_arp",
    "to_gateway", "no_route",      "oversize",       "malformed_roce", "flow_table_full",
    "backlog",    "peer_down",     "bad_record",     "not_local",      "neighbor_pending",
    "no_mbuf",    "local_tx_full", "worker_busy",    "vlan_stacked",   "vlan_truncated",
};
static_assert(std::size(kDropNames) == static_cast<size_t>(Drop::kCount));

uint64_t pair_connection_id(const SockAddr& a, const SockAddr& b) {
  std::string x = a.to_string();
  std::string y = b.to_string();
  if (y < x) std::swap(x, y);
  uint64_t h = 1469598103934665603ULL;
  x += '|';
  x += y;
  for (char c : x) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ULL;
  return h == 0 ? 1 : h;
}

// ---------------------------------------------------------------------------
// What split mode (split_engine.h) uses of the packet engine.

class WorkerSplitIo final : public SplitIo {
 public:
  explicit WorkerSplitIo(Worker& g) : g_(g) {}
  bool carry(Flow& f, const uint8_t* ip, uint32_t len, TimePoint now) noexcept override {
    if (!f.tail.empty()) return false;
    PeerState& peer = *g_.peers_[f.peer];
    // Split's control records (first byte 0xF0) go untagged; a host's
    // packets with the tag of its frames.
    const bool packet = len > 0 && ((ip[0] >> 4) == 4 || (ip[0] >> 4) == 6);
    const VlanTag tag = packet ? f.tag : VlanTag{};
    if (!g_.write_record(peer, f, ip, len, now, tag)) return false;
    ++f.packets;
    f.bytes += len;
    ++peer.carried_packets;
    peer.carried_bytes += len;
    return true;
  }
  bool has_room(const Flow& f, uint32_t len) const noexcept override {
    return f.tail.empty() &&
           g_.peers_[f.peer]->conn->send_buffer_free() >= len + 2U + kTaggedRecordHeader;
  }
  bool over_share(const Flow& f) const noexcept override {
    // The same share as CE marking (maybe_mark_ce).
    const transport::Connection& c = *g_.peers_[f.peer]->conn;
    if (c.unacked_bytes() <= c.bdp() || g_.last_window_flows_ == 0) return false;
    return f.last_window_bytes * g_.last_window_flows_ > g_.last_window_total_;
  }
  bool short_of_room(uint32_t peer, uint64_t bytes) const noexcept override {
    if (peer >= g_.peers_.size()) return false;
    const transport::Connection& c = *g_.peers_[peer]->conn;
    return 2 * bytes <= c.send_buffer_capacity() && c.send_buffer_free() < bytes;
  }
  void send_local(const uint8_t* ip, uint32_t len, TimePoint now, const VlanTag& tag,
                  bool from_wan) noexcept override {
    g_.deliver(ip, len, now, tag, from_wan);
  }
  bool carry_packet(const uint8_t* ip, uint32_t len, TimePoint now) noexcept override {
    FlowKey key;
    if (!g_.classify(ip, len, key)) return false;
    Flow* f = open_flow(key, now);
    return f != nullptr && carry(*f, ip, len, now);
  }
  Flow* find_flow(const FlowKey& key) noexcept override { return g_.flows_.find(key); }
  Flow* open_flow(const FlowKey& key, TimePoint now) noexcept override {
    const Worker::Route* r = g_.lookup(key.dst);
    if (r == nullptr) return nullptr;
    bool created = false;
    Flow* f = g_.flows_.find_or_add(key, now, &created);
    if (f == nullptr) return nullptr;
    if (created) {
      ++g_.ctr_.flows_created;
      f->peer = r->peer;
    }
    f->last_seen = now;
    return f;
  }

 private:
  Worker& g_;
};

// ---------------------------------------------------------------------------
// PeerState

uint32_t PeerState::RxStream::free_mbufs() noexcept {
  uint32_t n = 0;
  if (partial != nullptr) {
    rte_pktmbuf_free(partial);
    ++n;
  }
  partial = nullptr;
  filled = 0;
  for (size_t i = ready_head; i < ready.size(); ++i) rte_pktmbuf_free(ready[i]);
  n += static_cast<uint32_t>(ready.size() - ready_head);
  ready.clear();
  ready_head = 0;
  return n;
}

PeerState::~PeerState() {
  for (RxStream& rs : rx) {
    const uint32_t n = rs.free_mbufs();
    if (direct_held != nullptr) *direct_held -= n;
  }
}

crypto::SecureStats PeerState::secure_stats() const {
  crypto::SecureStats t;
  for (const PeerPath& path : paths) {
    if (!path.secure) continue;
    const crypto::SecureStats& s = path.secure->secure_stats();
    for (size_t i = 0; i < t.drops.size(); ++i) t.drops[i] += s.drops[i];
    t.rx_data += s.rx_data;
    t.rx_keepalives += s.rx_keepalives;
    t.tx_keepalives += s.tx_keepalives;
    t.tx_data += s.tx_data;
    t.tx_sealed_in_place += s.tx_sealed_in_place;
    t.tx_sealed_pieces += s.tx_sealed_pieces;
    t.tx_no_session += s.tx_no_session;
    t.tx_oversize += s.tx_oversize;
    t.tx_crypto_errors += s.tx_crypto_errors;
    t.initiations_sent += s.initiations_sent;
    t.responses_sent += s.responses_sent;
    t.handshakes_completed += s.handshakes_completed;
    t.rekeys += s.rekeys;
    t.peer_restarts = std::max(t.peer_restarts, s.peer_restarts);
    t.last_handshake = std::max(t.last_handshake, s.last_handshake);
    t.last_rx = std::max(t.last_rx, s.last_rx);
  }
  return t;
}

bool PeerState::has_session(TimePoint now) const {
  return std::any_of(paths.begin(), paths.end(),
                     [&](const PeerPath& p) { return p.secure && p.secure->has_session(now); });
}

bool PeerState::peer_up(TimePoint now) const {
  return std::any_of(paths.begin(), paths.end(),
                     [&](const PeerPath& p) { return p.secure && p.secure->peer_up(now); });
}

// ---------------------------------------------------------------------------
// Worker

std::string ip_text(const roce::IpAddr& a) {
  char b[64];
  roce::format_ip_addr(a, b, sizeof b);
  return b;
}

Worker::Worker(const GatewayConfig& cfg, SiteIo& local, const Clock& clock,
               const WorkerOptions& worker)
    : cfg_(cfg),
      local_(local),
      worker_(worker),
      clock_(clock),
      flows_(cfg.wan.max_flows),
      scratch_(kMaxRecord + 2) {
  mac_ = cfg.local.mac ? *cfg.local.mac : local.mac();
  site_.addr = cfg.local.address;
  site_.len = cfg.local.prefix_len;
  site6_.addr = cfg.local.address6;  // version 0 (none): contains() nothing
  site6_.len = cfg.local.prefix_len6;
  const TimePoint now = clock.now();
  started_ = now;
  crypto::Key private_key{};
  if (!cfg.local.insecure) {
    if (cfg.local.private_key_file.empty()) {
      throw std::runtime_error(
          "local.private_key_file is required (create one with `rowanctl genkey`); "
          "local.insecure = true runs the WAN links in plaintext");
    }
    private_key = crypto::load_private_key_file(cfg.local.private_key_file);
  }
  // Handshake timestamps are wall-clock time, so they keep increasing across a
  // restart (the peer rejects initiations not newer than the last).
  timespec wall{};
  clock_gettime(CLOCK_REALTIME, &wall);
  const Duration wall_offset =
      Duration::from_ns(static_cast<int64_t>(wall.tv_sec) * 1000000000 + wall.tv_nsec - now.ns());
  // One incarnation for every path's session: the peer must see one process.
  std::random_device rd;
  while (incarnation_ == 0) incarnation_ = (uint64_t{rd()} << 32) | rd();
  for (const PeerConfig& pc : cfg_.peers) {
    auto p = std::make_unique<PeerState>();
    p->cfg = pc;
    p->events = PeerEvents(pc.name);
    for (size_t i = 0; i < std::max<size_t>(pc.path_count(), 1); ++i) {
      p->paths.push_back(open_path(pc, i, private_key, wall_offset, now));
    }
    open_transport(*p, now);
    p->rx.resize(cfg.wan.max_flows);
    p->parked.reserve(cfg.wan.max_flows);
    peers_.push_back(std::move(p));
  }
  bool one_socket = true;
  for (const auto& p : peers_) {
    for (const PeerPath& path : p->paths) {
      io::UdpUringIo* sock = path.io                  ? path.io.get()
                             : path.shared != nullptr ? &path.shared->mux().socket()
                                                      : nullptr;
      one_socket =
          one_socket && sock != nullptr && (sole_socket_ == nullptr || sock == sole_socket_);
      sole_socket_ = sock;
    }
  }
  if (!one_socket) sole_socket_ = nullptr;
  split_io_ = std::make_unique<WorkerSplitIo>(*this);
  split_ = std::make_unique<SplitEngine>(*split_io_, cfg.local.mtu);
  split_->set_local_pmtu(cfg.local.roce_mtu);  // MTU translation (docs/split-mode.md)
  split_->set_cnp_class(cfg.local.cnp_dscp, cfg.local.cnp_pcp);
  reload(cfg);
  pub_.listed.reserve(kListedFlows);
  pub_next_.listed.reserve(kListedFlows);
  next_housekeeping_ = now;
  window_start_ = now;
  publish(now);
}

// How many paths (of all peers) cross the link `name`.
uint32_t Worker::link_users(const std::string& name) const {
  uint32_t n = 0;
  for (const PeerConfig& pc : cfg_.peers) {
    if (pc.links.empty()) {
      n += cfg_.wan.links.front().name == name ? 1 : 0;
      continue;
    }
    for (size_t i = 0; i < pc.path_count(); ++i) n += pc.links[i] == name ? 1 : 0;
  }
  return n;
}

// Path i of a peer: worker w's connection binds the link's port + w and talks
// to the peer's port + w.
PeerPath Worker::open_path(const PeerConfig& pc, size_t i, const crypto::Key& private_key,
                           Duration wall_offset, TimePoint now) {
  PeerPath path;
  path.link = pc.links.empty() ? &cfg_.wan.links.front() : cfg_.find_link(pc.links[i]);
  if (path.link == nullptr) throw std::runtime_error("peer " + pc.name + ": no WAN link");
  const WanLinkConfig& link = *path.link;
  SockAddr bind = link.bind;
  path.endpoint = pc.endpoint_of(i);
  if (bind.port + worker_.index > 65535 || path.endpoint.port + worker_.index > 65535) {
    throw std::runtime_error("link " + link.name + ": port + worker index passes 65535");
  }
  bind.port = static_cast<uint16_t>(bind.port + worker_.index);
  path.endpoint.port = static_cast<uint16_t>(path.endpoint.port + worker_.index);
  if (link.backend == WanBackend::kDpdk) {
    // dpdk_wan_io.h: the link's port answers for one peer.
    if (link_users(link.name) > 1) {
      throw std::runtime_error("link " + link.name +
                               ": a dpdk WAN link carries one peer; give each its own link");
    }
    DpdkWanPorts* ports = worker_.wan_ports;
    if (ports == nullptr) {
      if (!own_wan_ports_) own_wan_ports_ = std::make_unique<DpdkWanPorts>(1);
      ports = own_wan_ports_.get();
    }
    if (worker_.index >= ports->queues()) {
      throw std::runtime_error("link " + link.name + ": worker " + std::to_string(worker_.index) +
                               " has no queue on its port");
    }
    DpdkWanOptions o;
    o.device = link.device;
    o.address = link.bind.addr;
    o.port = link.bind.port;  // base ports: the worker's queue adds its index
    o.prefix_len = link.prefix_len;
    o.next_hop = link.next_hop;
    o.peer = path.endpoint.addr;
    o.peer_port = pc.endpoint_of(i).port;
    o.mtu = link.mtu;
    DpdkWanPort& port = ports->open(link.name, o);
    if (worker_.index == 0 && port.queues() > 1) {
      spdlog::info("link {}: {} queue pairs, {}", link.name, port.queues(),
                   port.flow_rules() > 0 ? "a flow rule per worker's UDP port"
                                         : "steered by UDP port in software");
    }
    path.dpdk = std::make_unique<DpdkWanIo>(port, static_cast<uint16_t>(worker_.index));
    path.wan = path.dpdk.get();
  } else {
    const uint32_t ip_hdr = link.bind.addr.version == 6 ? 40 : 20;
    io::UdpUringOptions o;
    o.bind = io::UdpEndpoint::parse(bind.to_string());
    o.max_datagram = link.mtu - ip_hdr - 8;
    o.gso = link.offload;
    o.gro = link.offload;
    const io::UdpEndpoint peer_at = io::UdpEndpoint::parse(path.endpoint.to_string());
    if (link_users(link.name) == 1) {
      o.peer = peer_at;
      path.io = std::make_unique<io::UdpUringIo>(o);
      path.wan = path.io.get();
    } else {
      path.shared = &shared_link(link, o).add_port(peer_at, connection_id(pc));
      path.wan = path.shared;
    }
  }
  if (!cfg_.local.insecure) {
    const auto peer_key = crypto::key_from_base64(pc.public_key);
    if (!peer_key) {
      throw std::runtime_error("peer " + pc.name +
                               ": public_key is required (or local.insecure = true)");
    }
    crypto::SecureIoOptions so;
    so.private_key = private_key;
    so.peer_public = *peer_key;
    so.wall_offset = wall_offset;
    so.keepalive = PeerHealth::kKeepalive;
    so.incarnation = incarnation_;
    path.secure = std::make_unique<crypto::SecureIo>(*path.wan, so, now);
    path.wan = path.secure.get();
  }
  return path;
}

// The connection id of this worker's connection to `pc`: from its first
// path's endpoints, as the peer derives it.
uint64_t Worker::connection_id(const PeerConfig& pc) const {
  const WanLinkConfig* link =
      pc.links.empty() ? &cfg_.wan.links.front() : cfg_.find_link(pc.links[0]);
  SockAddr bind = link->bind;
  SockAddr endpoint = pc.endpoint;
  bind.port = static_cast<uint16_t>(bind.port + worker_.index);
  endpoint.port = static_cast<uint16_t>(endpoint.port + worker_.index);
  return pair_connection_id(bind, endpoint);
}

// Received in-order stream data goes from the datagram into site mbufs
// (take_in_order) instead of through the stream's buffer.
class Worker::InOrderSink final : public transport::StreamSink {
 public:
  InOrderSink(Worker& w, PeerState& p) : w_(w), p_(p) {}
  size_t on_stream_data(uint64_t id, const uint8_t* data, size_t len) noexcept override {
    return w_.take_in_order(p_, id, data, len);
  }

 private:
  Worker& w_;
  PeerState& p_;
};

void Worker::open_transport(PeerState& p, TimePoint now) {
  const PeerPath& first = p.paths.front();
  transport::TransportConfig tc;
  tc.connection_id = connection_id(p.cfg);
  tc.link_rate = first.link->rate;
  tc.base_rtt = first.link->rtt;
  tc.max_datagram = first.wan->max_datagram();
  tc.cc = cfg_.cc.algorithm;
  tc.cc_params = cfg_.cc.params;
  tc.send_buffer_bdp = cfg_.wan.send_buffer_bdp;
  tc.recv_window_bdp = cfg_.wan.recv_window_bdp;
  tc.max_streams = cfg_.wan.max_flows;
  tc.max_pto = PeerHealth::kMaxProbeTimeout;
  // Under link security the AEAD tag covers every datagram, header included,
  // and a datagram that fails it never reaches the transport: a CRC-32C in
  // the tag slot would only be computed and checked again. Both gateways of
  // a pair are secure or both insecure (a handshake needs both).
  tc.integrity_check = cfg_.local.insecure;
  // [[peer]] fec and fec_max_overhead; the default is the transport's own.
  static_assert(PeerConfig::kDefaultFecMaxOverhead == fec::PolicyConfig{}.max_overhead);
  tc.fec.mode = p.cfg.fec ? transport::FecMode::kAdaptive : transport::FecMode::kOff;
  tc.fec.policy.max_overhead = p.cfg.fec_max_overhead;
  // One transport path per link, numbered as the peer numbers them.
  if (p.paths.size() > 1) {
    for (const PeerPath& path : p.paths) {
      tc.paths.push_back(transport::PathConfig{path.link->rate, path.link->rtt});
      tc.max_datagram = std::min(tc.max_datagram, path.wan->max_datagram());
    }
  }
  p.path_io.clear();
  for (const PeerPath& path : p.paths) p.path_io.push_back(path.wan);
  auto conn = std::make_unique<transport::Connection>(tc, clock_, now);
  auto driver = std::make_unique<transport::Driver>(
      *conn, std::span<io::PacketIo* const>(p.path_io), 32, &clock_);
  p.driver = std::move(driver);
  p.conn = std::move(conn);
  p.direct_held = &direct_held_;
  if (!p.sink) p.sink = std::make_unique<InOrderSink>(*this, p);
  p.conn->set_stream_sink(p.sink.get());
}

// This worker's shared socket on `link`, opened for the link's first peer.
UdpLinkMux& Worker::shared_link(const WanLinkConfig& link, const io::UdpUringOptions& o) {
  for (auto& [l, m] : shared_links_) {
    if (l == &link) return *m;
  }
  const auto key = cfg_.local.insecure ? UdpLinkMux::Key::kConnectionId : UdpLinkMux::Key::kSource;
  shared_links_.emplace_back(&link, std::make_unique<UdpLinkMux>(o, key));
  return *shared_links_.back().second;
}

Worker::~Worker() {
  for (uint32_t i = 0; i < txq_len_; ++i) rte_pktmbuf_free(txq_[(txq_head_ + i) % kTxQueue]);
  for (const auto& e : neigh_.entries()) {
    for (uint32_t i = 0; i < e.npending; ++i) rte_pktmbuf_free(e.pending[i]);
  }
}

std::string Worker::reload(const GatewayConfig& cfg) {
  std::vector<Route> routes;
  for (const RouteConfig& r : cfg.routes) {
    uint32_t idx = UINT32_MAX;
    for (uint32_t i = 0; i < peers_.size(); ++i) {
      if (peers_[i]->cfg.name == r.peer) idx = i;
    }
    if (idx == UINT32_MAX) continue;  // a peer added by reload needs a restart
    routes.push_back({r.prefix, idx, r.mode, r.vlan});
  }
  // Longest prefix first, so the first match wins.
  std::stable_sort(routes.begin(), routes.end(),
                   [](const Route& a, const Route& b) { return a.prefix.len > b.prefix.len; });
  std::string what = fmt::format("{} routes (was {})", routes.size(), routes_.size());
  routes_ = std::move(routes);
  hint_flow_ = nullptr;  // the cached route is gone
  route_vlans_ = std::any_of(routes_.begin(), routes_.end(),
                             [](const Route& r) { return r.vlan.has_value(); });
  cfg_.routes = cfg.routes;
  // [cc] applies to the live connections: each swaps its controller and
  // keeps its streams and data in flight (Connection::replace_cc).
  for (auto& p : peers_) {
    const transport::TransportConfig& tc = p->conn->config();
    if (tc.cc == cfg.cc.algorithm && tc.cc_params.values() == cfg.cc.params.values()) continue;
    try {
      p->conn->replace_cc(cfg.cc.algorithm, cfg.cc.params, clock_);
      what += fmt::format("; peer {}: cc {}", p->cfg.name, cfg.cc.algorithm);
    } catch (const std::exception& e) {
      what += fmt::format("; peer {}: cc kept ({})", p->cfg.name, e.what());
    }
  }
  cfg_.cc = cfg.cc;
  cfg_.wan.flow_idle_timeout = cfg.wan.flow_idle_timeout;
  return what;
}

const Worker::Route* Worker::lookup(const roce::IpAddr& dst) const noexcept {
  for (const Route& r : routes_) {
    if (r.prefix.contains(dst)) return &r;
  }
  return nullptr;
}

void Worker::drop(Drop why, rte_mbuf* m) noexcept {
  ++ctr_.drops[static_cast<size_t>(why)];
  if (m != nullptr) rte_pktmbuf_free(m);
}

// The peer restarted (its handshake carries a new incarnation): its transport
// state is gone, so ours goes too and both start from scratch. What was in
// flight is lost; the hosts' own transports retransmit it (passthrough), and
// split flows through the peer are failed (SplitEngine::on_peer_restart).
// Rare: allocates.
// Whether the peer process is a new one since its transport was set up: a
// path's handshake carried an incarnation other than the one the transport
// was set up with (each path's session learns it; the first one the peer).
bool Worker::peer_restarted(PeerState& peer) noexcept {
  for (const PeerPath& path : peer.paths) {
    const uint64_t inc = path.secure ? path.secure->peer_incarnation() : 0;
    if (inc == 0 || inc == peer.incarnation) continue;
    const bool restarted = peer.incarnation != 0;
    peer.incarnation = inc;
    if (restarted) return true;
  }
  return false;
}

void Worker::reset_transport(PeerState& peer, TimePoint now) noexcept {
  try {
    open_transport(peer, now);
  } catch (const std::exception&) {
    return;  // keep the old transport; the next restart signal retries
  }
  for (auto& rs : peer.rx) {
    direct_held_ -= rs.free_mbufs();
    rs = PeerState::RxStream{};
  }
  peer.parked.clear();
  peer.host_wait.clear();
  peer.direct.clear();
  uint32_t idx = 0;
  while (idx < peers_.size() && peers_[idx].get() != &peer) ++idx;
  for (Flow& f : flows_.flows()) {
    if (f.used && f.peer == idx && !f.tail.empty()) {
      f.tail.clear();
      --tails_;
    }
  }
  peer.last_rx_packets = 0;
  ++peer.transport_resets;
  // Split flows through it lost what it held: their hosts' QPs are failed.
  split_->on_peer_restart(&peer, idx, now);
}

bool Worker::poll(TimePoint now) noexcept {
  moved_ = false;
  ++ctr_.loops;
  local_rx(now);
  flush_tails(now);
  split_->poll(now);
  PeerState* stalled_peer = nullptr;
  uint64_t stalled_stream = 0;
  while (split_->take_unblocked(&stalled_peer, &stalled_stream)) {
    drain_stream(*stalled_peer, stalled_stream, now);
  }
  for (auto& p : peers_) {
    if (peer_restarted(*p)) reset_transport(*p, now);
    p->driver->poll(now);
    const transport::ConnStats& st = p->conn->stats();
    p->drain.update(now, st.delivered_bytes, p->conn->unacked_bytes(), st.srtt);
    const uint64_t rxp = st.packets_received;
    if (rxp != p->last_rx_packets) {
      p->last_rx_packets = rxp;
      p->last_rx = now;
      moved_ = true;
    }
    drain_peer(*p, now);
  }
  flush_local();
  resume_parked(now);
  if (now >= next_housekeeping_) housekeeping(now);
  return moved_;
}

void Worker::resume_parked(TimePoint now) noexcept {
  bool resumed = false;
  for (auto& p : peers_) {
    PeerState& peer = *p;
    if (neigh_changed_) {
      for (const uint64_t id : peer.host_wait) {
        PeerState::RxStream& rs = peer.rx[id];
        rs.host_wait = false;
        if (!rs.parked) {
          rs.parked = true;
          peer.parked.push_back(id);
        }
      }
      peer.host_wait.clear();
    }
    // Take each stream out before draining it: drain_stream parks it again
    // (at the back) if the queue fills, which also ends this loop.
    while (!peer.parked.empty() && txq_len_ < kTxQueue) {
      const uint64_t id = peer.parked.front();
      peer.parked.front() = peer.parked.back();
      peer.parked.pop_back();
      peer.rx[id].parked = false;
      drain_stream(peer, id, now);
      resumed = true;
    }
  }
  neigh_changed_ = false;
  if (resumed) flush_local();
}

TimePoint Worker::next_timeout() const noexcept {
  TimePoint t = std::min(next_housekeeping_, split_->next_timeout());
  for (const auto& p : peers_) t = std::min(t, p->conn->next_timeout());
  return t;
}

void Worker::idle_wait(Duration d) noexcept {
  if (sole_socket_ != nullptr) {
    sole_socket_->wait(d, local_.wake_fd());
  } else {
    timespec ts{d.ns() / 1000000000, d.ns() % 1000000000};
    nanosleep(&ts, nullptr);
  }
  local_.disarm();
}

bool Worker::room_for(uint32_t records) const noexcept {
  // Whether some peer's send buffer takes `records` more records the size of
  // the last one refused for backlog.
  const Bytes want = static_cast<Bytes>(std::max<uint32_t>(backlog_record_, 64)) * records;
  for (const auto& p : peers_) {
    if (p->conn->send_buffer_free() >= want) return true;
  }
  return false;
}

void Worker::local_rx(TimePoint now) noexcept {
  if (rx_held_) {
    if (!room_for(kBurst) && now - rx_held_since_ < kRxHoldMax) return;
    rx_held_ = false;
  }
  rte_mbuf* pkts[kBurst];
  for (int round = 0; round < 4; ++round) {
    burst_backlog_ = 0;
    const uint16_t n = local_.rx(pkts, kBurst);
    for (uint16_t i = 0; i < n; ++i) {
      rte_mbuf* m = pkts[i];
      ++ctr_.local_rx_packets;
      ctr_.local_rx_bytes += rte_pktmbuf_pkt_len(m);
      moved_ = true;
      if (m->nb_segs != 1 || rte_pktmbuf_data_len(m) < kEthLen) {
        drop(m->nb_segs != 1 ? Drop::kOversize : Drop::kRuntFrame, m);
        continue;
      }
      auto* eth = rte_pktmbuf_mtod(m, uint8_t*);
      uint32_t len = rte_pktmbuf_data_len(m);
      L2Header l2;
      L2Verdict v = parse_l2(eth, len, l2);
      // A port that strips the tag (RX VLAN offload) hands it over apart;
      // a tag still in the frame then is a second one.
      const bool stripped = (m->ol_flags & RTE_MBUF_F_RX_VLAN_STRIPPED) != 0;
      if (stripped && v == L2Verdict::kOk && l2.tag.present) v = L2Verdict::kStacked;
      if (v != L2Verdict::kOk) {
        drop(v == L2Verdict::kStacked ? Drop::kVlanStacked : Drop::kVlanTruncated, m);
        continue;
      }
      rx_tag_ = l2.tag;
      if (stripped) {
        rx_tag_ = {m->vlan_tci, true};
        ++ctr_.vlan_rx;
      }
      if (l2.tag.present) {
        // Strip the tag (the MACs move up over it): the frame is handled as
        // an untagged one, and what goes back to this host is tagged again.
        std::memmove(eth + kVlanTagBytes, eth, 12);
        rte_pktmbuf_adj(m, kVlanTagBytes);
        eth += kVlanTagBytes;
        len -= kVlanTagBytes;
        ++ctr_.vlan_rx;
      }
      const bool to_us = std::memcmp(eth, mac_.data(), 6) == 0;
      const bool group = (eth[0] & 1) != 0;
      const uint16_t type = load_be16(eth + 12);
      // IPv6 multicast (33:33:…) carries neighbour solicitations for us.
      const bool v6_multicast =
          type == kEthIpv6 && eth[0] == 0x33 && eth[1] == 0x33 && cfg_.local.address6.version == 6;
      if (type == kEthArp) {
        handle_arp(m, eth, len, now);
      } else if (v6_multicast || (to_us && (type == kEthIpv4 || type == kEthIpv6))) {
        handle_ip(m, eth + kEthLen, len - kEthLen, now);
      } else if (!to_us) {
        drop(group ? Drop::kUnsupportedL2 : Drop::kNotForUs, m);
      } else {
        drop(Drop::kUnsupportedL2, m);
      }
    }
    if (burst_backlog_ > 0 && !peers_.empty() && !room_for(1)) {
      // Everything that could be admitted was; leave the rest in the ring.
      rx_held_ = true;
      rx_held_since_ = now;
      ++ctr_.rx_holds;
      break;
    }
    if (n < kBurst) break;
  }
  // Frames the port gave this worker for another one (handoff.h) are work too.
  if (local_.take_handed_over()) moved_ = true;
  rx_tag_ = {};
}

bool Worker::flow_hint(const uint8_t* ip, uint32_t len, FlowHint* h) noexcept {
  if ((ip[0] >> 4) != 4) return false;
  const uint32_t l4 = (ip[0] & 0xF) * 4U;
  const uint8_t proto = ip[9];
  if ((load_be16(ip + 6) & 0x3FFF) != 0 || (proto != 6 && proto != 17) || len < l4 + 8) {
    return false;
  }
  std::array<uint8_t, sizeof(h->w)> b{};
  b[0] = ip[0];  // version and header length: where the ports are
  b[1] = proto;
  std::memcpy(&b[2], ip + 12, 8);   // source and destination addresses
  std::memcpy(&b[10], ip + l4, 4);  // ports
  if (proto == 17 && load_be16(ip + l4 + 2) == roce::kRoceV2Port) {
    const uint32_t bth = l4 + 8;
    if (len < bth + roce::kBthLen) return false;  // classify() drops it
    std::memcpy(&b[14], ip + bth + 5, 3);         // destination QP
  }
  std::memcpy(h->w, b.data(), b.size());
  return true;
}

bool Worker::classify(const uint8_t* ip, uint32_t len, FlowKey& key) noexcept {
  key.src = ip_src(ip);
  key.dst = ip_dst(ip);
  uint32_t l4 = 0;
  bool fragment = false;
  if (key.src.version == 4) {
    key.proto = ip[9];
    l4 = (ip[0] & 0xF) * 4U;
    fragment = (load_be16(ip + 6) & 0x3FFF) != 0;
  } else {
    key.proto = ip[6];
    l4 = 40;
  }
  key.kind = FlowKind::kOther;
  if (fragment || (key.proto != 6 && key.proto != 17) || len < l4 + 8) return true;
  key.sport = load_be16(ip + l4);
  key.dport = load_be16(ip + l4 + 2);
  key.kind = key.proto == 6 ? FlowKind::kTcp : FlowKind::kUdp;
  if (key.proto == 17 && key.dport == roce::kRoceV2Port) {
    roce::RocePacket p;
    key.kind = FlowKind::kRoce;
    if (roce::parse_ip({ip, len}, p) != roce::ParseError::kOk) {
      // An opcode rowan does not know (a vendor's, a newer IBA one) is not
      // malformed: with its BTH there it is carried as it is (passthrough).
      const uint32_t bth = l4 + 8;
      if (len < bth + roce::kBthLen) return false;
      key.qp = (uint32_t{ip[bth + 5]} << 16) | (uint32_t{ip[bth + 6]} << 8) | ip[bth + 7];
      key.sport = key.dport = 0;
      return true;
    }
    key.qp = p.bth.dest_qp;
    key.sport = key.dport = 0;  // the UDP source port is per-QP entropy, not identity
  }
  return true;
}

void Worker::handle_ip(rte_mbuf* m, uint8_t* ip, uint32_t len, TimePoint now) noexcept {
  const uint32_t iplen = ip_packet_len(ip, len);
  if (iplen == 0) {
    drop(Drop::kMalformedIp, m);
    return;
  }
  if (iplen > cfg_.local.mtu) {
    drop(Drop::kOversize, m);
    return;
  }
  FlowHint hint;
  const bool hinted = flow_hint(ip, iplen, &hint);
  Flow* f = nullptr;
  const Route* r = nullptr;
  if (hinted && hint_flow_ != nullptr && hint == hint_) {
    f = hint_flow_;  // the flow cache (worker.h)
    r = hint_route_;
    ++ctr_.flow_cache_hits;
  } else {
    const roce::IpAddr dst = ip_dst(ip);
    if (dst.version == 6 && (dst == cfg_.local.address6 || dst.bytes[0] == 0xFF)) {
      if (ip[6] == 58 && iplen >= 48) {
        handle_icmp6(m, ip, iplen, now);  // neighbour discovery
      } else {
        drop(Drop::kToGateway, m);
      }
      return;
    }
    if (dst == cfg_.local.address) {
      drop(Drop::kToGateway, m);
      return;
    }
    r = lookup(dst);
    if (r == nullptr) {
      drop(Drop::kNoRoute, m);
      return;
    }
    // kSplit: every flow starts in passthrough (ARCHITECTURE.md) until the
    // split engine pairs it (split_engine.h).
    FlowKey key;
    if (!classify(ip, iplen, key)) {
      drop(Drop::kMalformedRoce, m);
      return;
    }
    bool created = false;
    f = flows_.find_or_add(key, now, &created);
    if (f == nullptr) {
      drop(Drop::kFlowTableFull, m);
      return;
    }
    if (created) {
      ++ctr_.flows_created;
      f->peer = r->peer;
    }
    if (hinted) {
      hint_ = hint;
      hint_flow_ = f;
      hint_route_ = r;
    }
  }
  const FlowKey& key = f->key;
  PeerState& peer = *peers_[f->peer];
  f->last_seen = now;
  f->tag = rx_tag_;
  if (key.kind == FlowKind::kRoce &&
      split_->on_local(*f, r->mode == RouteMode::kSplit, ip, iplen, now)) {
    rte_pktmbuf_free(m);
    return;
  }
  if (!f->tail.empty() || !within_share(peer, *f, iplen + 2U)) {
    // An earlier record still waits for buffer space, or this flow already
    // holds its share of a contended send buffer.
    ++f->dropped;
    ++ctr_.flow_drops[static_cast<size_t>(key.kind)];
    peer.conn->note_backlog(now, iplen);  // the hosts have more than the buffer takes: bulk
    ++burst_backlog_;
    backlog_record_ = iplen + 2U;
    drop(Drop::kBacklog, m);
    return;
  }
  if (key.kind == FlowKind::kRoce) maybe_mark_ce(peer, *f, ip, iplen);
  if (write_record(peer, *f, ip, iplen, now, rx_tag_)) {
    ++f->packets;
    f->bytes += iplen;
    ++peer.carried_packets;
    peer.carried_bytes += iplen;
    rte_pktmbuf_free(m);
  } else {
    ++f->dropped;
    ++ctr_.flow_drops[static_cast<size_t>(key.kind)];
    peer.conn->note_backlog(now, iplen);
    ++burst_backlog_;
    backlog_record_ = iplen + 2U;
    drop(Drop::kBacklog, m);
  }
}

bool Worker::write_record(PeerState& peer, Flow& flow, const uint8_t* ip, uint32_t len,
                          TimePoint now, const VlanTag& tag) noexcept {
  transport::Connection& c = *peer.conn;
  const uint32_t hdr = tag.present ? kTaggedRecordHeader : 0;
  const size_t rec = len + hdr + 2U;
  if (c.send_buffer_free() < rec || len + hdr > kMaxRecord) return false;
  // The record's header is assembled here; the packet goes into the send
  // buffer straight from the mbuf (one copy).
  uint8_t head[2 + kTaggedRecordHeader];
  store_be16(head, static_cast<uint16_t>(len + hdr));
  if (tag.present) put_tagged_header(head + 2, tag);
  const size_t n = c.write(flow.stream, head, 2U + hdr, ip, len, false, now);
  flow.window_bytes += rec;
  window_total_ += rec;
  if (flow.window_bytes == rec) ++window_flows_;
  if (n < rec) {
    // The buffer's granules ran out mid-record: keep the rest, in order,
    // ahead of this flow's later packets (rare; the only allocation here).
    const size_t head_len = 2U + hdr;
    flow.tail.assign(head + std::min(n, head_len), head + head_len);
    flow.tail.insert(flow.tail.end(), ip + (n > head_len ? n - head_len : 0), ip + len);
    ++tails_;
  }
  return true;
}

void Worker::flush_tails(TimePoint now) noexcept {
  if (tails_ == 0) return;  // the common case: no scan of the flow table
  for (Flow& f : flows_.flows()) {
    if (!f.used || f.tail.empty()) continue;
    const size_t n =
        peers_[f.peer]->conn->write(f.stream, f.tail.data(), f.tail.size(), false, now);
    f.tail.erase(f.tail.begin(), f.tail.begin() + static_cast<std::ptrdiff_t>(n));
    if (f.tail.empty()) --tails_;
  }
}

bool Worker::within_share(const PeerState& peer, Flow& flow, uint32_t rec) noexcept {
  if (flow.offered_epoch != window_epoch_) {
    flow.offered_epoch = window_epoch_;
    ++window_offered_;
  }
  // A flow whose packets are not drained (its sender outruns the WAN, or
  // its stream is stalled) must not take the whole send buffer: every other
  // flow would then find it full and lose packets it never queued. A flow
  // may always fill up to its fair share (the buffer over the flows that
  // sent in this or the last window); beyond it, only while an eighth of
  // the buffer stays free for the others.
  // While the link does not drain (an outage), the last eighth is kept for
  // flows that hold little, so a flow that starts during it still gets room
  // (send_admission.h).
  const transport::Connection& c = *peer.conn;
  AdmissionView v;
  v.capacity = c.send_buffer_capacity();
  v.free = c.send_buffer_free();
  v.held = c.stream_unacked(flow.stream);
  v.record = rec;
  v.flows = std::max({window_offered_, last_window_offered_, 1U});
  v.stalled = peer.drain.stalled();
  return admit(v);
}

void Worker::maybe_mark_ce(PeerState& peer, Flow& flow, uint8_t* ip, uint32_t len) noexcept {
  (void)len;
  // The flow's share of the BDP budget: the connection holds more than one
  // BDP of unacknowledged data and this flow wrote more than the average
  // flow did in the last window.
  const transport::Connection& c = *peer.conn;
  if (c.unacked_bytes() <= c.bdp() || last_window_flows_ == 0) return;
  if (flow.last_window_bytes * last_window_flows_ <= last_window_total_) return;
  if (ip[0] >> 4 == 4) {
    const uint8_t ecn = ip[1] & 3;
    if (ecn == 0 || ecn == 3) return;  // not ECT, or already CE
    // RFC 1624 incremental checksum update for the TOS byte.
    const uint16_t old_word = load_be16(ip);
    ip[1] |= 3;
    const uint16_t new_word = load_be16(ip);
    uint32_t sum = static_cast<uint16_t>(~load_be16(ip + 10));
    sum += static_cast<uint16_t>(~old_word);
    sum += new_word;
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
    store_be16(ip + 10, static_cast<uint16_t>(~sum));
  } else {
    const uint8_t ecn = (ip[1] >> 4) & 3;
    if (ecn == 0 || ecn == 3) return;
    ip[1] |= 0x30;
  }
  ++flow.ce_marked;
  ++peer.ce_marked;
  ++ctr_.ce_marked;
}

void Worker::drain_peer(PeerState& peer, TimePoint now) noexcept {
  transport::Connection& c = *peer.conn;
  // Records taken straight out of datagrams first: they precede whatever
  // their streams hold in the transport (drain_stream delivers them, then
  // reads on). Streams still holding some stay listed for the next pass.
  size_t keep = 0;
  for (size_t i = 0; i < peer.direct.size(); ++i) {
    const uint64_t sid = peer.direct[i];
    drain_stream(peer, sid, now);
    PeerState::RxStream& rs = peer.rx[sid];
    if (rs.waiting() > 0) {
      peer.direct[keep++] = sid;
    } else {
      rs.in_direct = false;
    }
  }
  peer.direct.resize(keep);
  uint64_t id = 0;
  while (c.next_readable(&id)) {
    if (id >= peer.rx.size()) {  // not a stream this gateway pair uses: discard
      c.read(id, nullptr, c.readable(id), nullptr, now);
      ++ctr_.drops[static_cast<size_t>(Drop::kBadRecord)];
      continue;
    }
    drain_stream(peer, id, now);
  }
}

void Worker::drain_stream(PeerState& peer, uint64_t id, TimePoint now) noexcept {
  transport::Connection& c = *peer.conn;
  PeerState::RxStream& rs = peer.rx[id];
  for (;;) {
    if (txq_len_ >= kTxQueue) {
      // The local port is behind: leave the records in the transport (its
      // receive window then holds the peer back, and the ingress gateway
      // counts what it cannot take) instead of dropping acknowledged data.
      if (!rs.parked) {
        rs.parked = true;
        peer.parked.push_back(id);
      }
      break;
    }
    // Records the sink took come first; then the rest of one it began.
    if (rs.waiting() > 0) {
      const bool all = deliver_ready(peer, id, now);
      // They may have filled the queue: back to its check (which parks the
      // stream), never on to a delivery without room.
      if (txq_len_ >= kTxQueue) continue;
      if (!all) break;  // its split window is full
    }
    if (rs.partial != nullptr) {
      const uint64_t n = std::min<uint64_t>(c.readable(id), rs.need - rs.filled);
      if (n == 0) break;
      c.read(id, rte_pktmbuf_mtod(rs.partial, uint8_t*) + kEthLen + rs.filled, n, nullptr, now);
      rs.filled += static_cast<uint32_t>(n);
      if (rs.filled < rs.need) break;
      rte_mbuf* m = rs.partial;
      const uint32_t len = rs.need;
      rs.partial = nullptr;
      rs.filled = 0;
      rs.need = 0;
      --direct_held_;
      finish_record(peer, id, m, len, now);
      continue;
    }
    if (rs.need == 0) {
      if (c.readable(id) < 2) break;
      uint8_t h[2];
      c.read(id, h, 2, nullptr, now);
      rs.need = load_be16(h);
      if (rs.need == 0) continue;  // an empty record: nothing to deliver
    }
    if (const uint64_t avail = c.readable(id); avail < rs.need) {
      // Part of the record is here: move it into the record's mbuf, so that
      // the stream's buffer is empty again and the rest, and what follows,
      // can come straight from their datagrams (take_in_order). Left in
      // the buffer, it would keep every later frame of the stream there.
      if (avail == 0 || kEthLen + rs.need > UINT16_MAX || direct_held_ >= kDirectMax ||
          split_->blocked(&peer, id)) {
        break;
      }
      rte_mbuf* m = rte_pktmbuf_alloc(local_.pool());
      if (m == nullptr) break;
      if (rte_pktmbuf_append(m, static_cast<uint16_t>(kEthLen + rs.need)) == nullptr) {
        rte_pktmbuf_free(m);
        break;
      }
      c.read(id, rte_pktmbuf_mtod(m, uint8_t*) + kEthLen, avail, nullptr, now);
      rs.partial = m;
      rs.filled = static_cast<uint32_t>(avail);
      ++direct_held_;
      break;
    }
    if (split_->blocked(&peer, id)) break;  // its split window is full: read it later
    if (neigh_full_ > 0) {
      uint8_t first[kTaggedRecordHeader + 40];
      const auto n =
          static_cast<uint32_t>(c.peek(id, first, std::min<uint32_t>(rs.need, sizeof first)));
      if (host_waits(first, n)) {
        wait_for_host(peer, id);
        break;
      }
    }
    // The record goes straight from the stream into the frame toward the
    // host (one copy; a tagged record's header is read apart, vlan.h);
    // only a record too large for an mbuf, or no mbuf, takes the scratch
    // buffer and deliver()'s checks and drop reasons.
    uint8_t head[kTaggedRecordHeader];
    uint32_t body = rs.need;  // the packet's bytes
    uint32_t held = 0;        // ... of which already read into `head`
    VlanTag tag;
    if (rs.need > kTaggedRecordHeader) {
      c.read(id, head, kTaggedRecordHeader, nullptr, now);
      if (read_tagged_header(head, rs.need, &tag)) {
        body -= kTaggedRecordHeader;
      } else {
        held = kTaggedRecordHeader;
      }
    }
    rte_mbuf* m = rte_pktmbuf_alloc(local_.pool());
    uint8_t* eth = m == nullptr ? nullptr
                                : reinterpret_cast<uint8_t*>(
                                      rte_pktmbuf_append(m, static_cast<uint16_t>(kEthLen + body)));
    if (eth != nullptr && kEthLen + body <= UINT16_MAX) {
      std::memcpy(eth + kEthLen, head, held);
      c.read(id, eth + kEthLen + held, body - held, nullptr, now);
      if (split_->on_wan(&peer, id, eth + kEthLen, body, now, tag)) {
        rte_pktmbuf_free(m);
      } else {
        deliver_frame(m, eth, body, now, tag);
      }
    } else {
      if (m != nullptr) rte_pktmbuf_free(m);
      std::memcpy(scratch_.data(), head, held);
      c.read(id, scratch_.data() + held, body - held, nullptr, now);
      if (!split_->on_wan(&peer, id, scratch_.data(), body, now, tag)) {
        deliver(scratch_.data(), body, now, tag);
      }
    }
    ++rs.packets;
    rs.bytes += rs.need;
    ++peer.delivered_packets;
    peer.delivered_bytes += rs.need;
    rs.need = 0;
    moved_ = true;
  }
}

size_t Worker::take_in_order(PeerState& peer, uint64_t id, const uint8_t* data,
                             size_t len) noexcept {
  if (id >= peer.rx.size()) return 0;  // drain_peer discards it
  PeerState::RxStream& rs = peer.rx[id];
  size_t used = 0;
  while (used < len) {
    if (rs.partial == nullptr) {
      // A record starts (its length here, or read already by drain_stream).
      if (direct_held_ >= kDirectMax || split_->blocked(&peer, id)) break;
      uint32_t need = rs.need;
      size_t head = 0;
      if (need == 0) {
        if (len - used < 2) break;
        need = load_be16(data + used);
        head = 2;
        if (need == 0) {  // an empty record: nothing to deliver
          used += 2;
          continue;
        }
      }
      if (kEthLen + need > UINT16_MAX) break;  // drain_stream's scratch path takes it
      rte_mbuf* m = rte_pktmbuf_alloc(local_.pool());
      if (m == nullptr) break;
      if (rte_pktmbuf_append(m, static_cast<uint16_t>(kEthLen + need)) == nullptr) {
        rte_pktmbuf_free(m);
        break;
      }
      used += head;
      rs.need = need;
      rs.partial = m;
      rs.filled = 0;
      ++direct_held_;
    }
    const size_t take = std::min<size_t>(len - used, rs.need - rs.filled);
    std::memcpy(rte_pktmbuf_mtod(rs.partial, uint8_t*) + kEthLen + rs.filled, data + used, take);
    rs.filled += static_cast<uint32_t>(take);
    used += take;
    if (rs.filled < rs.need) break;  // the rest comes in a later frame
    rs.ready.push_back(rs.partial);
    rs.partial = nullptr;
    rs.filled = 0;
    rs.need = 0;
    if (!rs.in_direct) {
      rs.in_direct = true;
      peer.direct.push_back(id);
    }
  }
  return used;
}

bool Worker::deliver_ready(PeerState& peer, uint64_t id, TimePoint now) noexcept {
  PeerState::RxStream& rs = peer.rx[id];
  while (rs.waiting() > 0) {
    if (txq_len_ >= kTxQueue || split_->blocked(&peer, id)) return false;
    rte_mbuf* m = rs.ready[rs.ready_head];
    if (host_waits(rte_pktmbuf_mtod(m, uint8_t*) + kEthLen, rte_pktmbuf_data_len(m) - kEthLen)) {
      wait_for_host(peer, id);
      return false;
    }
    ++rs.ready_head;
    --direct_held_;
    finish_record(peer, id, m, rte_pktmbuf_data_len(m) - kEthLen, now);
  }
  rs.ready.clear();
  rs.ready_head = 0;
  return true;
}

void Worker::finish_record(PeerState& peer, uint64_t id, rte_mbuf* m, uint32_t len,
                           TimePoint now) noexcept {
  PeerState::RxStream& rs = peer.rx[id];
  uint8_t* eth = rte_pktmbuf_mtod(m, uint8_t*);
  uint8_t* rec = eth + kEthLen;
  uint32_t body = len;
  VlanTag tag;
  if (len > kTaggedRecordHeader && read_tagged_header(rec, len, &tag)) {
    std::memmove(rec, rec + kTaggedRecordHeader, len - kTaggedRecordHeader);
    body -= kTaggedRecordHeader;
    rte_pktmbuf_trim(m, kTaggedRecordHeader);
  }
  if (split_->on_wan(&peer, id, rec, body, now, tag)) {
    rte_pktmbuf_free(m);
  } else {
    deliver_frame(m, eth, body, now, tag);
  }
  ++rs.packets;
  rs.bytes += len;
  ++peer.delivered_packets;
  peer.delivered_bytes += len;
  moved_ = true;
}

bool Worker::deliverable(const uint8_t* ip, uint32_t len) noexcept {
  if (ip_packet_len(ip, len) != len) {
    drop(Drop::kBadRecord);
    return false;
  }
  const roce::IpAddr dst = ip_dst(ip);
  if (!(site_.contains(dst) || site6_.contains(dst)) || dst == cfg_.local.address ||
      dst == cfg_.local.address6) {
    drop(Drop::kNotLocal);
    return false;
  }
  return true;
}

VlanTag Worker::site_tag_for(const uint8_t* ip, const VlanTag& sender) const noexcept {
  // The route lookup only when some route overrides the site's policy.
  const Route* r = route_vlans_ ? lookup(ip_src(ip)) : nullptr;
  const VlanPolicy& policy = r != nullptr && r->vlan ? *r->vlan : cfg_.local.vlan;
  return site_tag(sender, policy, ip_dscp(ip));
}

bool Worker::push_tag(rte_mbuf* m, const VlanTag& tag) noexcept {
  auto* eth = reinterpret_cast<uint8_t*>(rte_pktmbuf_prepend(m, kVlanTagBytes));
  if (eth == nullptr) return false;
  std::memmove(eth, eth + kVlanTagBytes, 12);
  store_be16(eth + 12, kTpidVlan);
  store_be16(eth + 14, tag.tci);
  return true;
}

void Worker::reply_local(rte_mbuf* m) noexcept {
  if (rx_tag_.present) {
    if (!push_tag(m, rx_tag_)) {
      drop(Drop::kNoMbuf, m);
      return;
    }
    ++ctr_.vlan_tx;
  }
  enqueue_local(m);
}

void Worker::deliver(const uint8_t* ip, uint32_t len, TimePoint now, const VlanTag& tag,
                     bool from_wan) noexcept {
  if (!deliverable(ip, len)) return;
  rte_mbuf* m = rte_pktmbuf_alloc(local_.pool());
  if (m == nullptr) {
    drop(Drop::kNoMbuf);
    return;
  }
  auto* eth =
      reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, static_cast<uint16_t>(kEthLen + len)));
  if (eth == nullptr) {
    drop(Drop::kOversize, m);
    return;
  }
  std::memcpy(eth + kEthLen, ip, len);
  send_to_host(m, eth, len, now, from_wan ? site_tag_for(ip, tag) : tag);
}

void Worker::deliver_frame(rte_mbuf* m, uint8_t* eth, uint32_t len, TimePoint now,
                           const VlanTag& sender) noexcept {
  if (!deliverable(eth + kEthLen, len)) {
    rte_pktmbuf_free(m);
    return;
  }
  send_to_host(m, eth, len, now, site_tag_for(eth + kEthLen, sender));
}

void Worker::send_to_host(rte_mbuf* m, uint8_t* eth, uint32_t len, TimePoint now,
                          const VlanTag& tag) noexcept {
  (void)len;
  const uint8_t* ip = eth + kEthLen;
  const roce::IpAddr dst = ip_dst(ip);
  std::memcpy(eth + 6, mac_.data(), 6);
  store_be16(eth + 12, (ip[0] >> 4) == 4 ? kEthIpv4 : kEthIpv6);
  if (tag.present) {
    if (!push_tag(m, tag)) {
      drop(Drop::kNoMbuf, m);
      return;
    }
    ++ctr_.vlan_tx;
    eth = rte_pktmbuf_mtod(m, uint8_t*);  // the frame now starts 4 bytes earlier
  }
  NeighborTable::Entry* e = neigh_.find_or_add(dst);
  if (e != nullptr && e->resolved) {
    std::memcpy(eth, e->mac.data(), 6);
    enqueue_local(m);
    return;
  }
  if (e == nullptr) {
    drop(Drop::kNeighborPending, m);
    return;
  }
  // On the host's VLAN (the tag's VID) at priority 0.
  e->ask = tag.present ? VlanTag::make(0, tag.vid()) : VlanTag{};
  if (e->failed || e->npending >= NeighborTable::kMaxPending) {
    drop(Drop::kNeighborPending, m);
  } else {
    if (e->npending == 0) e->asked_since = now;
    e->pending[e->npending++] = m;
    if (e->full()) ++neigh_full_;
  }
  if (e->last_request.is_zero() ||
      now - e->last_request > (e->failed ? NeighborTable::kFailedAsk : NeighborTable::kAsk)) {
    ask_neighbor(*e, now);
  }
}

void Worker::ask_neighbor(NeighborTable::Entry& e, TimePoint now) noexcept {
  e.last_request = now;
  if (e.ip.version == 6) {
    send_neighbor_solicitation(e.ip, e.ask);
  } else {
    send_arp_request(e.ip, now, e.ask);
  }
}

void Worker::age_neighbors(TimePoint now) noexcept {
  for (NeighborTable::Entry& e : neigh_.entries()) {
    if (!e.used || e.resolved || e.npending == 0) continue;
    if (now - e.asked_since >= NeighborTable::kResolveTimeout) {
      // No answer: what waits for the host is undeliverable.
      if (e.full()) --neigh_full_;
      for (uint32_t i = 0; i < e.npending; ++i) drop(Drop::kNeighborPending, e.pending[i]);
      e.npending = 0;
      e.failed = true;
      neigh_changed_ = true;
    } else if (now - e.last_request > NeighborTable::kAsk) {
      // Streams waiting on the host send nothing that would ask again.
      ask_neighbor(e, now);
    }
  }
}

bool Worker::host_waits(const uint8_t* rec, uint32_t len) noexcept {
  if (neigh_full_ == 0) return false;
  VlanTag tag;
  if (len > kTaggedRecordHeader && read_tagged_header(rec, len, &tag)) {
    rec += kTaggedRecordHeader;
    len -= kTaggedRecordHeader;
  }
  const uint8_t version = len > 0 ? rec[0] >> 4 : 0;
  if (!((version == 4 && len >= 20) || (version == 6 && len >= 40))) return false;
  const NeighborTable::Entry* e = neigh_.find(ip_dst(rec));
  return e != nullptr && e->full();
}

void Worker::wait_for_host(PeerState& peer, uint64_t id) noexcept {
  PeerState::RxStream& rs = peer.rx[id];
  if (!rs.host_wait) {
    rs.host_wait = true;
    peer.host_wait.push_back(id);
  }
}

void Worker::enqueue_local(rte_mbuf* m) noexcept {
  if (txq_len_ >= kTxQueue) {
    drop(Drop::kLocalTxFull, m);
    return;
  }
  txq_[(txq_head_ + txq_len_) % kTxQueue] = m;
  ++txq_len_;
}

void Worker::flush_local() noexcept {
  while (txq_len_ > 0) {
    rte_mbuf* burst[kBurst];
    const uint16_t n = static_cast<uint16_t>(std::min<uint32_t>(txq_len_, kBurst));
    for (uint16_t i = 0; i < n; ++i) burst[i] = txq_[(txq_head_ + i) % kTxQueue];
    const uint16_t sent = local_.tx(burst, n);
    for (uint16_t i = 0; i < sent; ++i) {
      ++ctr_.local_tx_packets;
      ctr_.local_tx_bytes += rte_pktmbuf_pkt_len(burst[i]);
    }
    txq_head_ = (txq_head_ + sent) % kTxQueue;
    txq_len_ -= sent;
    if (sent < n) break;  // the port is busy: retry on the next pass
  }
}

void Worker::housekeeping(TimePoint now) noexcept {
  next_housekeeping_ = now + Duration::from_ms(100);
  // Backlog windows of about one smoothed RTT (at least 10 ms).
  Duration win = Duration::from_ms(10);
  for (const auto& p : peers_) win = std::max(win, p->conn->stats().srtt);
  if (now - window_start_ >= win) {
    for (Flow& f : flows_.flows()) {
      f.last_window_bytes = f.window_bytes;
      f.window_bytes = 0;
    }
    last_window_total_ = window_total_;
    last_window_flows_ = window_flows_;
    window_total_ = 0;
    window_flows_ = 0;
    last_window_offered_ = window_offered_;
    window_offered_ = 0;
    ++window_epoch_;
    window_start_ = now;
  }
  if (const uint32_t n = flows_.expire(now - cfg_.wan.flow_idle_timeout); n > 0) {
    ctr_.flows_expired += n;
    hint_flow_ = nullptr;  // its slot may hold another flow later
  }
  split_->expire(now - cfg_.wan.flow_idle_timeout);
  age_neighbors(now);
  for (auto& p : peers_) {
    // Encrypted links keep alive in SecureIo; an insecure one pings through
    // its transport (the peer's ACK is the sign of life). The peer is heard
    // when any of its paths is.
    const bool secure = p->secure();
    if (!secure && now - p->last_rx >= PeerHealth::kKeepalive &&
        now - p->last_ping >= PeerHealth::kKeepalive) {
      p->conn->ping();
      p->last_ping = now;
    }
    p->health.update(now, secure ? p->secure_stats().last_rx : p->last_rx);
  }
}

}  // namespace rowan::gw
