#include "datapath/dpdk_wan_io.h"

#include <rte_flow.h>
#include <rte_ip.h>
#include <time.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "base/clock.h"
#include "codec/arp.h"
#include "codec/bytes.h"
#include "io/af_packet_ring.h"
#include "net/packet_util.h"

namespace rowan::gw {

const char* const kWanDropNames[] = {
    "runt",      "not_for_us",    "unsupported_l2", "malformed_ip", "bad_ip_checksum",
    "fragment",  "not_udp",       "wrong_port",     "wrong_source", "bad_udp_checksum",
    "truncated", "malformed_arp", "tx_unresolved",  "tx_oversize",  "steer_full",
};
static_assert(sizeof(kWanDropNames) / sizeof(kWanDropNames[0]) ==
              static_cast<size_t>(WanDrop::kCount));

namespace {

using namespace pkt;  // NOLINT: the packet helpers of packet_util.h

constexpr uint8_t kProtoUdp = 17;
constexpr uint8_t kTtl = 64;
// net_af_packet's default ring frame (2048 bytes, of which 2016 hold a frame)
// must fit in one mbuf, whatever the MTU.
constexpr uint32_t kMinMbuf = 2048;

/// The one's-complement sum of the IPv4 pseudo-header and the UDP segment at
/// `udp` (checksum field included as it is). A correct segment sums to 0xFFFF.
uint16_t udp4_sum(const uint8_t* ip, const uint8_t* udp, uint32_t udp_len) {
  // Native-order words, as ones_sum adds them: addresses, then protocol and
  // length as two big-endian 16-bit fields.
  const uint16_t proto_len[2] = {rte_cpu_to_be_16(kProtoUdp),
                                 rte_cpu_to_be_16(static_cast<uint16_t>(udp_len))};
  uint64_t sum = ones_sum(ip + 12, 8);
  sum += ones_sum(proto_len, sizeof proto_len);
  return ones_sum(udp, udp_len, sum);
}

std::array<uint8_t, 4> v4(const roce::IpAddr& a) {
  return {a.bytes[0], a.bytes[1], a.bytes[2], a.bytes[3]};
}

bool on_link(const roce::IpAddr& a, const roce::IpAddr& b, uint8_t len) {
  const uint32_t x = wire::load_be32(a.bytes.data());
  const uint32_t y = wire::load_be32(b.bytes.data());
  const uint32_t mask = len == 0 ? 0 : ~uint32_t{0} << (32 - len);
  return (x & mask) == (y & mask);
}

/// Throws for what the port cannot carry, before the port is opened.
const DpdkWanOptions& checked(const DpdkWanOptions& o) {
  if (o.address.version != 4 || o.peer.version != 4 || (o.next_hop && o.next_hop->version != 4)) {
    throw std::invalid_argument("the dpdk WAN backend carries IPv4 only (device " + o.device + ")");
  }
  if (o.mtu < 576 || o.mtu > 9000) {
    throw std::invalid_argument("a dpdk WAN link's mtu must be within 576..9000");
  }
  if (!o.next_hop && !on_link(o.address, o.peer, o.prefix_len)) {
    throw std::invalid_argument(
        "the peer is not on the dpdk link's WAN subnet and no next_hop is set");
  }
  return o;
}

// The link's frames, and a net_af_packet vdev's ring slots for them (main.cc
// gives the EAL the same geometry).
uint32_t mbuf_size(const DpdkWanOptions& o) {
  const uint32_t frame = io::ethernet_frame(o.mtu);
  uint32_t room = std::max(frame, kMinMbuf);
  (void)io::af_packet_device(o.device, frame, &room);
  return room;
}

// A steering ring holds what one worker hands another between two passes.
constexpr unsigned kSteerRing = 1024;

uint32_t port_mbufs(const DpdkWanOptions& o, uint16_t queues) {
  // Per extra queue: its descriptors, a full steering ring, and what its
  // worker holds (lent for sending, kept for a lending receiver).
  const uint32_t per_queue = uint32_t{o.rx_ring} + o.tx_ring + kSteerRing + 8 * 32 + 32;
  return o.nb_mbufs + (queues - 1U) * per_queue;
}

}  // namespace

DpdkWanPort::DpdkWanPort(const DpdkWanOptions& opts, uint16_t queues)
    : opts_(checked(opts)),
      port_(opts.device, opts.rx_ring, opts.tx_ring, mbuf_size(opts),
            port_mbufs(opts, queues == 0 ? 1 : queues), queues == 0 ? 1 : queues) {
  if (uint32_t{opts_.port} + port_.queues() > 65536 ||
      uint32_t{opts_.peer_port} + port_.queues() > 65536) {
    throw std::invalid_argument("a dpdk WAN link's port + queue passes 65535");
  }
  if (port_.queues() == 1) return;
  for (uint16_t q = 0; q < port_.queues(); ++q) {
    // Names are global to the process: the port id keeps them apart.
    const std::string name = "wsteer" + std::to_string(port_.id()) + "_" + std::to_string(q);
    rte_ring* r =
        rte_ring_create(name.c_str(), kSteerRing, static_cast<int>(rte_socket_id()), RING_F_SC_DEQ);
    if (r == nullptr) {
      for (rte_ring* x : rings_) rte_ring_free(x);
      rings_.clear();
      throw std::runtime_error("rte_ring_create " + name + ": " + rte_strerror(rte_errno));
    }
    rings_.push_back(r);
  }
  add_flow_rules();
}

// One rule per queue: IPv4 to the link's address, UDP to base + q, to queue
// q. PMDs without rte_flow (net_memif, net_af_packet) refuse the first, and
// steering alone does the work.
void DpdkWanPort::add_flow_rules() {
  const std::array<uint8_t, 4> own = v4(opts_.address);
  for (uint16_t q = 0; q < port_.queues(); ++q) {
    rte_flow_attr attr{};
    attr.ingress = 1;
    rte_flow_item_ipv4 ip_spec{};
    rte_flow_item_ipv4 ip_mask{};
    std::memcpy(&ip_spec.hdr.dst_addr, own.data(), 4);
    ip_mask.hdr.dst_addr = 0xFFFFFFFF;
    ip_spec.hdr.next_proto_id = kProtoUdp;
    ip_mask.hdr.next_proto_id = 0xFF;
    rte_flow_item_udp udp_spec{};
    rte_flow_item_udp udp_mask{};
    udp_spec.hdr.dst_port = rte_cpu_to_be_16(static_cast<uint16_t>(opts_.port + q));
    udp_mask.hdr.dst_port = 0xFFFF;
    const rte_flow_item pattern[] = {{RTE_FLOW_ITEM_TYPE_ETH, nullptr, nullptr, nullptr},
                                     {RTE_FLOW_ITEM_TYPE_IPV4, &ip_spec, nullptr, &ip_mask},
                                     {RTE_FLOW_ITEM_TYPE_UDP, &udp_spec, nullptr, &udp_mask},
                                     {RTE_FLOW_ITEM_TYPE_END, nullptr, nullptr, nullptr}};
    rte_flow_action_queue to{};
    to.index = q;
    const rte_flow_action actions[] = {{RTE_FLOW_ACTION_TYPE_QUEUE, &to},
                                       {RTE_FLOW_ACTION_TYPE_END, nullptr}};
    rte_flow_error err{};
    rte_flow* f = rte_flow_create(port_.id(), &attr, pattern, actions, &err);
    if (f == nullptr) break;
    flows_.push_back(f);
  }
  if (flows_.size() == port_.queues()) {
    flow_rules_ = port_.queues();
    return;
  }
  // All or none: a partial set would steer some workers by rule and the
  // rest by hash.
  rte_flow_error err{};
  for (void* f : flows_) rte_flow_destroy(port_.id(), static_cast<rte_flow*>(f), &err);
  flows_.clear();
}

DpdkWanPort::~DpdkWanPort() {
  rte_flow_error err{};
  for (void* f : flows_) rte_flow_destroy(port_.id(), static_cast<rte_flow*>(f), &err);
  for (rte_ring* r : rings_) {
    void* m = nullptr;
    while (rte_ring_dequeue(r, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
    rte_ring_free(r);
  }
}

bool DpdkWanPort::next_hop(std::array<uint8_t, 6>& mac, TimePoint& learned) const noexcept {
  const uint64_t v = next_mac_.load(std::memory_order_acquire);
  if ((v >> 48) == 0) return false;
  for (int i = 0; i < 6; ++i) mac[static_cast<size_t>(i)] = static_cast<uint8_t>(v >> (40 - 8 * i));
  learned = TimePoint::from_ns(learned_ns_.load(std::memory_order_relaxed));
  return true;
}

void DpdkWanPort::learn(const std::array<uint8_t, 6>& mac, TimePoint now) noexcept {
  uint64_t v = uint64_t{1} << 48;
  for (int i = 0; i < 6; ++i) v |= uint64_t{mac[static_cast<size_t>(i)]} << (40 - 8 * i);
  learned_ns_.store(now.ns(), std::memory_order_relaxed);
  next_mac_.store(v, std::memory_order_release);
}

DpdkWanPort& DpdkWanPorts::open(const std::string& name, const DpdkWanOptions& opts) {
  for (auto& [n, p] : ports_) {
    if (n == name) return *p;
  }
  ports_.emplace_back(name, std::make_unique<DpdkWanPort>(opts, queues_));
  return *ports_.back().second;
}

DpdkWanIo::DpdkWanIo(const DpdkWanOptions& opts)
    : owned_(std::make_unique<DpdkWanPort>(opts, 1)),
      shared_(*owned_),
      opts_(shared_.options()),
      port_(shared_.port()),
      mac_(port_.mac()),
      own_(v4(opts_.address)),
      peer_(v4(opts_.peer)),
      next_hop_ip_(opts_.next_hop ? *opts_.next_hop : opts_.peer) {}

DpdkWanIo::DpdkWanIo(DpdkWanPort& shared, uint16_t queue)
    : shared_(shared),
      queue_(queue),
      opts_(shared.options()),
      port_(shared.port()),
      ring_(shared.ring(queue)),
      mac_(port_.mac()),
      own_(v4(opts_.address)),
      peer_(v4(opts_.peer)),
      next_hop_ip_(opts_.next_hop ? *opts_.next_hop : opts_.peer) {
  if (queue >= shared.queues()) {
    throw std::invalid_argument("queue " + std::to_string(queue) + " of a port with " +
                                std::to_string(shared.queues()));
  }
  opts_.port = static_cast<uint16_t>(opts_.port + queue);
  opts_.peer_port = static_cast<uint16_t>(opts_.peer_port + queue);
}

DpdkWanIo::~DpdkWanIo() {
  for (rte_mbuf*& m : lent_) {
    if (m != nullptr) rte_pktmbuf_free(m);
  }
  rx_done();
}

bool DpdkWanIo::lend_rx(bool on) noexcept {
  if (!on) rx_done();
  lend_rx_ = on;
  return true;
}

void DpdkWanIo::rx_done() noexcept {
  if (nheld_ == 0) return;
  rte_pktmbuf_free_bulk(held_.data(), static_cast<unsigned>(nheld_));
  nheld_ = 0;
}

uint8_t* DpdkWanIo::tx_buffer(size_t i) noexcept {
  if (i >= lent_.size()) return nullptr;
  rte_mbuf*& m = lent_[i];
  if (m == nullptr) {
    m = rte_pktmbuf_alloc(port_.pool());
    if (m == nullptr) return nullptr;
    if (rte_pktmbuf_tailroom(m) < kHeaders + max_datagram()) {  // a pool for smaller frames
      rte_pktmbuf_free(m);
      m = nullptr;
      return nullptr;
    }
  }
  return rte_pktmbuf_mtod(m, uint8_t*) + kHeaders;
}

rte_mbuf* DpdkWanIo::take_lent(const uint8_t* data, int& slot) noexcept {
  for (size_t k = 0; k < lent_.size(); ++k) {
    const size_t j = (lent_hint_ + k) % lent_.size();
    rte_mbuf* m = lent_[j];
    if (m != nullptr && rte_pktmbuf_mtod(m, const uint8_t*) + kHeaders == data) {
      lent_[j] = nullptr;
      lent_hint_ = j + 1;
      slot = static_cast<int>(j);
      return m;
    }
  }
  slot = -1;
  return nullptr;
}

void DpdkWanIo::wait(Duration timeout) noexcept {
  if (timeout.ns() <= 0) return;
  timespec ts{timeout.ns() / 1000000000, timeout.ns() % 1000000000};
  nanosleep(&ts, nullptr);
}

void DpdkWanIo::send_arp_request(TimePoint now) noexcept {
  rte_mbuf* m = rte_pktmbuf_alloc(port_.pool());
  if (m == nullptr) return;
  auto* eth = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, arp::kFrameLen));
  if (eth == nullptr) {
    rte_pktmbuf_free(m);
    return;
  }
  arp::write_request(eth, mac_, opts_.address, next_hop_ip_);
  if (rte_eth_tx_burst(port_.id(), queue_, &m, 1) != 1) {
    rte_pktmbuf_free(m);
    return;
  }
  last_request_ = now;
  requested_ = true;
  ++wan_.arp_requests_sent;
}

void DpdkWanIo::build_frame(uint8_t* eth, const io::TxDatagram& d) noexcept {
  std::memcpy(eth, next_mac_.data(), 6);
  std::memcpy(eth + 6, mac_.data(), 6);
  store_be16(eth + 12, kEthIpv4);
  uint8_t* ip = eth + kEthLen;
  ip[0] = 0x45;
  ip[1] = static_cast<uint8_t>(d.ecn);
  store_be16(ip + 2, static_cast<uint16_t>(kIpLen + kUdpLen + d.len));
  store_be16(ip + 4, ip_id_++);
  store_be16(ip + 6, 0x4000);  // DF: the transport sizes datagrams to the MTU
  ip[8] = kTtl;
  ip[9] = kProtoUdp;
  store_be16(ip + 10, 0);
  std::memcpy(ip + 12, own_.data(), 4);
  std::memcpy(ip + 16, peer_.data(), 4);
  // ones_sum adds native-order words, so the complemented sums below are
  // stored as they are (memcpy), not byte-swapped.
  const auto ip_ck = static_cast<uint16_t>(~ones_sum(ip, kIpLen));
  std::memcpy(ip + 10, &ip_ck, 2);
  uint8_t* udp = ip + kIpLen;
  store_be16(udp, opts_.port);
  store_be16(udp + 2, opts_.peer_port);
  store_be16(udp + 4, static_cast<uint16_t>(kUdpLen + d.len));
  // No UDP checksum (zero, RFC 768): every transport datagram carries its
  // own integrity check, a CRC-32C or the link's AEAD tag, as a RoCEv2
  // packet carries its ICRC with a zero UDP checksum (and VXLAN, RFC 7348).
  // A checksum would be a second pass over the payload on both gateways.
  store_be16(udp + 6, 0);
  if (d.data != udp + kUdpLen) std::memcpy(udp + kUdpLen, d.data, d.len);
}

bool DpdkWanIo::resolved() const noexcept {
  std::array<uint8_t, 6> mac{};
  TimePoint at;
  return shared_.next_hop(mac, at);
}

bool DpdkWanIo::load_next_hop() noexcept {
  resolved_ = shared_.next_hop(next_mac_, learned_at_);
  return resolved_;
}

size_t DpdkWanIo::send_burst(std::span<const io::TxDatagram> pkts, TimePoint now) noexcept {
  // Resolution: ask while unknown (every arp_retry), and refresh a known MAC
  // every arp_refresh while still using it. Any queue may have learned it.
  load_next_hop();
  if (!resolved_ || now - learned_at_ >= opts_.arp_refresh) {
    const Duration every = resolved_ ? opts_.arp_retry * 5 : opts_.arp_retry;
    if (!requested_ || now - last_request_ >= every) send_arp_request(now);
  }
  if (!resolved_) {
    // Counted as sent-and-lost: the transport retransmits, the handshake retries.
    wan_.drops[static_cast<size_t>(WanDrop::kTxUnresolved)] += pkts.size();
    return pkts.size();
  }
  size_t done = 0;
  while (done < pkts.size()) {
    const auto n = static_cast<uint16_t>(std::min<size_t>(kBurst, pkts.size() - done));
    rte_mbuf* mbufs[kBurst];
    int lent_slot[kBurst];  // the lent slot each built frame came from, or -1
    uint16_t built = 0;
    uint16_t src[kBurst];  // the input index (within this chunk) of each built frame
    uint16_t stop = n;     // where a dry pool stopped the chunk
    for (uint16_t c = 0; c < n; ++c) {
      const io::TxDatagram& d = pkts[done + c];
      if (d.len > max_datagram()) {  // over the MTU
        count(WanDrop::kTxOversize);
        continue;
      }
      // A datagram the caller wrote into a lent mbuf is framed where it is.
      rte_mbuf* m = take_lent(d.data, lent_slot[built]);
      if (m == nullptr) m = rte_pktmbuf_alloc(port_.pool());
      if (m == nullptr) {  // the pool is dry: the caller keeps the rest
        stop = c;
        break;
      }
      void* eth = rte_pktmbuf_append(m, static_cast<uint16_t>(kHeaders + d.len));
      if (eth == nullptr) {  // more than the mbuf holds
        count(WanDrop::kTxOversize);
        rte_pktmbuf_free(m);
        continue;
      }
      build_frame(static_cast<uint8_t*>(eth), d);
      mbufs[built] = m;
      src[built++] = c;
    }
    const uint16_t sent = built == 0 ? 0 : rte_eth_tx_burst(port_.id(), queue_, mbufs, built);
    stats_.tx_packets += sent;
    for (uint16_t i = 0; i < sent; ++i) stats_.tx_bytes += pkts[done + src[i]].len;
    // Unsent: a lent mbuf is lent again with its datagram (the caller passes
    // it again as it is), any other goes back to the pool.
    for (uint16_t i = sent; i < built; ++i) {
      if (lent_slot[i] < 0) {
        rte_pktmbuf_free(mbufs[i]);
        continue;
      }
      rte_pktmbuf_reset(mbufs[i]);  // empty again; the payload stays where it was
      lent_[static_cast<size_t>(lent_slot[i])] = mbufs[i];
    }
    if (sent < built || stop < n) {
      // A partial tx_burst (queue full) or a dry pool: the caller keeps the rest.
      const size_t accepted = done + (sent < built ? src[sent] : stop);
      stats_.tx_full += pkts.size() - accepted;
      return accepted;
    }
    done += n;
  }
  return done;
}

void DpdkWanIo::handle_arp(rte_mbuf* m, uint8_t* eth, uint32_t len, TimePoint now) noexcept {
  const std::optional<arp::Message> msg = arp::parse(eth, len);
  if (!msg) {
    count(WanDrop::kMalformedArp);
    rte_pktmbuf_free(m);
    return;
  }
  // Learn the next hop from any ARP it sends (request, reply, gratuitous).
  if (msg->sender_ip == next_hop_ip_) {
    shared_.learn(msg->sender_mac, now);
    ++wan_.arp_learned;
  }
  if (msg->op == arp::kOpRequest && msg->target_ip == opts_.address) {
    arp::make_reply(eth, mac_, opts_.address);
    if (rte_eth_tx_burst(port_.id(), queue_, &m, 1) == 1) {
      ++wan_.arp_replies_sent;
      return;
    }
  }
  rte_pktmbuf_free(m);
}

const uint8_t* DpdkWanIo::accept_ipv4(const uint8_t* eth, uint32_t len, uint32_t& payload_len,
                                      io::Ecn& ecn) noexcept {
  const uint8_t* ip = eth + kEthLen;
  if (len < kEthLen + kIpLen) {
    count(WanDrop::kRunt);
    return nullptr;
  }
  const uint32_t ihl = (ip[0] & 0xFU) * 4U;
  const uint32_t total = load_be16(ip + 2);
  if ((ip[0] >> 4) != 4 || ihl < kIpLen || total < ihl) {
    count(WanDrop::kMalformedIp);
    return nullptr;
  }
  if (kEthLen + total > len) {
    count(WanDrop::kRunt);  // the frame is shorter than the IP packet says
    return nullptr;
  }
  if (ones_sum(ip, ihl) != 0xFFFF) {
    count(WanDrop::kBadIpChecksum);
    return nullptr;
  }
  if (std::memcmp(ip + 16, own_.data(), 4) != 0) {
    count(WanDrop::kNotForUs);
    return nullptr;
  }
  if ((load_be16(ip + 6) & 0x3FFF) != 0) {  // MF set or a fragment offset
    count(WanDrop::kFragment);
    return nullptr;
  }
  if (ip[9] != kProtoUdp) {
    count(WanDrop::kNotUdp);
    return nullptr;
  }
  const uint8_t* udp = ip + ihl;
  const uint32_t udp_len = total - ihl;
  if (udp_len < kUdpLen || load_be16(udp + 4) != udp_len) {
    count(WanDrop::kMalformedIp);
    return nullptr;
  }
  if (load_be16(udp + 2) != opts_.port) {
    count(WanDrop::kWrongPort);
    return nullptr;
  }
  if (std::memcmp(ip + 12, peer_.data(), 4) != 0 || load_be16(udp) != opts_.peer_port) {
    count(WanDrop::kWrongSource);
    return nullptr;
  }
  if (load_be16(udp + 6) != 0) {
    // The pseudo-header for this IHL: the addresses sit at 12..20 either way.
    if (udp4_sum(ip, udp, udp_len) != 0xFFFF) {
      count(WanDrop::kBadUdpChecksum);
      return nullptr;
    }
  }
  payload_len = udp_len - kUdpLen;
  ecn = static_cast<io::Ecn>(ip[1] & 3U);
  return udp + kUdpLen;
}

int DpdkWanIo::steer_target(const uint8_t* eth, uint32_t len) const noexcept {
  const uint8_t* ip = eth + kEthLen;
  if (len < kEthLen + kIpLen + kUdpLen || ip[9] != kProtoUdp) return -1;
  const uint32_t ihl = (ip[0] & 0xFU) * 4U;
  if (ihl < kIpLen || len < kEthLen + ihl + kUdpLen) return -1;
  const uint32_t dport = load_be16(ip + ihl + 2);
  const uint32_t base = shared_.options().port;
  if (dport < base || dport - base >= shared_.queues() || dport - base == queue_) return -1;
  return static_cast<int>(dport - base);
}

bool DpdkWanIo::take(rte_mbuf* m, io::RxDatagram& b, TimePoint burst_time, TimePoint now) noexcept {
  const uint32_t len = rte_pktmbuf_data_len(m);
  if (m->nb_segs != 1 || len < kEthLen) {
    count(m->nb_segs != 1 ? WanDrop::kTruncated : WanDrop::kRunt);
    rte_pktmbuf_free(m);
    return false;
  }
  auto* eth = rte_pktmbuf_mtod(m, uint8_t*);
  const bool to_us = std::memcmp(eth, mac_.data(), 6) == 0;
  const bool group = (eth[0] & 1U) != 0;
  const uint16_t type = load_be16(eth + 12);
  if (type == kEthArp && (to_us || group)) {
    handle_arp(m, eth, len, now);
    return false;
  }
  if (!to_us || type != kEthIpv4) {
    // Other hosts' unicast; broadcast/multicast that is not ARP is noise.
    count(!to_us && !group ? WanDrop::kNotForUs : WanDrop::kUnsupportedL2);
    rte_pktmbuf_free(m);
    return false;
  }
  if (ring_ != nullptr) {
    // Another worker's datagram: its own checks run where it lands.
    const int to = steer_target(eth, len);
    if (to >= 0) {
      if (rte_ring_mp_enqueue(shared_.ring(static_cast<uint16_t>(to)), m) == 0) {
        ++wan_.steered_out;
      } else {
        count(WanDrop::kSteerFull);
        rte_pktmbuf_free(m);
      }
      return false;
    }
  }
  uint32_t plen = 0;
  io::Ecn ecn = io::Ecn::kNotEct;
  const uint8_t* payload = accept_ipv4(eth, len, plen, ecn);
  bool filled = false;
  if (payload != nullptr) {
    if (!lend_rx_ && plen > b.capacity) {
      count(WanDrop::kTruncated);
      ++stats_.rx_truncated;
    } else {
      if (lend_rx_) {
        // The payload stays where it arrived, in the mbuf's own (writable)
        // memory: the caller reads it there, and SecureIo decrypts it in
        // place, until rx_done.
        b.data = const_cast<uint8_t*>(payload);
        held_[nheld_++] = m;
        m = nullptr;
      } else {
        std::memcpy(b.data, payload, plen);
      }
      b.len = plen;
      b.ecn = ecn;
      b.rx_time = burst_time;
      filled = true;
      ++stats_.rx_packets;
      stats_.rx_bytes += plen;
    }
  }
  if (m != nullptr) rte_pktmbuf_free(m);
  return filled;
}

size_t DpdkWanIo::recv_burst(std::span<io::RxDatagram> bufs, TimePoint now) noexcept {
  size_t filled = 0;
  // What other workers' queues steered here comes first, then the queue.
  bool ring_dry = ring_ == nullptr;
  while (filled < bufs.size()) {
    rte_mbuf* pkts[kBurst];
    // A lending caller gets no more than the mbufs it can still hold.
    const size_t room = lend_rx_ ? kHoldMax - nheld_ : kBurst;
    const auto want = static_cast<uint16_t>(std::min({size_t{kBurst}, bufs.size() - filled, room}));
    if (want == 0) break;
    uint16_t n = 0;
    const bool from_ring = !ring_dry;
    if (from_ring) {
      n = static_cast<uint16_t>(
          rte_ring_sc_dequeue_burst(ring_, reinterpret_cast<void**>(pkts), want, nullptr));
      wan_.steered_in += n;
      ring_dry = n < want;
      if (n == 0) continue;
    } else {
      n = rte_eth_rx_burst(port_.id(), queue_, pkts, want);
      if (n == 0) break;
    }
    // The burst's arrival time, read as it comes off the queue: the
    // transport measures RTTs and ACK hold times from it, not from when the
    // loop gets to each datagram (the DPDK side of the UDP backend's kernel
    // receive timestamps).
    const TimePoint burst_time = MonotonicClock().now();
    for (uint16_t i = 0; i < n; ++i) {
      if (take(pkts[i], bufs[filled], burst_time, now)) ++filled;
    }
    if (!from_ring && n < want) break;
  }
  return filled;
}

}  // namespace rowan::gw
