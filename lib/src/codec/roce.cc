#include "codec/roce.h"

#include <zlib.h>

#include <cstring>

#include "codec/bytes.h"
#include "codec/ethertypes.h"

namespace rowan::roce {
namespace {

using wire::load_be16;
using wire::load_be24;
using wire::load_be32;
using wire::load_be64;
using wire::store_be16;
using wire::store_be24;
using wire::store_be32;
using wire::store_be64;

constexpr uint8_t kIpProtoUdp = 17;

constexpr uint16_t ext_len_of(uint16_t mask) {
  uint16_t n = 0;
  if (mask & kHasXrcEth) n += kXrcEthLen;
  if (mask & kHasFeth) n += kFethLen;
  if (mask & kHasDeth) n += kDethLen;
  if (mask & kHasReth) n += kRethLen;
  if (mask & kHasAtomicEth) n += kAtomicEthLen;
  if (mask & kHasAeth) n += kAethLen;
  if (mask & kHasAtomicAckEth) n += kAtomicAckEthLen;
  if (mask & kHasImmDt) n += kImmDtLen;
  if (mask & kHasIeth) n += kIethLen;
  return n;
}

struct OpcodeTable {
  std::array<OpcodeInfo, 256> e{};
  constexpr void set(uint8_t code, const char* name, Transport t, uint16_t mask,
                     uint16_t fixed = 0) {
    e[code] = OpcodeInfo{name, t, mask, ext_len_of(mask), fixed};
  }
  // The operations shared by RC and UC (IBA table 38), offset by the transport base.
  constexpr void send_write(uint8_t base, Transport t, const char* const* names) {
    const uint16_t rq = kIsRequest | kHasPayload;
    set(base + 0x00, names[0], t, rq | kIsFirst);
    set(base + 0x01, names[1], t, rq | kIsMiddle);
    set(base + 0x02, names[2], t, rq | kIsLast);
    set(base + 0x03, names[3], t, rq | kIsLast | kHasImmDt);
    set(base + 0x04, names[4], t, rq | kIsOnly);
    set(base + 0x05, names[5], t, rq | kIsOnly | kHasImmDt);
    set(base + 0x06, names[6], t, rq | kIsFirst | kHasReth);
    set(base + 0x07, names[7], t, rq | kIsMiddle);
    set(base + 0x08, names[8], t, rq | kIsLast);
    set(base + 0x09, names[9], t, rq | kIsLast | kHasImmDt);
    set(base + 0x0a, names[10], t, rq | kIsOnly | kHasReth);
    set(base + 0x0b, names[11], t, rq | kIsOnly | kHasReth | kHasImmDt);
  }
};

constexpr const char* kRcNames[] = {"RC_SEND_FIRST",       "RC_SEND_MIDDLE",
                                    "RC_SEND_LAST",        "RC_SEND_LAST_WITH_IMMEDIATE",
                                    "RC_SEND_ONLY",        "RC_SEND_ONLY_WITH_IMMEDIATE",
                                    "RC_RDMA_WRITE_FIRST", "RC_RDMA_WRITE_MIDDLE",
                                    "RC_RDMA_WRITE_LAST",  "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
                                    "RC_RDMA_WRITE_ONLY",  "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE"};
constexpr const char* kUcNames[] = {"UC_SEND_FIRST",       "UC_SEND_MIDDLE",
                                    "UC_SEND_LAST",        "UC_SEND_LAST_WITH_IMMEDIATE",
                                    "UC_SEND_ONLY",        "UC_SEND_ONLY_WITH_IMMEDIATE",
                                    "UC_RDMA_WRITE_FIRST", "UC_RDMA_WRITE_MIDDLE",
                                    "UC_RDMA_WRITE_LAST",  "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
                                    "UC_RDMA_WRITE_ONLY",  "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE"};

constexpr const char* kXrcNames[] = {"XRC_SEND_FIRST",
                                     "XRC_SEND_MIDDLE",
                                     "XRC_SEND_LAST",
                                     "XRC_SEND_LAST_WITH_IMMEDIATE",
                                     "XRC_SEND_ONLY",
                                     "XRC_SEND_ONLY_WITH_IMMEDIATE",
                                     "XRC_RDMA_WRITE_FIRST",
                                     "XRC_RDMA_WRITE_MIDDLE",
                                     "XRC_RDMA_WRITE_LAST",
                                     "XRC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
                                     "XRC_RDMA_WRITE_ONLY",
                                     "XRC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
                                     "XRC_RDMA_READ_REQUEST",
                                     "XRC_RDMA_READ_RESPONSE_FIRST",
                                     "XRC_RDMA_READ_RESPONSE_MIDDLE",
                                     "XRC_RDMA_READ_RESPONSE_LAST",
                                     "XRC_RDMA_READ_RESPONSE_ONLY",
                                     "XRC_ACKNOWLEDGE",
                                     "XRC_ATOMIC_ACKNOWLEDGE",
                                     "XRC_CMP_SWAP",
                                     "XRC_FETCH_ADD",
                                     nullptr,
                                     "XRC_SEND_LAST_WITH_INVALIDATE",
                                     "XRC_SEND_ONLY_WITH_INVALIDATE"};

constexpr OpcodeTable make_table() {
  OpcodeTable t;
  const Transport rc = Transport::kRc;
  t.send_write(0x00, rc, kRcNames);
  t.set(op::kRcReadRequest, "RC_RDMA_READ_REQUEST", rc, kIsRequest | kIsOnly | kHasReth);
  t.set(op::kRcReadResponseFirst, "RC_RDMA_READ_RESPONSE_FIRST", rc,
        kIsResponse | kHasPayload | kIsFirst | kHasAeth);
  t.set(op::kRcReadResponseMiddle, "RC_RDMA_READ_RESPONSE_MIDDLE", rc,
        kIsResponse | kHasPayload | kIsMiddle);
  t.set(op::kRcReadResponseLast, "RC_RDMA_READ_RESPONSE_LAST", rc,
        kIsResponse | kHasPayload | kIsLast | kHasAeth);
  t.set(op::kRcReadResponseOnly, "RC_RDMA_READ_RESPONSE_ONLY", rc,
        kIsResponse | kHasPayload | kIsOnly | kHasAeth);
  t.set(op::kRcAck, "RC_ACKNOWLEDGE", rc, kIsResponse | kIsOnly | kHasAeth);
  t.set(op::kRcAtomicAck, "RC_ATOMIC_ACKNOWLEDGE", rc,
        kIsResponse | kIsOnly | kHasAeth | kHasAtomicAckEth);
  t.set(op::kRcCompareSwap, "RC_CMP_SWAP", rc, kIsRequest | kIsOnly | kHasAtomicEth);
  t.set(op::kRcFetchAdd, "RC_FETCH_ADD", rc, kIsRequest | kIsOnly | kHasAtomicEth);
  t.set(op::kRcSendLastInv, "RC_SEND_LAST_WITH_INVALIDATE", rc,
        kIsRequest | kHasPayload | kIsLast | kHasIeth);
  t.set(op::kRcSendOnlyInv, "RC_SEND_ONLY_WITH_INVALIDATE", rc,
        kIsRequest | kHasPayload | kIsOnly | kHasIeth);

  t.send_write(0x20, Transport::kUc, kUcNames);

  t.set(op::kUdSendOnly, "UD_SEND_ONLY", Transport::kUd,
        kIsRequest | kHasPayload | kIsOnly | kHasDeth);
  t.set(op::kUdSendOnlyImm, "UD_SEND_ONLY_WITH_IMMEDIATE", Transport::kUd,
        kIsRequest | kHasPayload | kIsOnly | kHasDeth | kHasImmDt);

  // IBA 1.5 (rxe in Linux 6.2+): FLUSH is answered with a zero-length READ
  // response, ATOMIC WRITE with an ACK.
  t.set(op::kRcFlush, "RC_FLUSH", rc, kIsRequest | kIsOnly | kHasFeth | kHasReth);
  t.set(op::kRcAtomicWrite, "RC_ATOMIC_WRITE", rc, kIsRequest | kIsOnly | kHasReth | kHasPayload);

  // XRC: the RC operations at 0xa0 + code; requests carry an XRCETH right
  // after the BTH, responses are as RC's.
  for (uint32_t code = 0; code <= op::kRcSendOnlyInv; ++code) {
    const OpcodeInfo& r = t.e[code];
    if (r.name == nullptr) continue;
    const uint16_t mask = (r.mask & kIsRequest) ? (r.mask | kHasXrcEth) : r.mask;
    t.set(static_cast<uint8_t>(op::kXrcBase + code), kXrcNames[code], Transport::kXrc, mask);
  }

  t.set(op::kCnp, "CNP", Transport::kCnp, kIsOnly, kCnpPayloadLen);
  return t;
}

constexpr OpcodeTable kTable = make_table();

constexpr std::string_view kErrorText[] = {
    "ok",
    "truncated Ethernet header",
    "truncated 802.1Q tag",
    "not IP (ethertype)",
    "truncated IP header",
    "bad IP version",
    "IPv4 options present (IHL != 5)",
    "IP length inconsistent with frame",
    "IP fragment",
    "IPv6 extension headers present",
    "not UDP",
    "truncated UDP header",
    "bad UDP length",
    "not RoCEv2 (UDP destination port is not 4791)",
    "truncated BTH",
    "unknown or unsupported opcode",
    "bad BTH transport version",
    "truncated extended headers",
    "truncated ICRC",
    "bad PadCnt",
    "bad CNP length",
};
static_assert(std::size(kErrorText) == static_cast<size_t>(ParseError::kCount));

// Parses UDP + BTH + extended headers; the IP layer is already in `out`.
// `end` is the offset one past the IP payload.
ParseError parse_l4(const uint8_t* d, uint32_t end, RocePacket& out) noexcept {
  const uint32_t l4 = out.l4_off;
  if (end < l4 + kUdpHeaderLen) return ParseError::kTruncatedUdp;
  out.udp_sport = load_be16(d + l4);
  out.udp_dport = load_be16(d + l4 + 2);
  const uint16_t udp_len = load_be16(d + l4 + 4);
  if (udp_len < kUdpHeaderLen || l4 + udp_len != end) return ParseError::kBadUdpLength;
  if (out.udp_dport != kRoceV2Port) return ParseError::kNotRoceV2;

  const uint32_t b = l4 + kUdpHeaderLen;
  if (end < b + kBthLen) return ParseError::kTruncatedBth;
  Bth& bth = out.bth;
  bth.opcode = d[b];
  // The opcode decides every length below: validate it first.
  const OpcodeInfo& info = kTable.e[bth.opcode];
  if (!info.valid()) return ParseError::kUnknownOpcode;
  bth.se = (d[b + 1] & 0x80) != 0;
  bth.migreq = (d[b + 1] & 0x40) != 0;
  bth.pad_count = (d[b + 1] >> 4) & 0x3;
  bth.tver = d[b + 1] & 0xF;
  bth.pkey = load_be16(d + b + 2);
  bth.fecn = (d[b + 4] & 0x80) != 0;
  bth.becn = (d[b + 4] & 0x40) != 0;
  bth.dest_qp = load_be24(d + b + 5);
  bth.ack_req = (d[b + 8] & 0x80) != 0;
  bth.psn = load_be24(d + b + 9);
  out.bth_off = static_cast<uint16_t>(b);
  if (bth.tver != 0) return ParseError::kBadTver;

  uint32_t p = b + kBthLen;
  if (end < p + info.ext_len + kIcrcLen) {
    return end < p + info.ext_len ? ParseError::kTruncatedExtHeaders : ParseError::kTruncatedIcrc;
  }
  out.headers = info.mask;
  if (info.mask & kHasXrcEth) {
    out.xrc_srq = load_be24(d + p + 1);
    p += kXrcEthLen;
  }
  if (info.mask & kHasFeth) {
    out.feth = load_be32(d + p);
    p += kFethLen;
  }
  if (info.mask & kHasDeth) {
    out.deth.qkey = load_be32(d + p);
    out.deth.src_qp = load_be24(d + p + 5);
    p += kDethLen;
  }
  if (info.mask & kHasReth) {
    out.reth.va = load_be64(d + p);
    out.reth.rkey = load_be32(d + p + 8);
    out.reth.dma_len = load_be32(d + p + 12);
    p += kRethLen;
  }
  if (info.mask & kHasAtomicEth) {
    out.atomic_eth.va = load_be64(d + p);
    out.atomic_eth.rkey = load_be32(d + p + 8);
    out.atomic_eth.swap_add = load_be64(d + p + 12);
    out.atomic_eth.compare = load_be64(d + p + 20);
    p += kAtomicEthLen;
  }
  if (info.mask & kHasAeth) {
    out.aeth.syndrome = d[p];
    out.aeth.msn = load_be24(d + p + 1);
    p += kAethLen;
  }
  if (info.mask & kHasAtomicAckEth) {
    out.atomic_ack = load_be64(d + p);
    p += kAtomicAckEthLen;
  }
  if (info.mask & kHasImmDt) {
    out.immdt = load_be32(d + p);
    p += kImmDtLen;
  }
  if (info.mask & kHasIeth) {
    out.ieth = load_be32(d + p);
    p += kIethLen;
  }
  out.payload_off = static_cast<uint16_t>(p);
  out.icrc_off = end - kIcrcLen;
  uint32_t data_len = out.icrc_off - p;  // payload + pad, checked >= 0 above
  // The ICRC is the CRC value stored least significant byte first.
  out.icrc = static_cast<uint32_t>(d[out.icrc_off]) |
             static_cast<uint32_t>(d[out.icrc_off + 1]) << 8 |
             static_cast<uint32_t>(d[out.icrc_off + 2]) << 16 |
             static_cast<uint32_t>(d[out.icrc_off + 3]) << 24;

  if (info.transport == Transport::kCnp) {
    if (data_len != info.fixed_payload) return ParseError::kBadCnpLength;
    if (bth.pad_count != 0) return ParseError::kBadPadCount;
    out.payload_len = data_len;
    return ParseError::kOk;
  }
  if (!(info.mask & kHasPayload)) {
    // No data allowed: trailing bytes or a pad count mean a malformed packet.
    if (data_len != 0) return ParseError::kBadIpLength;
    if (bth.pad_count != 0) return ParseError::kBadPadCount;
    out.payload_len = 0;
    return ParseError::kOk;
  }
  // FIRST and MIDDLE packets carry exactly one PMTU: never padded.
  if (bth.pad_count > data_len || (bth.pad_count != 0 && (info.mask & (kIsFirst | kIsMiddle)))) {
    return ParseError::kBadPadCount;
  }
  out.payload_len = data_len - bth.pad_count;
  return ParseError::kOk;
}

ParseError parse_l3(const uint8_t* d, uint32_t len, uint32_t l3, RocePacket& out) noexcept {
  if (len < l3 + 1) return ParseError::kTruncatedIp;
  out.l3_off = static_cast<uint16_t>(l3);
  const uint8_t version = d[l3] >> 4;
  uint32_t end = 0;
  if (version == 4) {
    if (len < l3 + kIpv4HeaderLen) return ParseError::kTruncatedIp;
    if ((d[l3] & 0xF) != 5) return ParseError::kIpv4Options;
    const uint16_t total = load_be16(d + l3 + 2);
    if (total < kIpv4HeaderLen || l3 + total > len) return ParseError::kBadIpLength;
    const uint16_t frag = load_be16(d + l3 + 6);
    if ((frag & 0x3FFF) != 0) return ParseError::kIpFragment;  // MF set or offset != 0
    out.tos = d[l3 + 1];
    out.ttl = d[l3 + 8];
    if (d[l3 + 9] != kIpProtoUdp) return ParseError::kNotUdp;
    out.src = IpAddr{4, {}};
    out.dst = IpAddr{4, {}};
    std::memcpy(out.src.bytes.data(), d + l3 + 12, 4);
    std::memcpy(out.dst.bytes.data(), d + l3 + 16, 4);
    out.l4_off = static_cast<uint16_t>(l3 + kIpv4HeaderLen);
    end = l3 + total;
  } else if (version == 6) {
    if (len < l3 + kIpv6HeaderLen) return ParseError::kTruncatedIp;
    const uint16_t plen = load_be16(d + l3 + 4);
    if (l3 + kIpv6HeaderLen + plen > len) return ParseError::kBadIpLength;
    out.tos = static_cast<uint8_t>((load_be16(d + l3) >> 4) & 0xFF);
    out.ttl = d[l3 + 7];
    const uint8_t next = d[l3 + 6];
    if (next != kIpProtoUdp) {
      // Hop-by-hop, routing, fragment, destination options, AH, ESP.
      if (next == 0 || next == 43 || next == 44 || next == 60 || next == 51 || next == 50) {
        return ParseError::kIpv6ExtHeaders;
      }
      return ParseError::kNotUdp;
    }
    out.src = IpAddr{6, {}};
    out.dst = IpAddr{6, {}};
    std::memcpy(out.src.bytes.data(), d + l3 + 8, 16);
    std::memcpy(out.dst.bytes.data(), d + l3 + 24, 16);
    out.l4_off = static_cast<uint16_t>(l3 + kIpv6HeaderLen);
    end = l3 + kIpv6HeaderLen + plen;
  } else {
    return ParseError::kBadIpVersion;
  }
  out.len = end;
  return parse_l4(d, end, out);
}

// Frames longer than this cannot be RoCEv2 (4096 B PMTU + headers); the
// offsets in RocePacket are 16-bit where they must stay below it.
constexpr size_t kMaxFrame = 65535;

}  // namespace

const OpcodeInfo& opcode_info(uint8_t opcode) { return kTable.e[opcode]; }

std::string_view to_string(ParseError e) {
  const auto i = static_cast<size_t>(e);
  return i < std::size(kErrorText) ? kErrorText[i] : "invalid error code";
}

ParseError parse_ethernet(std::span<const uint8_t> frame, RocePacket& out) noexcept {
  out = RocePacket{};
  out.data = frame.data();
  out.has_eth = true;
  const uint8_t* d = frame.data();
  const uint32_t len = static_cast<uint32_t>(frame.size() > kMaxFrame ? kMaxFrame : frame.size());
  if (len < kEthHeaderLen) return ParseError::kTruncatedEthernet;
  uint16_t type = load_be16(d + 12);
  uint32_t l3 = kEthHeaderLen;
  if (type == kEtherTypeVlan) {
    if (len < kEthHeaderLen + kVlanTagLen) return ParseError::kTruncatedVlan;
    out.has_vlan = true;
    out.vlan_tci = load_be16(d + 14);
    type = load_be16(d + 16);
    l3 += kVlanTagLen;
  }
  if (type != kEtherTypeIpv4 && type != kEtherTypeIpv6) return ParseError::kNotIp;
  const ParseError e = parse_l3(d, len, l3, out);
  if (e == ParseError::kOk && ((type == kEtherTypeIpv4) != (out.src.version == 4))) {
    return ParseError::kBadIpVersion;
  }
  return e;
}

ParseError parse_ip(std::span<const uint8_t> packet, RocePacket& out) noexcept {
  out = RocePacket{};
  out.data = packet.data();
  const uint32_t len = static_cast<uint32_t>(packet.size() > kMaxFrame ? kMaxFrame : packet.size());
  return parse_l3(packet.data(), len, 0, out);
}

uint32_t compute_icrc(const RocePacket& pkt) noexcept {
  // The invariant CRC covers a masked copy of the IP, UDP and BTH headers
  // preceded by 8 bytes of ones (the LRH an InfiniBand packet would carry).
  std::array<uint8_t, 8 + kIpv6HeaderLen + kUdpHeaderLen + kBthLen> hdr;
  std::memset(hdr.data(), 0xFF, 8);
  const uint8_t* d = pkt.data;
  size_t n = 8;
  const size_t ip_len = pkt.l4_off - pkt.l3_off;
  std::memcpy(hdr.data() + n, d + pkt.l3_off, ip_len);
  if (pkt.src.version == 4) {
    hdr[n + 1] = 0xFF;   // DSCP/ECN
    hdr[n + 8] = 0xFF;   // TTL
    hdr[n + 10] = 0xFF;  // header checksum
    hdr[n + 11] = 0xFF;
  } else {
    hdr[n + 0] |= 0x0F;  // traffic class and flow label
    hdr[n + 1] = 0xFF;
    hdr[n + 2] = 0xFF;
    hdr[n + 3] = 0xFF;
    hdr[n + 7] = 0xFF;  // hop limit
  }
  n += ip_len;
  std::memcpy(hdr.data() + n, d + pkt.l4_off, kUdpHeaderLen);
  hdr[n + 6] = 0xFF;  // UDP checksum
  hdr[n + 7] = 0xFF;
  n += kUdpHeaderLen;
  std::memcpy(hdr.data() + n, d + pkt.bth_off, kBthLen);
  hdr[n + 4] = 0xFF;  // FECN, BECN, reserved
  n += kBthLen;

  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, hdr.data(), static_cast<uInt>(n));
  const uint32_t rest = pkt.icrc_off - (pkt.bth_off + kBthLen);
  crc = crc32(crc, d + pkt.bth_off + kBthLen, rest);
  return static_cast<uint32_t>(crc);
}

