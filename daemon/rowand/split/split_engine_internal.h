// What the split engine's files (split_engine.cc, split_ingress.cc,
// split_egress.cc, split_cm.cc) share: the control record's layout, the
// constants of the engine's behaviour and the small packet helpers.
// Private to them.
#pragma once

#include <cstring>

#include "codec/bytes.h"
#include "net/packet_util.h"
#include "split/split_engine.h"

namespace rowan::gw::split_detail {

using roce::psn_add;
using roce::psn_lt;
using wire::load_be32;
using wire::store_be32;

constexpr uint8_t kCtrlMagic = 0xF0;  // version nibble 15: never an IP packet
constexpr uint8_t kCtrlStart = 1;
constexpr uint8_t kCtrlCmSplit = 2;  // the next CM REQ on this stream comes from a split route
constexpr uint32_t kCtrlCmLen = 4;
constexpr uint8_t kCtrlCmDrain = 3;  // the next CM MAD (a DREQ) follows the data up to a PSN
constexpr uint32_t kCtrlDrainLen = 8;
constexpr uint32_t kCtrlLen = 4 + 16 + 16 + 16;
constexpr uint32_t kDefaultPmtu = 1024;
// Gateway B's first retransmission timeout, before a round trip to the
// responder host was measured: a soft-RoCE guest took ~30 ms for a first
// 64-packet message, and a 4 ms first timeout resent that window (the
// estimate then takes over; its floor stays RequesterConfig::rto).
constexpr Duration kEgressInitialRto = Duration::from_ms(50);
constexpr uint16_t kDefaultSport = 0xC000;
// A peer restart fails flows with Remote Operational Error: the data the
// dead gateway held is gone, nothing the requester did was wrong.
constexpr uint8_t kRestartSyndrome = split::syndrome::nak(roce::NakCode::kRemoteOperationalError);
// QP-failing requests go highest PSN first (the host most likely had all but
// the tail) and paced: a burst of a thousand frames toward a host overflows
// what is on the way (a restarted gateway holds only a few frames per host
// until ARP resolves it; a soft-RoCE guest's NIC ring) and loses the one
// that counts. 16 per 2 ms: 4,096 in about half a second.
constexpr uint32_t kPoisonBurst = 16;
constexpr Duration kPoisonInterval = Duration::from_ms(2);
// And the whole range three times, 200 ms apart: the first round meets a
// restarted gateway that does not know the host's MAC yet and keeps only a
// few frames while it asks (seen on the testbed: ibv_rc_pingpong's client
// side never failed after one round).
constexpr uint8_t kPoisonRounds = 3;
constexpr Duration kPoisonRoundGap = Duration::from_ms(200);
constexpr uint8_t kCtrlConfirmed = 0x01;  // flags: nothing before the start PSN unacknowledged
constexpr uint8_t kCmLocalSplit = 0x01;   // CmConnection::user: a local host on a split route
constexpr uint8_t kCmRemoteSplit = 0x02;  // the peer gateway said its route is split
constexpr size_t kReqMtuOffset = split::kMadHeaderLen + 50;  // high nibble of the MAD byte

inline size_t addr_len(const roce::IpAddr& a) { return a.version == 6 ? 16 : 4; }

inline roce::IpAddr clean(const roce::IpAddr& a) {
  roce::IpAddr r;
  r.version = a.version;
  std::memcpy(r.bytes.data(), a.bytes.data(), addr_len(a));
  return r;
}

/// The flow key the gateway's classifier gives this packet.
inline FlowKey key_of(const roce::RocePacket& p) {
  FlowKey k;
  k.src = clean(p.src);
  k.dst = clean(p.dst);
  k.qp = p.bth.dest_qp;
  k.proto = 17;
  k.kind = FlowKind::kRoce;
  return k;
}

inline bool is_request(const roce::RocePacket& p) {
  return split::request_kind(p.bth.opcode) != split::ReqKind::kOther;
}

inline bool is_full_size(uint8_t opcode) {
  switch (opcode) {
    case roce::op::kRcSendFirst:
    case roce::op::kRcSendMiddle:
    case roce::op::kRcWriteFirst:
    case roce::op::kRcWriteMiddle:
    case roce::op::kRcReadResponseFirst:
    case roce::op::kRcReadResponseMiddle:
      return true;
    default:
      return false;
  }
}

/// A UD SEND to QP 1 (a CM MAD), judged from the fixed offsets of a bare IP
/// packet without IPv4 options, before any full parse (every WAN record
/// passes here).
inline bool looks_like_cm(const uint8_t* ip, uint32_t len) {
  uint32_t udp = 0;
  if (len >= 20 && ip[0] == 0x45 && ip[9] == 17) {
    udp = 20;
  } else if (len >= 40 && (ip[0] >> 4) == 6 && ip[6] == 17) {
    udp = 40;
  } else {
    return false;
  }
  const uint32_t bth = udp + 8;
  if (len < bth + 12) return false;
  if (((ip[udp + 2] << 8) | ip[udp + 3]) != roce::kRoceV2Port) return false;
  return ip[bth] == roce::op::kUdSendOnly && ip[bth + 5] == 0 && ip[bth + 6] == 0 &&
         ip[bth + 7] == split::kCmQp;
}

inline FlowKey roce_key(const roce::IpAddr& src, const roce::IpAddr& dst, uint32_t qp) {
  FlowKey k;
  k.src = clean(src);
  k.dst = clean(dst);
  k.qp = qp;
  k.proto = 17;
  k.kind = FlowKind::kRoce;
  return k;
}

}  // namespace rowan::gw::split_detail
