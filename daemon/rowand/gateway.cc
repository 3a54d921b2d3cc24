#include "gateway.h"

#include <rte_ether.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <time.h>

#include "codec/bytes.h"
#include "registry.h"
#include "rowan/build_version.h"

namespace rowan::gw {
namespace {

using wire::load_be16;
using wire::store_be16;

constexpr uint16_t kEthIpv4 = 0x0800;
constexpr uint16_t kEthIpv6 = 0x86DD;
constexpr uint16_t kEthArp = 0x0806;
constexpr uint32_t kEthLen = 14;
constexpr uint32_t kMaxRecord = 65535;
constexpr Mac kBroadcast = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

bool ip_equal(const roce::IpAddr& a, const roce::IpAddr& b) {
  return a.version == b.version &&
         std::memcmp(a.bytes.data(), b.bytes.data(), a.version == 6 ? 16 : 4) == 0;
}

std::string mac_text(const Mac& m) {
  return fmt::format("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4],
                     m[5]);
}

// Basic IP sanity: version, header and total lengths within `len`. Returns the
// IP packet length (without Ethernet padding) or 0.
uint32_t ip_packet_len(const uint8_t* ip, uint32_t len) {
  if (len < 20) return 0;
  const uint8_t v = ip[0] >> 4;
  if (v == 4) {
    const uint32_t ihl = (ip[0] & 0xF) * 4U;
    const uint32_t total = load_be16(ip + 2);
    if (ihl < 20 || total < ihl || total > len) return 0;
    return total;
  }
  if (v == 6) {
    if (len < 40) return 0;
    const uint32_t total = 40U + load_be16(ip + 4);
    return total <= len ? total : 0;
  }
  return 0;
}

roce::IpAddr ip_src(const uint8_t* ip) {
  roce::IpAddr a;
  a.version = ip[0] >> 4;
  std::memcpy(a.bytes.data(), ip + (a.version == 4 ? 12 : 8), a.version == 4 ? 4 : 16);
  return a;
}
roce::IpAddr ip_dst(const uint8_t* ip) {
  roce::IpAddr a;
  a.version = ip[0] >> 4;
  std::memcpy(a.bytes.data(), ip + (a.version == 4 ? 16 : 24), a.version == 4 ? 4 : 16);
  return a;
}

// ICMPv6 checksum (RFC 4443 §2.3) of the IPv6 packet at `ip` (payload
// length from its header), with the checksum field taken as zero.
uint16_t icmp6_checksum(const uint8_t* ip) {
  const uint32_t plen = load_be16(ip + 4);
  uint32_t sum = plen + 58U;
  for (uint32_t i = 8; i < 40; i += 2) sum += load_be16(ip + i);  // addresses
  const uint8_t* p = ip + 40;
  for (uint32_t i = 0; i + 1 < plen; i += 2) sum += i == 2 ? 0U : load_be16(p + i);
  if ((plen & 1U) != 0) sum += static_cast<uint32_t>(p[plen - 1]) << 8;
  while ((sum >> 16) != 0) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

// An IPv6 header with ICMPv6 next, hop limit 255 (RFC 4861 requires it).
void ipv6_header(uint8_t* ip, uint16_t plen, const uint8_t* src, const uint8_t* dst) {
  std::memset(ip, 0, 8);
  ip[0] = 0x60;
  store_be16(ip + 4, plen);
  ip[6] = 58;
  ip[7] = 255;
  std::memcpy(ip + 8, src, 16);
  std::memcpy(ip + 24, dst, 16);
}

}  // namespace

const char* const kDropNames[] = {
    "runt_frame", "not_for_us",    "unsupported_l2", "malformed_ip",   "malformed_arp",
    "to_gateway", "no_route",      "oversize",       "malformed_roce", "flow_table_full",
    "backlog",    "peer_down",     "bad_record",     "not_local",      "neighbor_pending",
    "no_mbuf",    "local_tx_full", "worker_busy",
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
// NeighborTable

uint32_t NeighborTable::bucket(const roce::IpAddr& ip) {
  uint32_t h = 2166136261U;
  for (size_t i = 0; i < (ip.version == 6 ? 16U : 4U); ++i) h = (h ^ ip.bytes[i]) * 16777619U;
  return h % kCapacity;
}

NeighborTable::Entry* NeighborTable::find(const roce::IpAddr& ip) noexcept {
  for (uint32_t i = 0, b = bucket(ip); i < kCapacity; ++i, b = (b + 1) % kCapacity) {
    if (!e_[b].used) return nullptr;
    if (ip_equal(e_[b].ip, ip)) return &e_[b];
  }
  return nullptr;
}

NeighborTable::Entry* NeighborTable::find_or_add(const roce::IpAddr& ip) noexcept {
  for (uint32_t i = 0, b = bucket(ip); i < kCapacity; ++i, b = (b + 1) % kCapacity) {
    if (!e_[b].used) {
      if (size_ + 1 >= kCapacity) return nullptr;  // keep one hole so probes end
      e_[b] = Entry{};
      e_[b].used = true;
      e_[b].ip = ip;
      ++size_;
      return &e_[b];
    }
    if (ip_equal(e_[b].ip, ip)) return &e_[b];
  }
  return nullptr;
}

// ---------------------------------------------------------------------------
// What split mode (split_engine.h) uses of the packet engine.

class GatewaySplitIo final : public SplitIo {
 public:
  explicit GatewaySplitIo(Gateway& g) : g_(g) {}
  bool carry(Flow& f, const uint8_t* ip, uint32_t len, TimePoint now) noexcept override {
    if (!f.tail.empty()) return false;
    PeerState& peer = *g_.peers_[f.peer];
    if (!g_.write_record(peer, f, ip, len, now)) return false;
    ++f.packets;
    f.bytes += len;
    ++peer.carried_packets;
    peer.carried_bytes += len;
    return true;
  }
  bool has_room(const Flow& f, uint32_t len) const noexcept override {
    return f.tail.empty() && g_.peers_[f.peer]->conn->send_buffer_free() >= len + 2U;
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
  void send_local(const uint8_t* ip, uint32_t len, TimePoint now) noexcept override {
    g_.deliver(ip, len, now);
  }
  bool carry_packet(const uint8_t* ip, uint32_t len, TimePoint now) noexcept override {
    FlowKey key;
    if (!g_.classify(ip, len, key)) return false;
    const Gateway::Route* r = g_.lookup(key.dst);
    if (r == nullptr) return false;
    bool created = false;
    Flow* f = g_.flows_.find_or_add(key, now, &created);
    if (f == nullptr) return false;
    if (created) {
      ++g_.ctr_.flows_created;
      f->peer = r->peer;
    }
    f->last_seen = now;
    return carry(*f, ip, len, now);
  }

 private:
  Gateway& g_;
};

// ---------------------------------------------------------------------------
// Gateway

std::string ip_text(const roce::IpAddr& a) {
  char b[64];
  roce::format_ip_addr(a, b, sizeof b);
  return b;
}

Gateway::Gateway(const GatewayConfig& cfg, SiteIo& local, const Clock& clock,
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
  for (const PeerConfig& pc : cfg.peers) {
    auto p = std::make_unique<PeerState>();
    p->cfg = pc;
    p->events = PeerEvents(pc.name);
    p->link = pc.links.empty() ? &cfg.wan.links.front() : cfg.find_link(pc.links.front());
    if (p->link == nullptr) throw std::runtime_error("peer " + pc.name + ": no WAN link");
    io::PacketIo* wan = nullptr;
    // Worker i's connection: the link's port + i toward the peer's port + i.
    SockAddr bind = p->link->bind;
    SockAddr endpoint = pc.endpoint;
    if (bind.port + worker.index > 65535 || endpoint.port + worker.index > 65535) {
      throw std::runtime_error("link " + p->link->name + ": port + worker index passes 65535");
    }
    bind.port = static_cast<uint16_t>(bind.port + worker.index);
    endpoint.port = static_cast<uint16_t>(endpoint.port + worker.index);
    if (p->link->backend == WanBackend::kDpdk) {
      if (worker.index != 0) {
        throw std::runtime_error("link " + p->link->name +
                                 ": a dpdk WAN link carries one worker; with several workers "
                                 "([eal] lcores) use backend = \"udp\"");
      }
      // dpdk_wan_io.h: the link's port answers for one peer.
      for (const auto& other : peers_) {
        if (other->link == p->link) {
          throw std::runtime_error("link " + p->link->name +
                                   ": a dpdk WAN link carries one peer; give each its own link");
        }
      }
      DpdkWanOptions o;
      o.device = p->link->device;
      o.address = p->link->bind.addr;
      o.port = p->link->bind.port;
      o.prefix_len = p->link->prefix_len;
      o.next_hop = p->link->next_hop;
      o.peer = pc.endpoint.addr;
      o.peer_port = pc.endpoint.port;
      o.mtu = p->link->mtu;
      p->dpdk = std::make_unique<DpdkWanIo>(o);
      wan = p->dpdk.get();
    } else {
      const uint32_t ip_hdr = p->link->bind.addr.version == 6 ? 40 : 20;
      io::UdpUringOptions o;
      o.bind = io::UdpEndpoint::parse(bind.to_string());
      o.peer = io::UdpEndpoint::parse(endpoint.to_string());
      o.max_datagram = p->link->mtu - ip_hdr - 8;
      p->io = std::make_unique<io::UdpUringIo>(o);
      wan = p->io.get();
    }
    if (!cfg.local.insecure) {
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
      p->secure = std::make_unique<crypto::SecureIo>(*wan, so, now);
      wan = p->secure.get();
    }

    transport::TransportConfig tc;
    tc.connection_id = pair_connection_id(bind, endpoint);
    tc.link_rate = p->link->rate;
    tc.base_rtt = p->link->rtt;
    tc.max_datagram = wan->max_datagram();
    tc.cc = cfg.cc.algorithm;
    tc.cc_params = cfg.cc.params;
    tc.send_buffer_bdp = cfg.wan.send_buffer_bdp;
    tc.recv_window_bdp = cfg.wan.recv_window_bdp;
    tc.max_streams = cfg.wan.max_flows;
    tc.max_pto = PeerHealth::kMaxProbeTimeout;
    p->conn = std::make_unique<transport::Connection>(tc, clock, now);
    p->driver = std::make_unique<transport::Driver>(*p->conn, *wan, 32, &clock);
    p->rx.resize(cfg.wan.max_flows);
    p->parked.reserve(cfg.wan.max_flows);
    peers_.push_back(std::move(p));
  }
  split_io_ = std::make_unique<GatewaySplitIo>(*this);
  split_ = std::make_unique<SplitEngine>(*split_io_, cfg.local.mtu);
  split_->set_local_pmtu(cfg.local.roce_mtu);  // MTU translation (docs/split-mode.md)
  reload(cfg);
  next_housekeeping_ = now;
  window_start_ = now;
  publish(now);
}

Gateway::~Gateway() {
  for (uint32_t i = 0; i < txq_len_; ++i) rte_pktmbuf_free(txq_[(txq_head_ + i) % kTxQueue]);
  for (const auto& e : neigh_.entries()) {
    for (uint32_t i = 0; i < e.npending; ++i) rte_pktmbuf_free(e.pending[i]);
  }
}

std::string Gateway::reload(const GatewayConfig& cfg) {
  std::vector<Route> routes;
  for (const RouteConfig& r : cfg.routes) {
    uint32_t idx = UINT32_MAX;
    for (uint32_t i = 0; i < peers_.size(); ++i) {
      if (peers_[i]->cfg.name == r.peer) idx = i;
    }
    if (idx == UINT32_MAX) continue;  // a peer added by reload needs a restart
    routes.push_back({r.prefix, idx, r.mode});
  }
  // Longest prefix first, so the first match wins.
  std::stable_sort(routes.begin(), routes.end(),
                   [](const Route& a, const Route& b) { return a.prefix.len > b.prefix.len; });
  std::string what = fmt::format("{} routes (was {})", routes.size(), routes_.size());
  routes_ = std::move(routes);
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

const Gateway::Route* Gateway::lookup(const roce::IpAddr& dst) const noexcept {
  for (const Route& r : routes_) {
    if (r.prefix.contains(dst)) return &r;
  }
  return nullptr;
}

void Gateway::drop(Drop why, rte_mbuf* m) noexcept {
  ++ctr_.drops[static_cast<size_t>(why)];
  if (m != nullptr) rte_pktmbuf_free(m);
}

// The peer restarted (its handshake carries a new incarnation): its transport
// state is gone, so ours goes too and both start from scratch. What was in
// flight is lost; the hosts' own transports retransmit it. Rare: allocates.
void Gateway::reset_transport(PeerState& peer, TimePoint now) noexcept {
  peer.peer_restarts_seen = peer.secure->secure_stats().peer_restarts;
  try {
    auto conn = std::make_unique<transport::Connection>(peer.conn->config(), clock_, now);
    auto driver = std::make_unique<transport::Driver>(*conn, *peer.secure, 32, &clock_);
    peer.driver = std::move(driver);
    peer.conn = std::move(conn);
  } catch (const std::exception&) {
    return;  // keep the old transport; the next restart signal retries
  }
  for (auto& rs : peer.rx) rs = PeerState::RxStream{};
  peer.parked.clear();
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
}

bool Gateway::poll(TimePoint now) noexcept {
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
    if (p->secure && p->secure->secure_stats().peer_restarts != p->peer_restarts_seen) {
      reset_transport(*p, now);
    }
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

void Gateway::resume_parked(TimePoint now) noexcept {
  bool resumed = false;
  for (auto& p : peers_) {
    PeerState& peer = *p;
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
  if (resumed) flush_local();
}

TimePoint Gateway::next_timeout() const noexcept {
  TimePoint t = std::min(next_housekeeping_, split_->next_timeout());
  for (const auto& p : peers_) t = std::min(t, p->conn->next_timeout());
  return t;
}

void Gateway::idle_wait(Duration d) noexcept {
  if (peers_.size() == 1 && peers_.front()->io) {
    peers_.front()->io->wait(d, local_.wake_fd());
  } else {
    timespec ts{d.ns() / 1000000000, d.ns() % 1000000000};
    nanosleep(&ts, nullptr);
  }
  local_.disarm();
}

void Gateway::local_rx(TimePoint now) noexcept {
  rte_mbuf* pkts[kBurst];
  for (int round = 0; round < 4; ++round) {
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
      const uint32_t len = rte_pktmbuf_data_len(m);
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
    if (n < kBurst) break;
  }
}

void Gateway::handle_arp(rte_mbuf* m, uint8_t* eth, uint32_t len, TimePoint now) noexcept {
  uint8_t* a = eth + kEthLen;
  if (len < kEthLen + 28 || load_be16(a) != 1 || load_be16(a + 2) != kEthIpv4 || a[4] != 6 ||
      a[5] != 4) {
    drop(Drop::kMalformedArp, m);
    return;
  }
  const uint16_t op = load_be16(a + 6);
  roce::IpAddr spa{4, {}};
  roce::IpAddr tpa{4, {}};
  std::memcpy(spa.bytes.data(), a + 14, 4);
  std::memcpy(tpa.bytes.data(), a + 24, 4);
  const bool for_us = ip_equal(tpa, cfg_.local.address);
  // Learn (or refresh) the sender when it is on the site subnet.
  if (site_.contains(spa) && !ip_equal(spa, cfg_.local.address)) {
    NeighborTable::Entry* e = for_us ? neigh_.find_or_add(spa) : neigh_.find(spa);
    if (e != nullptr) {
      std::memcpy(e->mac.data(), a + 8, 6);
      e->resolved = true;
      e->updated = now;
      for (uint32_t i = 0; i < e->npending; ++i) {
        uint8_t* p = rte_pktmbuf_mtod(e->pending[i], uint8_t*);
        std::memcpy(p, e->mac.data(), 6);
        enqueue_local(e->pending[i]);
      }
      e->npending = 0;
    }
  }
  if (op == 1 && for_us && worker_.answers_neighbors) {
    // Turn the request into the reply in place.
    std::memcpy(eth, eth + 6, 6);
    std::memcpy(eth + 6, mac_.data(), 6);
    store_be16(a + 6, 2);
    std::memcpy(a + 18, a + 8, 10);  // target := sender (MAC and IP)
    std::memcpy(a + 8, mac_.data(), 6);
    std::memcpy(a + 14, cfg_.local.address.bytes.data(), 4);
    ++ctr_.arp_replies;
    enqueue_local(m);
    return;
  }
  rte_pktmbuf_free(m);
}

bool Gateway::classify(const uint8_t* ip, uint32_t len, FlowKey& key) noexcept {
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
    if (roce::parse_ip({ip, len}, p) != roce::ParseError::kOk) return false;
    key.kind = FlowKind::kRoce;
    key.qp = p.bth.dest_qp;
    key.sport = key.dport = 0;  // the UDP source port is per-QP entropy, not identity
  }
  return true;
}

void Gateway::handle_ip(rte_mbuf* m, uint8_t* ip, uint32_t len, TimePoint now) noexcept {
  const uint32_t iplen = ip_packet_len(ip, len);
  if (iplen == 0) {
    drop(Drop::kMalformedIp, m);
    return;
  }
  if (iplen > cfg_.local.mtu) {
    drop(Drop::kOversize, m);
    return;
  }
  const roce::IpAddr dst = ip_dst(ip);
  if (dst.version == 6 && (ip_equal(dst, cfg_.local.address6) || dst.bytes[0] == 0xFF)) {
    if (ip[6] == 58 && iplen >= 48) {
      handle_icmp6(m, ip, iplen, now);  // neighbour discovery
    } else {
      drop(Drop::kToGateway, m);
    }
    return;
  }
  if (ip_equal(dst, cfg_.local.address)) {
    drop(Drop::kToGateway, m);
    return;
  }
  const Route* r = lookup(dst);
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
  Flow* f = flows_.find_or_add(key, now, &created);
  if (f == nullptr) {
    drop(Drop::kFlowTableFull, m);
    return;
  }
  if (created) {
    ++ctr_.flows_created;
    f->peer = r->peer;
  }
  PeerState& peer = *peers_[f->peer];
  f->last_seen = now;
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
    drop(Drop::kBacklog, m);
    return;
  }
  if (key.kind == FlowKind::kRoce) maybe_mark_ce(peer, *f, ip, iplen);
  if (write_record(peer, *f, ip, iplen, now)) {
    ++f->packets;
    f->bytes += iplen;
    ++peer.carried_packets;
    peer.carried_bytes += iplen;
    rte_pktmbuf_free(m);
  } else {
    ++f->dropped;
    ++ctr_.flow_drops[static_cast<size_t>(key.kind)];
    drop(Drop::kBacklog, m);
  }
}

bool Gateway::write_record(PeerState& peer, Flow& flow, const uint8_t* ip, uint32_t len,
                           TimePoint now) noexcept {
  transport::Connection& c = *peer.conn;
  const size_t rec = len + 2U;
  if (c.send_buffer_free() < rec) return false;
  store_be16(scratch_.data(), static_cast<uint16_t>(len));
  std::memcpy(scratch_.data() + 2, ip, len);
  const size_t n = c.write(flow.stream, scratch_.data(), rec, false, now);
  flow.window_bytes += rec;
  window_total_ += rec;
  if (flow.window_bytes == rec) ++window_flows_;
  if (n < rec) {
    // The buffer's granules ran out mid-record: keep the rest, in order,
    // ahead of this flow's later packets (rare; the only allocation here).
    flow.tail.assign(scratch_.data() + n, scratch_.data() + rec);
    ++tails_;
  }
  return true;
}

void Gateway::flush_tails(TimePoint now) noexcept {
  if (tails_ == 0) return;  // the common case: no scan of the flow table
  for (Flow& f : flows_.flows()) {
    if (!f.used || f.tail.empty()) continue;
    const size_t n =
        peers_[f.peer]->conn->write(f.stream, f.tail.data(), f.tail.size(), false, now);
    f.tail.erase(f.tail.begin(), f.tail.begin() + static_cast<std::ptrdiff_t>(n));
    if (f.tail.empty()) --tails_;
  }
}

bool Gateway::within_share(const PeerState& peer, Flow& flow, uint32_t rec) noexcept {
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

void Gateway::maybe_mark_ce(PeerState& peer, Flow& flow, uint8_t* ip, uint32_t len) noexcept {
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

void Gateway::drain_peer(PeerState& peer, TimePoint now) noexcept {
  transport::Connection& c = *peer.conn;
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

void Gateway::drain_stream(PeerState& peer, uint64_t id, TimePoint now) noexcept {
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
    if (rs.need == 0) {
      if (c.readable(id) < 2) break;
      uint8_t h[2];
      c.read(id, h, 2, nullptr, now);
      rs.need = load_be16(h);
      if (rs.need == 0) continue;  // an empty record: nothing to deliver
    }
    if (c.readable(id) < rs.need) break;
    if (split_->blocked(&peer, id)) break;  // its split window is full: read it later
    c.read(id, scratch_.data(), rs.need, nullptr, now);
    ++rs.packets;
    rs.bytes += rs.need;
    if (!split_->on_wan(&peer, id, scratch_.data(), rs.need, now)) {
      deliver(scratch_.data(), rs.need, now);
    }
    ++peer.delivered_packets;
    peer.delivered_bytes += rs.need;
    rs.need = 0;
    moved_ = true;
  }
}

void Gateway::deliver(const uint8_t* ip, uint32_t len, TimePoint now) noexcept {
  if (ip_packet_len(ip, len) != len) {
    drop(Drop::kBadRecord);
    return;
  }
  const roce::IpAddr dst = ip_dst(ip);
  if (!(site_.contains(dst) || site6_.contains(dst)) || ip_equal(dst, cfg_.local.address) ||
      ip_equal(dst, cfg_.local.address6)) {
    drop(Drop::kNotLocal);
    return;
  }
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
  std::memcpy(eth + 6, mac_.data(), 6);
  store_be16(eth + 12, (ip[0] >> 4) == 4 ? kEthIpv4 : kEthIpv6);
  std::memcpy(eth + kEthLen, ip, len);
  NeighborTable::Entry* e = neigh_.find_or_add(dst);
  if (e != nullptr && e->resolved) {
    std::memcpy(eth, e->mac.data(), 6);
    enqueue_local(m);
    return;
  }
  if (e == nullptr || e->npending >= NeighborTable::kMaxPending) {
    drop(Drop::kNeighborPending, m);
  } else {
    e->pending[e->npending++] = m;
  }
  if (e != nullptr &&
      (e->last_request.is_zero() || now - e->last_request > Duration::from_ms(100))) {
    e->last_request = now;
    if (dst.version == 6) {
      send_neighbor_solicitation(dst);
    } else {
      send_arp_request(dst, now);
    }
  }
}

void Gateway::learn_neighbor(NeighborTable::Entry& e, const uint8_t* mac, TimePoint now) noexcept {
  std::memcpy(e.mac.data(), mac, 6);
  e.resolved = true;
  e.updated = now;
  for (uint32_t i = 0; i < e.npending; ++i) {
    std::memcpy(rte_pktmbuf_mtod(e.pending[i], uint8_t*), e.mac.data(), 6);
    enqueue_local(e.pending[i]);
  }
  e.npending = 0;
}

void Gateway::handle_icmp6(rte_mbuf* m, uint8_t* ip, uint32_t len, TimePoint now) noexcept {
  // RFC 4861: a neighbour solicitation (135) for our address is answered
  // with an advertisement; solicitations and advertisements (136) from site
  // hosts teach us their MACs. Everything else addressed to us is dropped.
  uint8_t* icmp = ip + 40;
  const uint8_t type = icmp[0];
  if (ip[7] != 255 || icmp[1] != 0 || (type != 135 && type != 136) ||
      load_be16(icmp + 2) != icmp6_checksum(ip)) {
    drop(Drop::kToGateway, m);
    return;
  }
  uint8_t* eth = ip - kEthLen;
  roce::IpAddr target{6, {}};
  std::memcpy(target.bytes.data(), icmp + 8, 16);
  // The link-layer address option: source (1) in a solicitation, target (2)
  // in an advertisement; the Ethernet source otherwise.
  const uint8_t* lladdr = eth + 6;
  for (uint32_t off = 24; off + 8 <= len - 40;) {
    const uint32_t olen = icmp[off + 1] * 8U;
    if (olen == 0) break;
    if (icmp[off] == (type == 135 ? 1 : 2) && olen >= 8) lladdr = icmp + off + 2;
    off += olen;
  }
  const roce::IpAddr src = ip_src(ip);
  const roce::IpAddr& learned = type == 135 ? src : target;
  if (site6_.contains(learned) && !ip_equal(learned, cfg_.local.address6)) {
    // Like ARP: a host that asks for us is added, others only refreshed.
    NeighborTable::Entry* e = type == 135 && ip_equal(target, cfg_.local.address6)
                                  ? neigh_.find_or_add(learned)
                                  : neigh_.find(learned);
    if (e != nullptr) learn_neighbor(*e, lladdr, now);
  }
  const bool dad =
      std::all_of(src.bytes.begin(), src.bytes.begin() + 16, [](uint8_t b) { return b == 0; });
  if (type != 135 || !ip_equal(target, cfg_.local.address6) || dad ||
      !worker_.answers_neighbors) {
    rte_pktmbuf_free(m);
    return;
  }
  // Turn the solicitation into a solicited advertisement in place.
  std::memcpy(eth, lladdr, 6);
  std::memcpy(eth + 6, mac_.data(), 6);
  uint8_t peer_ip[16];
  std::memcpy(peer_ip, ip + 8, 16);
  ipv6_header(ip, 32, cfg_.local.address6.bytes.data(), peer_ip);
  std::memset(icmp, 0, 32);
  icmp[0] = 136;
  icmp[4] = 0x60;  // solicited, override
  std::memcpy(icmp + 8, cfg_.local.address6.bytes.data(), 16);
  icmp[24] = 2;  // target link-layer address
  icmp[25] = 1;
  std::memcpy(icmp + 26, mac_.data(), 6);
  store_be16(icmp + 2, icmp6_checksum(ip));
  const uint32_t frame = kEthLen + 40 + 32;
  rte_pktmbuf_trim(m, static_cast<uint16_t>(rte_pktmbuf_pkt_len(m) - frame));
  ++ctr_.arp_replies;
  enqueue_local(m);
}

void Gateway::send_neighbor_solicitation(const roce::IpAddr& ip) noexcept {
  rte_mbuf* m = rte_pktmbuf_alloc(local_.pool());
  if (m == nullptr) {
    drop(Drop::kNoMbuf);
    return;
  }
  auto* eth = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, kEthLen + 40 + 32));
  if (eth == nullptr) {
    drop(Drop::kNoMbuf, m);
    return;
  }
  // To the target's solicited-node multicast group ff02::1:ffXX:XXXX.
  uint8_t group[16] = {0xFF, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xFF};
  std::memcpy(group + 13, ip.bytes.data() + 13, 3);
  const Mac dst_mac = {0x33, 0x33, 0xFF, ip.bytes[13], ip.bytes[14], ip.bytes[15]};
  std::memcpy(eth, dst_mac.data(), 6);
  std::memcpy(eth + 6, mac_.data(), 6);
  store_be16(eth + 12, kEthIpv6);
  uint8_t* v6 = eth + kEthLen;
  ipv6_header(v6, 32, cfg_.local.address6.bytes.data(), group);
  uint8_t* icmp = v6 + 40;
  std::memset(icmp, 0, 32);
  icmp[0] = 135;
  std::memcpy(icmp + 8, ip.bytes.data(), 16);
  icmp[24] = 1;  // source link-layer address
  icmp[25] = 1;
  std::memcpy(icmp + 26, mac_.data(), 6);
  store_be16(icmp + 2, icmp6_checksum(v6));
  ++ctr_.arp_requests;
  enqueue_local(m);
}

void Gateway::send_arp_request(const roce::IpAddr& ip, TimePoint now) noexcept {
  (void)now;
  rte_mbuf* m = rte_pktmbuf_alloc(local_.pool());
  if (m == nullptr) {
    drop(Drop::kNoMbuf);
    return;
  }
  auto* eth = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, 60));
  if (eth == nullptr) {
    drop(Drop::kNoMbuf, m);
    return;
  }
  std::memset(eth, 0, 60);
  std::memcpy(eth, kBroadcast.data(), 6);
  std::memcpy(eth + 6, mac_.data(), 6);
  store_be16(eth + 12, kEthArp);
  uint8_t* a = eth + kEthLen;
  store_be16(a, 1);
  store_be16(a + 2, kEthIpv4);
  a[4] = 6;
  a[5] = 4;
  store_be16(a + 6, 1);
  std::memcpy(a + 8, mac_.data(), 6);
  std::memcpy(a + 14, cfg_.local.address.bytes.data(), 4);
  std::memcpy(a + 24, ip.bytes.data(), 4);
  ++ctr_.arp_requests;
  enqueue_local(m);
}

void Gateway::enqueue_local(rte_mbuf* m) noexcept {
  if (txq_len_ >= kTxQueue) {
    drop(Drop::kLocalTxFull, m);
    return;
  }
  txq_[(txq_head_ + txq_len_) % kTxQueue] = m;
  ++txq_len_;
}

void Gateway::flush_local() noexcept {
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

void Gateway::housekeeping(TimePoint now) noexcept {
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
  ctr_.flows_expired += flows_.expire(now - cfg_.wan.flow_idle_timeout);
  split_->expire(now - cfg_.wan.flow_idle_timeout);
  for (auto& p : peers_) {
    // Encrypted links keep alive in SecureIo; an insecure one pings through
    // its transport (the peer's ACK is the sign of life).
    if (!p->secure && now - p->last_rx >= PeerHealth::kKeepalive &&
        now - p->last_ping >= PeerHealth::kKeepalive) {
      p->conn->ping();
      p->last_ping = now;
    }
    p->health.update(now, p->secure ? p->secure->secure_stats().last_rx : p->last_rx);
  }
}

void Gateway::publish(TimePoint now) {
  // The peers' events, logged here (every 100 ms) rather than on the packet path.
  for (auto& pp : peers_) {
    PeerState& p = *pp;
    PeerEvents::Observation o;
    o.up = p.health.up();
    o.seen = p.health.seen();
    o.outages = p.health.outages();
    o.last_outage = p.health.last_outage();
    if (p.secure) {
      o.handshakes = p.secure->secure_stats().handshakes_completed;
      o.peer_restarts = p.secure->secure_stats().peer_restarts;
    }
    for (const PeerEvents::Line& line : p.events.observe(o, now)) {
      if (line.level == PeerEvents::Level::kWarn) {
        spdlog::warn("{}", line.text);
      } else {
        spdlog::info("{}", line.text);
      }
    }
  }
  nlohmann::ordered_json s = make_snapshot(now);
  DataPathMetrics m;
  fill_metrics(now, m);
  {
    std::lock_guard<std::mutex> lock(snap_mu_);
    snap_ = std::move(s);
    metrics_ = std::move(m);
    ++snap_gen_;
    publish_wanted_.store(false, std::memory_order_release);
  }
  snap_cv_.notify_all();
}

nlohmann::ordered_json Gateway::snapshot(const std::string& cmd, Duration wait) const {
  std::unique_lock<std::mutex> lock(snap_mu_);
  const uint64_t gen = snap_gen_;
  publish_wanted_.store(true, std::memory_order_release);
  snap_cv_.wait_for(lock, std::chrono::nanoseconds(wait.ns()), [&] { return snap_gen_ != gen; });
  if (!snap_.contains(cmd)) throw std::invalid_argument("unknown command '" + cmd + "'");
  return snap_[cmd];
}

nlohmann::ordered_json Gateway::make_snapshot(TimePoint now) const {
  using J = nlohmann::ordered_json;
  J peers = J::array();
  J links = J::array();
  J flows = J::array();
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
        {"link", p.link->name},
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
        {"send_buffer_used_bytes", s.send_buffer_used},
        {"send_buffer_capacity_bytes", s.send_buffer_capacity},
        {"send_buffer_budget_bytes", p.conn->send_buffer_capacity()},
        {"recv_buffer_used_bytes", s.recv_buffer_used},
        {"carried_packets", p.carried_packets},
        {"carried_bytes", p.carried_bytes},
        {"delivered_packets", p.delivered_packets},
        {"delivered_ip_bytes", p.delivered_bytes},
        {"transport_drops", J{{"malformed", s.drop_malformed},
                              {"bad_version", s.drop_bad_version},
                              {"bad_connection_id", s.drop_bad_connection_id},
                              {"bad_integrity", s.drop_bad_integrity},
                              {"duplicate", s.drop_duplicate},
                              {"flow_control", s.drop_flow_control},
                              {"too_many_streams", s.drop_too_many_streams}}},
    });
    if (p.secure) {
      const crypto::SecureStats& ss = p.secure->secure_stats();
      J drops = J::object();
      for (size_t i = 0; i < ss.drops.size(); ++i) {
        drops[crypto::to_string(static_cast<crypto::SecureDrop>(i))] = ss.drops[i];
      }
      peers.back()["encryption"] = "aes-256-gcm";
      peers.back()["session"] = p.secure->peer_up(now) ? "up" : "down";
      peers.back()["last_handshake_seconds_ago"] =
          ss.last_handshake.is_zero() ? -1.0 : (now - ss.last_handshake).seconds();
      peers.back()["handshakes"] = ss.handshakes_completed;
      peers.back()["rekeys"] = ss.rekeys;
      peers.back()["tx_no_session"] = ss.tx_no_session;
      peers.back()["security_drops"] = drops;
      peers.back()["transport_resets"] = p.transport_resets;
    } else {
      peers.back()["encryption"] = "none (insecure)";
    }
    const io::IoStats& io = p.link_io().stats();
    links.push_back(J{{"name", p.link->name},
                      {"backend", p.dpdk ? "dpdk" : "udp"},
                      {"bind", p.link->bind.to_string()},
                      {"peer", p.cfg.name},
                      {"rate_bps", p.link->rate.bps()},
                      {"rtt_s", p.link->rtt.seconds()},
                      {"mtu", p.link->mtu},
                      {"tx_packets", io.tx_packets},
                      {"tx_bytes", io.tx_bytes},
                      {"rx_packets", io.rx_packets},
                      {"rx_bytes", io.rx_bytes},
                      {"tx_full", io.tx_full},
                      {"rx_wrong_source", p.io ? p.io->udp_stats().rx_wrong_source : 0},
                      {"tx_errors", p.io ? p.io->udp_stats().tx_errors : 0}});
    if (p.dpdk) {  // dpdk_wan_io.h: the port's drops by reason, ARP and device counters
      const DpdkWanStats& ws = p.dpdk->wan_stats();
      J drops = J::object();
      for (size_t i = 0; i < ws.drops.size(); ++i) drops[kWanDropNames[i]] = ws.drops[i];
      const PortStats ps = p.dpdk->port_stats();
      links.back()["rx_wrong_source"] = ws.drops[static_cast<size_t>(WanDrop::kWrongSource)];
      links.back()["device"] = p.link->device;
      links.back()["resolved"] = p.dpdk->resolved();
      links.back()["drops"] = drops;
      links.back()["arp"] = J{{"requests_sent", ws.arp_requests_sent},
                              {"replies_sent", ws.arp_replies_sent},
                              {"learned", ws.arp_learned}};
      links.back()["port"] =
          J{{"ipackets", ps.ipackets}, {"opackets", ps.opackets}, {"imissed", ps.imissed},
            {"ierrors", ps.ierrors},   {"oerrors", ps.oerrors},   {"rx_nombuf", ps.rx_nombuf}};
    }
  }
  int listed = 0;
  for (const Flow& f : flows_.flows()) {
    if (!f.used || ++listed > 1000) continue;
    J fj{{"kind", to_string(f.key.kind)},
         {"src", ip_text(f.key.src)},
         {"dst", ip_text(f.key.dst)},
         {"peer", peers_[f.peer]->cfg.name},
         {"stream", f.stream},
         {"packets", f.packets},
         {"bytes", f.bytes},
         {"ce_marked", f.ce_marked},
         {"dropped", f.dropped},
         {"buffered_bytes", peers_[f.peer]->conn->stream_unacked(f.stream)},
         {"idle_s", (now - f.last_seen).seconds()}};
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
           {"peers", peers.size()},
           {"flows", flows_.size()},
           {"flows_created", ctr_.flows_created},
           {"flows_expired", ctr_.flows_expired},
           {"neighbors", neigh_.size()},
           {"carried_packets", carried},
           {"delivered_packets", delivered},
           {"ce_marked", ctr_.ce_marked},
           {"arp_replies", ctr_.arp_replies},
           {"arp_requests", ctr_.arp_requests},
           {"drops", drops},
           {"flow_drops", flow_drops},
           {"split", split_->snapshot()},
           {"worker", J{{"index", worker_.index},
                        {"lcore", worker_.lcore},
                        {"active_flows", flows_.size()},
                        {"rx_packets", ctr_.local_rx_packets},
                        {"tx_packets", ctr_.local_tx_packets},
                        {"busy", busy_.busy_ratio()}}}};
  return J{{"status", status}, {"peers", peers}, {"links", links}, {"flows", flows}};
}

}  // namespace rowan::gw