size_t build(const FrameSpec& s, std::span<uint8_t> buf) noexcept {
  const OpcodeInfo& info = kTable.e[s.bth.opcode];
  if (!info.valid() || (s.src.version != 4 && s.src.version != 6) ||
      s.src.version != s.dst.version) {
    return 0;
  }
  const bool v4 = s.src.version == 4;
  size_t data_len = s.payload.size();
  if (info.transport == Transport::kCnp)
    data_len = kCnpPayloadLen;
  else if (!(info.mask & kHasPayload))
    data_len = 0;
  const uint8_t pad = static_cast<uint8_t>((4 - (data_len & 3)) & 3);
  const size_t l2 = s.with_eth ? kEthHeaderLen + (s.with_vlan ? kVlanTagLen : 0) : 0;
  const size_t l3_len = v4 ? kIpv4HeaderLen : kIpv6HeaderLen;
  const size_t udp_len = kUdpHeaderLen + kBthLen + info.ext_len + data_len + pad + kIcrcLen;
  const size_t total = l2 + l3_len + udp_len;
  if (total > buf.size() || total > kMaxFrame) return 0;
  uint8_t* d = buf.data();
  std::memset(d, 0, total);

  if (s.with_eth) {
    std::memcpy(d, s.dst_mac.data(), 6);
    std::memcpy(d + 6, s.src_mac.data(), 6);
    size_t o = 12;
    if (s.with_vlan) {
      store_be16(d + o, kEtherTypeVlan);
      store_be16(d + o + 2, s.vlan_tci);
      o += 4;
    }
    store_be16(d + o, v4 ? kEtherTypeIpv4 : kEtherTypeIpv6);
  }
  uint8_t* ip = d + l2;
  if (v4) {
    ip[0] = 0x45;
    ip[1] = s.tos;
    store_be16(ip + 2, static_cast<uint16_t>(kIpv4HeaderLen + udp_len));
    store_be16(ip + 4, s.ip_id);
    store_be16(ip + 6, 0x4000);  // DF
    ip[8] = s.ttl;
    ip[9] = kIpProtoUdp;
    std::memcpy(ip + 12, s.src.bytes.data(), 4);
    std::memcpy(ip + 16, s.dst.bytes.data(), 4);
    uint32_t sum = 0;
    for (size_t i = 0; i < kIpv4HeaderLen; i += 2) sum += load_be16(ip + i);
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
    store_be16(ip + 10, static_cast<uint16_t>(~sum));
  } else {
    store_be32(ip, 0x60000000U | (static_cast<uint32_t>(s.tos) << 20) | (s.flow_label & 0xFFFFF));
    store_be16(ip + 4, static_cast<uint16_t>(udp_len));
    ip[6] = kIpProtoUdp;
    ip[7] = s.ttl;
    std::memcpy(ip + 8, s.src.bytes.data(), 16);
    std::memcpy(ip + 24, s.dst.bytes.data(), 16);
  }
  uint8_t* udp = ip + l3_len;
  store_be16(udp, s.udp_sport);
  store_be16(udp + 2, kRoceV2Port);
  store_be16(udp + 4, static_cast<uint16_t>(udp_len));

  uint8_t* b = udp + kUdpHeaderLen;
  b[0] = s.bth.opcode;
  b[1] = static_cast<uint8_t>((s.bth.se ? 0x80 : 0) | (s.bth.migreq ? 0x40 : 0) | (pad << 4) |
                              (s.bth.tver & 0xF));
  store_be16(b + 2, s.bth.pkey);
  b[4] = static_cast<uint8_t>((s.bth.fecn ? 0x80 : 0) | (s.bth.becn ? 0x40 : 0));
  store_be24(b + 5, s.bth.dest_qp & kPsnMask);
  b[8] = s.bth.ack_req ? 0x80 : 0;
  store_be24(b + 9, s.bth.psn & kPsnMask);
  uint8_t* p = b + kBthLen;
  if (info.mask & kHasXrcEth) {
    store_be24(p + 1, s.xrc_srq & kPsnMask);
    p += kXrcEthLen;
  }
  if (info.mask & kHasFeth) {
    store_be32(p, s.feth);
    p += kFethLen;
  }
  if (info.mask & kHasDeth) {
    store_be32(p, s.deth.qkey);
    store_be24(p + 5, s.deth.src_qp & kPsnMask);
    p += kDethLen;
  }
  if (info.mask & kHasReth) {
    store_be64(p, s.reth.va);
    store_be32(p + 8, s.reth.rkey);
    store_be32(p + 12, s.reth.dma_len);
    p += kRethLen;
  }
  if (info.mask & kHasAtomicEth) {
    store_be64(p, s.atomic_eth.va);
    store_be32(p + 8, s.atomic_eth.rkey);
    store_be64(p + 12, s.atomic_eth.swap_add);
    store_be64(p + 20, s.atomic_eth.compare);
    p += kAtomicEthLen;
  }
  if (info.mask & kHasAeth) {
    p[0] = s.aeth.syndrome;
    store_be24(p + 1, s.aeth.msn & kPsnMask);
    p += kAethLen;
  }
  if (info.mask & kHasAtomicAckEth) {
    store_be64(p, s.atomic_ack);
    p += kAtomicAckEthLen;
  }
  if (info.mask & kHasImmDt) {
    store_be32(p, s.immdt);
    p += kImmDtLen;
  }
  if (info.mask & kHasIeth) {
    store_be32(p, s.ieth);
    p += kIethLen;
  }
  // A CNP's 16 reserved bytes are zero unless the caller passes 16 of its own.
  if (data_len > 0 && ((info.mask & kHasPayload) ||
                       (info.transport == Transport::kCnp && s.payload.size() == kCnpPayloadLen))) {
    std::memcpy(p, s.payload.data(), data_len);
  }
  p += data_len + pad;  // CNP payload and pad bytes stay zero

  RocePacket pkt;
  const ParseError e = s.with_eth ? parse_ethernet({d, total}, pkt) : parse_ip({d, total}, pkt);
  if (e != ParseError::kOk) return 0;
  const uint32_t icrc = compute_icrc(pkt);
  p[0] = static_cast<uint8_t>(icrc);
  p[1] = static_cast<uint8_t>(icrc >> 8);
  p[2] = static_cast<uint8_t>(icrc >> 16);
  p[3] = static_cast<uint8_t>(icrc >> 24);
  if (!v4) {
    // IPv6 requires a UDP checksum (RFC 8200 §8.1); it covers the ICRC, which
    // does not cover it, so it comes last.
    uint32_t sum = 0;
    for (size_t i = 8; i < 40; i += 2) sum += load_be16(ip + i);  // addresses
    sum += static_cast<uint32_t>(udp_len) + kIpProtoUdp;
    for (size_t i = 0; i + 1 < udp_len; i += 2) sum += load_be16(udp + i);
    if (udp_len & 1) sum += static_cast<uint32_t>(udp[udp_len - 1]) << 8;
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
    uint16_t c = static_cast<uint16_t>(~sum);
    store_be16(udp + 6, c == 0 ? 0xFFFF : c);
  }
  return total;
}

}  // namespace rowan::roce
