// RoCEv2 wire codec: zero-copy parsing and building of
//   Ethernet [802.1Q] / IPv4 | IPv6 / UDP(4791) / BTH / ext headers / payload / pad / ICRC
// following the InfiniBand Architecture Specification vol. 1 ch. 9 and its
// RoCEv2 annex (A17). Field layouts are cross-checked against Linux rxe and
// Wireshark's dissector (see tests/unit/codec).
//
// Parsing never reads outside the given buffer and never allocates: a
// RocePacket is a view (offsets and decoded fields) over the caller's bytes.
// The opcode is validated before any length arithmetic that depends on it.
// All functions here are thread-safe (no shared state but constant tables).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "codec/ip_addr.h"

namespace rowan::roce {

inline constexpr uint16_t kRoceV2Port = 4791;
inline constexpr size_t kEthHeaderLen = 14;
inline constexpr size_t kVlanTagLen = 4;
inline constexpr size_t kIpv4HeaderLen = 20;
inline constexpr size_t kIpv6HeaderLen = 40;
inline constexpr size_t kUdpHeaderLen = 8;
inline constexpr size_t kBthLen = 12;
inline constexpr size_t kRethLen = 16;
inline constexpr size_t kAethLen = 4;
inline constexpr size_t kAtomicEthLen = 28;
inline constexpr size_t kAtomicAckEthLen = 8;
inline constexpr size_t kImmDtLen = 4;
inline constexpr size_t kIethLen = 4;
inline constexpr size_t kDethLen = 8;
inline constexpr size_t kXrcEthLen = 4;  ///< XRC ETH: the XRC SRQ number (24 bits)
inline constexpr size_t kFethLen = 4;    ///< FLUSH ETH: selectivity and placement type
inline constexpr size_t kIcrcLen = 4;
inline constexpr size_t kCnpPayloadLen = 16;

// ---------------------------------------------------------------------------
// PSN arithmetic, modulo 2^24.

inline constexpr uint32_t kPsnMask = 0xFFFFFF;

constexpr uint32_t psn_add(uint32_t psn, int64_t n) {
  return static_cast<uint32_t>((static_cast<int64_t>(psn) + n) & kPsnMask);
}
/// Signed distance a − b in (−2^23, 2^23]: positive when a is after b.
constexpr int32_t psn_diff(uint32_t a, uint32_t b) {
  const uint32_t d = (a - b) & kPsnMask;
  return d > 0x800000 ? static_cast<int32_t>(d) - 0x1000000 : static_cast<int32_t>(d);
}
constexpr bool psn_lt(uint32_t a, uint32_t b) { return psn_diff(a, b) < 0; }
constexpr bool psn_le(uint32_t a, uint32_t b) { return psn_diff(a, b) <= 0; }

// ---------------------------------------------------------------------------
// Opcodes.

/// The opcode's top three bits (IBA table 38; CNP is 0x80).
enum class Transport : uint8_t {
  kRc = 0,
  kUc = 1,
  kRd = 2,
  kUd = 3,
  kCnp = 4,
  kXrc = 5,
  kUnknown = 7
};

/// Which extended headers follow the BTH, in wire order.
enum HeaderMask : uint16_t {
  kHasDeth = 1U << 0,
  kHasReth = 1U << 1,
  kHasAtomicEth = 1U << 2,
  kHasAeth = 1U << 3,
  kHasAtomicAckEth = 1U << 4,
  kHasImmDt = 1U << 5,
  kHasIeth = 1U << 6,
  kHasPayload = 1U << 7,  ///< carries data (may be zero-length)
  kIsFirst = 1U << 8,     ///< first packet of a multi-packet message (payload = PMTU)
  kIsMiddle = 1U << 9,    ///< middle packet (payload = PMTU)
  kIsLast = 1U << 10,
  kIsOnly = 1U << 11,
  kIsRequest = 1U << 12,   ///< sent by the requester
  kIsResponse = 1U << 13,  ///< sent by the responder (ACK, READ response, atomic ACK)
  kHasXrcEth = 1U << 14,   ///< XRC request: XRCETH right after the BTH
  kHasFeth = 1U << 15,     ///< FLUSH (IBA 1.5): FETH before the RETH
};

struct OpcodeInfo {
  const char* name = nullptr;  ///< nullptr: not a valid RoCEv2 opcode here
  Transport transport = Transport::kUnknown;
  uint16_t mask = 0;
  uint16_t ext_len = 0;        ///< bytes of extended headers after the BTH
  uint16_t fixed_payload = 0;  ///< CNP: 16 reserved bytes; otherwise 0
  bool valid() const { return name != nullptr; }
};

/// The per-opcode table: RC (with IBA 1.5's FLUSH and ATOMIC WRITE), UC,
/// UD, XRC and CNP. RD and reserved codes are invalid.
const OpcodeInfo& opcode_info(uint8_t opcode);

namespace op {
inline constexpr uint8_t kRcSendFirst = 0x00;
inline constexpr uint8_t kRcSendMiddle = 0x01;
inline constexpr uint8_t kRcSendLast = 0x02;
inline constexpr uint8_t kRcSendLastImm = 0x03;
inline constexpr uint8_t kRcSendOnly = 0x04;
inline constexpr uint8_t kRcSendOnlyImm = 0x05;
inline constexpr uint8_t kRcWriteFirst = 0x06;
inline constexpr uint8_t kRcWriteMiddle = 0x07;
inline constexpr uint8_t kRcWriteLast = 0x08;
inline constexpr uint8_t kRcWriteLastImm = 0x09;
inline constexpr uint8_t kRcWriteOnly = 0x0a;
inline constexpr uint8_t kRcWriteOnlyImm = 0x0b;
inline constexpr uint8_t kRcReadRequest = 0x0c;
inline constexpr uint8_t kRcReadResponseFirst = 0x0d;
inline constexpr uint8_t kRcReadResponseMiddle = 0x0e;
inline constexpr uint8_t kRcReadResponseLast = 0x0f;
inline constexpr uint8_t kRcReadResponseOnly = 0x10;
inline constexpr uint8_t kRcAck = 0x11;
inline constexpr uint8_t kRcAtomicAck = 0x12;
inline constexpr uint8_t kRcCompareSwap = 0x13;
inline constexpr uint8_t kRcFetchAdd = 0x14;
inline constexpr uint8_t kRcSendLastInv = 0x16;
inline constexpr uint8_t kRcSendOnlyInv = 0x17;
inline constexpr uint8_t kRcFlush = 0x1c;        ///< IBA 1.5: FETH + RETH, no payload
inline constexpr uint8_t kRcAtomicWrite = 0x1d;  ///< IBA 1.5: RETH + 8 bytes of payload
inline constexpr uint8_t kXrcBase = 0xa0;        ///< XRC opcodes: the RC ones + 0xa0
inline constexpr uint8_t kUcSendOnly = 0x24;
inline constexpr uint8_t kUcWriteOnly = 0x2a;
inline constexpr uint8_t kUdSendOnly = 0x64;
inline constexpr uint8_t kUdSendOnlyImm = 0x65;
inline constexpr uint8_t kCnp = 0x81;
}  // namespace op

// ---------------------------------------------------------------------------
// Headers, decoded (host byte order).

struct Bth {
  uint8_t opcode = 0;
  bool se = false;        ///< solicited event
  bool migreq = false;    ///< M bit
  uint8_t pad_count = 0;  ///< 0..3 pad bytes before the ICRC
  uint8_t tver = 0;       ///< transport header version, must be 0
  uint16_t pkey = 0xFFFF;
  bool fecn = false;
  bool becn = false;
  uint32_t dest_qp = 0;  ///< 24 bits
  bool ack_req = false;
  uint32_t psn = 0;  ///< 24 bits
};

struct Reth {
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t dma_len = 0;
};

/// AETH syndrome classes (bits 7:5).
enum class AethKind : uint8_t { kAck = 0, kRnrNak = 1, kReserved = 2, kNak = 3 };
enum class NakCode : uint8_t {
  kPsnSequenceError = 0,
  kInvalidRequest = 1,
  kRemoteAccessError = 2,
  kRemoteOperationalError = 3,
  kInvalidRdRequest = 4,
};

struct Aeth {
  uint8_t syndrome = 0;
  uint32_t msn = 0;  ///< 24 bits
  AethKind kind() const { return static_cast<AethKind>(syndrome >> 5); }
  uint8_t value() const { return syndrome & 0x1F; }  ///< credits, RNR timer or NAK code
};

struct AtomicEth {
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint64_t swap_add = 0;
  uint64_t compare = 0;
};

struct Deth {
  uint32_t qkey = 0;
  uint32_t src_qp = 0;  ///< 24 bits
};

// ---------------------------------------------------------------------------
// Parsing.

enum class ParseError : uint8_t {
  kOk = 0,
  kTruncatedEthernet,
  kTruncatedVlan,
  kNotIp,  ///< ethertype is neither IPv4 nor IPv6
  kTruncatedIp,
  kBadIpVersion,
  kIpv4Options,  ///< IHL != 5: RoCEv2 never uses IPv4 options
  kBadIpLength,  ///< total/payload length inconsistent with the frame
  kIpFragment,
  kIpv6ExtHeaders,
  kNotUdp,
  kTruncatedUdp,
  kBadUdpLength,
  kNotRoceV2,  ///< UDP destination port is not 4791
  kTruncatedBth,
  kUnknownOpcode,
  kBadTver,
  kTruncatedExtHeaders,
  kTruncatedIcrc,
  kBadPadCount,
  kBadCnpLength,
  kCount,
};

/// A stable, human-readable reason ("IPv4 options present", ...).
std::string_view to_string(ParseError e);

/// A parsed RoCEv2 packet: offsets into the caller's buffer plus the decoded
/// headers. Valid only while that buffer is.
struct RocePacket {
  const uint8_t* data = nullptr;  ///< start of the parsed buffer (Ethernet or IP)
  uint32_t len = 0;               ///< bytes of the packet proper (Ethernet trailer excluded)

