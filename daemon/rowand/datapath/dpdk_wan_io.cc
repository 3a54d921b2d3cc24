#include "datapath/dpdk_wan_io.h"

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
    "truncated", "malformed_arp", "tx_unresolved",  "tx_oversize",
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

}  // namespace

DpdkWanIo::DpdkWanIo(const DpdkWanOptions& opts)
    : opts_(checked(opts)),
      port_(opts.device, opts.rx_ring, opts.tx_ring, mbuf_size(opts), opts.nb_mbufs),
      mac_(port_.mac()),
      own_(v4(opts.address)),
      peer_(v4(opts.peer)),
      next_hop_ip_(opts.next_hop ? *opts.next_hop : opts.peer) {}

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
  if (port_.tx(&m, 1) != 1) {
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

size_t DpdkWanIo::send_burst(std::span<const io::TxDatagram> pkts, TimePoint now) noexcept {
  // Resolution: ask while unknown (every arp_retry), and refresh a known MAC
  // every arp_refresh while still using it.
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
    const uint16_t sent = built == 0 ? 0 : port_.tx(mbufs, built);
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
    next_mac_ = msg->sender_mac;
    resolved_ = true;
    learned_at_ = now;
    ++wan_.arp_learned;
  }
  if (msg->op == arp::kOpRequest && msg->target_ip == opts_.address) {
    arp::make_reply(eth, mac_, opts_.address);
    if (port_.tx(&m, 1) == 1) {
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

size_t DpdkWanIo::recv_burst(std::span<io::RxDatagram> bufs, TimePoint now) noexcept {
  size_t filled = 0;
  while (filled < bufs.size()) {
    rte_mbuf* pkts[kBurst];
    // A lending caller gets no more than the mbufs it can still hold.
    const size_t room = lend_rx_ ? kHoldMax - nheld_ : kBurst;
    const auto want = static_cast<uint16_t>(std::min({size_t{kBurst}, bufs.size() - filled, room}));
    if (want == 0) break;
    const uint16_t n = port_.rx(pkts, want);
    if (n == 0) break;
    // The burst's arrival time, read as it comes off the queue: the
    // transport measures RTTs and ACK hold times from it, not from when the
    // loop gets to each datagram (the DPDK side of the UDP backend's kernel
    // receive timestamps).
    const TimePoint burst_time = MonotonicClock().now();
    for (uint16_t i = 0; i < n; ++i) {
      rte_mbuf* m = pkts[i];
      const uint32_t len = rte_pktmbuf_data_len(m);
      if (m->nb_segs != 1 || len < kEthLen) {
        count(m->nb_segs != 1 ? WanDrop::kTruncated : WanDrop::kRunt);
        rte_pktmbuf_free(m);
        continue;
      }
      auto* eth = rte_pktmbuf_mtod(m, uint8_t*);
      const bool to_us = std::memcmp(eth, mac_.data(), 6) == 0;
      const bool group = (eth[0] & 1U) != 0;
      const uint16_t type = load_be16(eth + 12);
      if (type == kEthArp && (to_us || group)) {
        handle_arp(m, eth, len, now);
        continue;
      }
      if (!to_us) {
        // Other hosts' unicast; broadcast/multicast that is not ARP is noise.
        count(group ? WanDrop::kUnsupportedL2 : WanDrop::kNotForUs);
        rte_pktmbuf_free(m);
        continue;
      }
      if (type != kEthIpv4) {
        count(WanDrop::kUnsupportedL2);
        rte_pktmbuf_free(m);
        continue;
      }
      uint32_t plen = 0;
      io::Ecn ecn = io::Ecn::kNotEct;
      const uint8_t* payload = accept_ipv4(eth, len, plen, ecn);
      if (payload != nullptr) {
        io::RxDatagram& b = bufs[filled];
        if (!lend_rx_ && plen > b.capacity) {
          count(WanDrop::kTruncated);
          ++stats_.rx_truncated;
        } else {
          if (lend_rx_) {
            // The payload stays where it arrived, in the mbuf's own
            // (writable) memory: the caller reads it there, and SecureIo
            // decrypts it in place, until rx_done.
            b.data = const_cast<uint8_t*>(payload);
            held_[nheld_++] = m;
            m = nullptr;
          } else {
            std::memcpy(b.data, payload, plen);
          }
          b.len = plen;
          b.ecn = ecn;
          b.rx_time = burst_time;
          ++filled;
          ++stats_.rx_packets;
          stats_.rx_bytes += plen;
        }
      }
      if (m != nullptr) rte_pktmbuf_free(m);
    }
    if (n < want) break;
  }
  return filled;
}

}  // namespace rowan::gw
