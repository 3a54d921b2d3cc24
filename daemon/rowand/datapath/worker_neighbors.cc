// The gateway's neighbours on the site subnet (ARP for IPv4, neighbour
// discovery for IPv6): the fixed-size table, answering for the gateway's
// addresses (worker 0 only, WorkerOptions), learning hosts, and asking for
// unresolved ones. Runs on the worker's lcore.
#include "datapath/worker.h"

#include <rte_ether.h>

#include <algorithm>
#include <cstring>

#include "codec/arp.h"
#include "net/packet_util.h"

namespace rowan::gw {
namespace {

using namespace pkt;  // NOLINT: the packet helpers of packet_util.h

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
    if (e_[b].ip == ip) return &e_[b];
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
    if (e_[b].ip == ip) return &e_[b];
  }
  return nullptr;
}

void Worker::handle_arp(rte_mbuf* m, uint8_t* eth, uint32_t len, TimePoint now) noexcept {
  const std::optional<arp::Message> msg = arp::parse(eth, len);
  if (!msg) {
    drop(Drop::kMalformedArp, m);
    return;
  }
  const roce::IpAddr& spa = msg->sender_ip;
  const bool for_us = msg->target_ip == cfg_.local.address;
  // Learn (or refresh) the sender when it is on the site subnet.
  if (site_.contains(spa) && spa != cfg_.local.address) {
    NeighborTable::Entry* e = for_us ? neigh_.find_or_add(spa) : neigh_.find(spa);
    if (e != nullptr) learn_neighbor(*e, msg->sender_mac.data(), now);
  }
  if (msg->op == arp::kOpRequest && for_us && worker_.answers_neighbors) {
    arp::make_reply(eth, mac_, cfg_.local.address);
    ++ctr_.arp_replies;
    reply_local(m);
    return;
  }
  rte_pktmbuf_free(m);
}

uint32_t Worker::unresolved_neighbors() const noexcept {
  uint32_t n = 0;
  for (const NeighborTable::Entry& e : neigh_.entries()) n += e.used && !e.resolved ? 1 : 0;
  return n;
}

size_t Worker::streams_waiting_for_host() const noexcept {
  size_t n = 0;
  for (const auto& p : peers_) n += p->host_wait.size();
  return n;
}

void Worker::learn_neighbor(NeighborTable::Entry& e, const uint8_t* mac, TimePoint now) noexcept {
  if (e.full()) --neigh_full_;
  if (!e.resolved) neigh_changed_ = true;  // streams may wait on it
  std::memcpy(e.mac.data(), mac, 6);
  e.resolved = true;
  e.failed = false;
  e.updated = now;
  for (uint32_t i = 0; i < e.npending; ++i) {
    std::memcpy(rte_pktmbuf_mtod(e.pending[i], uint8_t*), e.mac.data(), 6);
    enqueue_local(e.pending[i]);
  }
  e.npending = 0;
}

void Worker::handle_icmp6(rte_mbuf* m, uint8_t* ip, uint32_t len, TimePoint now) noexcept {
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
  if (site6_.contains(learned) && learned != cfg_.local.address6) {
    // Like ARP: a host that asks for us is added, others only refreshed.
    NeighborTable::Entry* e = type == 135 && target == cfg_.local.address6
                                  ? neigh_.find_or_add(learned)
                                  : neigh_.find(learned);
    if (e != nullptr) learn_neighbor(*e, lladdr, now);
  }
  const bool dad =
      std::all_of(src.bytes.begin(), src.bytes.begin() + 16, [](uint8_t b) { return b == 0; });
  if (type != 135 || target != cfg_.local.address6 || dad || !worker_.answers_neighbors) {
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
  reply_local(m);
}

void Worker::send_neighbor_solicitation(const roce::IpAddr& ip, const VlanTag& tag) noexcept {
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
  if (tag.present && !push_tag(m, tag)) {
    drop(Drop::kNoMbuf, m);
    return;
  }
  enqueue_local(m);
}

void Worker::send_arp_request(const roce::IpAddr& ip, TimePoint now, const VlanTag& tag) noexcept {
  (void)now;
  rte_mbuf* m = rte_pktmbuf_alloc(local_.pool());
  if (m == nullptr) {
    drop(Drop::kNoMbuf);
    return;
  }
  auto* eth = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, arp::kFrameLen));
  if (eth == nullptr) {
    drop(Drop::kNoMbuf, m);
    return;
  }
  arp::write_request(eth, mac_, cfg_.local.address, ip);
  ++ctr_.arp_requests;
  if (tag.present && !push_tag(m, tag)) {
    drop(Drop::kNoMbuf, m);
    return;
  }
  enqueue_local(m);
}

}  // namespace rowan::gw