  bool has_eth = false;
  uint16_t vlan_tci = 0;
  bool has_vlan = false;
  uint16_t l3_off = 0;
  uint16_t l4_off = 0;
  uint16_t bth_off = 0;
  uint16_t payload_off = 0;  ///< first byte after the extended headers
  uint32_t payload_len = 0;  ///< data bytes, pad excluded
  uint32_t icrc_off = 0;

  IpAddr src;
  IpAddr dst;
  uint8_t ttl = 0;  ///< hop limit for IPv6
  uint8_t tos = 0;  ///< DSCP << 2 | ECN (traffic class for IPv6)
  uint16_t udp_sport = 0;
  uint16_t udp_dport = 0;

  Bth bth;
  uint16_t headers = 0;  ///< HeaderMask of what is present
  Reth reth;
  Aeth aeth;
  AtomicEth atomic_eth;
  uint64_t atomic_ack = 0;  ///< original remote data of an AtomicAckETH
  uint32_t immdt = 0;       ///< immediate data (network order value as a number)
  uint32_t ieth = 0;        ///< R_Key to invalidate
  Deth deth;
  uint32_t xrc_srq = 0;  ///< XRCETH: the XRC SRQ number (24 bits)
  uint32_t feth = 0;     ///< FETH (FLUSH): selectivity level and placement type bits
  uint32_t icrc = 0;     ///< as found on the wire (little-endian CRC value)

  bool has(HeaderMask m) const { return (headers & m) != 0; }
  uint8_t ecn() const { return tos & 0x3; }
  std::span<const uint8_t> payload() const { return {data + payload_off, payload_len}; }
};

/// Parses an Ethernet frame (optionally 802.1Q-tagged).
ParseError parse_ethernet(std::span<const uint8_t> frame, RocePacket& out) noexcept;
/// Parses a bare IPv4/IPv6 packet (as a tunnel or raw socket delivers it).
ParseError parse_ip(std::span<const uint8_t> packet, RocePacket& out) noexcept;

// ---------------------------------------------------------------------------
// ICRC.

/// Computes the ICRC of a parsed packet over its masked IP/UDP/BTH headers and
/// the rest up to the ICRC field. Compare with `pkt.icrc`.
uint32_t compute_icrc(const RocePacket& pkt) noexcept;
inline bool icrc_ok(const RocePacket& pkt) noexcept { return compute_icrc(pkt) == pkt.icrc; }

// ---------------------------------------------------------------------------
// Building.

struct FrameSpec {
  bool with_eth = true;
  std::array<uint8_t, 6> dst_mac{};
  std::array<uint8_t, 6> src_mac{};
  bool with_vlan = false;
  uint16_t vlan_tci = 0;
  IpAddr src;  ///< version selects IPv4 or IPv6
  IpAddr dst;
  uint8_t ttl = 64;
  uint8_t tos = 0;
  uint32_t flow_label = 0;  ///< IPv6 only
  uint16_t ip_id = 0;       ///< IPv4 only
  uint16_t udp_sport = 49152;
  Bth bth;  ///< pad_count is computed from the payload length
  Reth reth;
  Aeth aeth;
  AtomicEth atomic_eth;
  uint64_t atomic_ack = 0;
  uint32_t immdt = 0;
  uint32_t ieth = 0;
  Deth deth;
  uint32_t xrc_srq = 0;
  uint32_t feth = 0;
  std::span<const uint8_t> payload;
};

/// Builds a complete frame (or bare IP packet when !with_eth) into `buf`,
/// with IP checksum, UDP length (and the IPv6 UDP checksum) and ICRC.
/// Returns its length, or 0 when `buf` is too small or the opcode invalid.
size_t build(const FrameSpec& spec, std::span<uint8_t> buf) noexcept;

}  // namespace rowan::roce
