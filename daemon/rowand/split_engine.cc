#include "split_engine.h"

#include <algorithm>
#include <cstring>

#include "codec/bytes.h"

namespace rowan::gw {
namespace {

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
constexpr uint32_t kEgressSlots = 1024;
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
// CNPs go in DSCP 48, the class RoCE fabrics give them (mlx5's default
// cnp_dscp; the fabric maps it to a priority of its own), so a congested
// data class does not delay them.
constexpr uint8_t kCnpTos = 48 << 2;
constexpr uint8_t kCtrlConfirmed = 0x01;  // flags: nothing before the start PSN unacknowledged
constexpr uint8_t kCmLocalSplit = 0x01;   // CmConnection::user: a local host on a split route
constexpr uint8_t kCmRemoteSplit = 0x02;  // the peer gateway said its route is split
constexpr size_t kReqMtuOffset = split::kMadHeaderLen + 50;  // high nibble of the MAD byte

size_t addr_len(const roce::IpAddr& a) { return a.version == 6 ? 16 : 4; }

roce::IpAddr clean(const roce::IpAddr& a) {
  roce::IpAddr r;
  r.version = a.version;
  std::memcpy(r.bytes.data(), a.bytes.data(), addr_len(a));
  return r;
}

/// The flow key the gateway's classifier gives this packet.
FlowKey key_of(const roce::RocePacket& p) {
  FlowKey k;
  k.src = clean(p.src);
  k.dst = clean(p.dst);
  k.qp = p.bth.dest_qp;
  k.proto = 17;
  k.kind = FlowKind::kRoce;
  return k;
}

bool is_request(const roce::RocePacket& p) {
  return split::request_kind(p.bth.opcode) != split::ReqKind::kOther;
}

bool is_full_size(uint8_t opcode) {
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
bool looks_like_cm(const uint8_t* ip, uint32_t len) {
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

FlowKey roce_key(const roce::IpAddr& src, const roce::IpAddr& dst, uint32_t qp) {
  FlowKey k;
  k.src = clean(src);
  k.dst = clean(dst);
  k.qp = qp;
  k.proto = 17;
  k.kind = FlowKind::kRoce;
  return k;
}

}  // namespace

SplitEngine::SplitEngine(SplitIo& io, uint32_t local_mtu)
    : io_(io), local_mtu_(local_mtu), flows_(kMaxFlows) {}

FlowKey SplitEngine::rev_key(const SplitFlow& sf) {
  FlowKey k = sf.fwd;
  k.src = sf.fwd.dst;
  k.dst = sf.fwd.src;
  k.qp = sf.rev_qp;
  return k;
}

SplitEngine::SplitFlow* SplitEngine::find(const FlowKey& k, bool reverse) noexcept {
  const auto& idx = reverse ? rev_index_ : fwd_index_;
  for (uint32_t i = 0, b = static_cast<uint32_t>(k.hash() % kIndex); i < kIndex;
       ++i, b = (b + 1) % kIndex) {
    if (idx[b] == 0) return nullptr;
    SplitFlow& sf = flows_[static_cast<uint32_t>(idx[b] - 1)];
    if (sf.role == Role::kFree) continue;
    if (reverse ? (sf.rev_qp != 0 && rev_key(sf) == k) : sf.fwd == k) return &sf;
  }
  return nullptr;
}

void SplitEngine::index(uint32_t slot) noexcept {
  const SplitFlow& sf = flows_[slot];
  auto put = [slot](std::array<int32_t, kIndex>& idx, const FlowKey& k) {
    for (uint32_t i = 0, b = static_cast<uint32_t>(k.hash() % kIndex); i < kIndex;
         ++i, b = (b + 1) % kIndex) {
      if (idx[b] == static_cast<int32_t>(slot + 1)) return;
      if (idx[b] == 0) {
        idx[b] = static_cast<int32_t>(slot + 1);
        return;
      }
    }
  };
  put(fwd_index_, sf.fwd);
  if (sf.rev_qp != 0) put(rev_index_, rev_key(sf));
}

void SplitEngine::rebuild_index() noexcept {
  fwd_index_.fill(0);
  rev_index_.fill(0);
  for (uint32_t i = 0; i < flows_.size(); ++i) {
    if (flows_[i].role != Role::kFree) index(i);
  }
}

SplitEngine::SplitFlow* SplitEngine::add(const FlowKey& fwd, Role role, TimePoint now) noexcept {
  for (uint32_t i = 0; i < flows_.size(); ++i) {
    SplitFlow& sf = flows_[i];
    if (sf.role != Role::kFree) continue;
    sf.requester.reset();
    sf = SplitFlow{};
    sf.role = role;
    sf.fwd = fwd;
    sf.udp_sport = kDefaultSport;
    sf.last_active = now;
    ++used_;
    high_ = std::max(high_, i + 1);
    index(i);
    return &sf;
  }
  ++stats_.table_full;
  return nullptr;
}

void SplitEngine::trim() noexcept {
  while (high_ > 0 && flows_[high_ - 1].role == Role::kFree) --high_;
}

void SplitEngine::learn_pmtu(SplitFlow& sf, const roce::RocePacket& p) noexcept {
  if (!is_full_size(p.bth.opcode)) return;
  const uint32_t n = p.payload_len;
  if (n < 256 || n > 4096 || (n & (n - 1)) != 0 || n <= sf.pmtu) return;
  sf.pmtu = n;
  sf.responder.set_pmtu(n);
  if (sf.requester) sf.requester->set_pmtu(n);
}

// ---------------------------------------------------------------------------
// Local RX

bool SplitEngine::on_local(Flow& flow, bool split_route, const uint8_t* ip, uint32_t len,
                           TimePoint now) noexcept {
  if (used_ == 0 && !split_route) return false;
  roce::RocePacket p;
  if (roce::parse_ip({ip, len}, p) != roce::ParseError::kOk) return false;
  if (p.bth.opcode == roce::op::kUdSendOnly && p.bth.dest_qp == split::kCmQp) {
    split::CmMessage m;
    const bool cm = split::parse_cm(p, m);
    if (cm && split_route && m.attr == split::cm_attr::kReq && io_.has_room(flow, kCtrlCmLen)) {
      // Tells the peer gateway that this REQ comes from a split route (it
      // may give the REQ its site's path MTU): a short record ahead of it.
      const std::array<uint8_t, kCtrlCmLen> ctrl{kCtrlMagic, kCtrlCmSplit, p.src.version, 0};
      io_.carry(flow, ctrl.data(), kCtrlCmLen, now);
    }
    if (cm && m.attr == split::cm_attr::kDreq && used_ > 0) announce_drain(flow, p, m, now);
    on_cm(p, true, split_route, now);
    return false;  // CM MADs always pass through
  }
  if (is_request(p)) {
    SplitFlow* sf = find(key_of(p), false);
    if (sf == nullptr) {
      if (!split_route) return false;
      sf = add(key_of(p), Role::kTracking, now);
      if (sf == nullptr) return false;
      ++tracking_;
      ++stats_.flows_tracked;
    }
    sf->last_active = now;
    sf->dscp_tos = p.tos & 0xFC;  // answers go in the requester's class (ECN bits: not ECT)
    learn_pmtu(*sf, p);
    if (sf->role == Role::kIngress) return ingress_request(*sf, flow, p, ip, len, now);
    if (sf->role != Role::kTracking) return false;
    if (sf->pairing.matched() && sf->rev_qp != 0 && p.bth.psn == sf->pairing.next_psn()) {
      start_split(*sf, flow, now);
      if (sf->role == Role::kIngress) return ingress_request(*sf, flow, p, ip, len, now);
    }
    sf->pairing.on_forwarded(p.bth.opcode, p.bth.psn, p.bth.ack_req, p.reth.dma_len,
                             sf->pmtu != 0 ? sf->pmtu : kDefaultPmtu);
    return false;
  }
  // A local responder answering a remote requester.
  SplitFlow* sf = find(key_of(p), true);
  if (sf == nullptr || sf->role != Role::kEgress) return false;
  const bool consumed = egress_from_responder(*sf, p, now);
  if (held_n_ > 0) release_held(now);  // this ACK may have drained a flow a DREQ waits for
  return consumed;
}

void SplitEngine::start_split(SplitFlow& sf, Flow& flow, TimePoint now) noexcept {
  const uint32_t pmtu = sf.pmtu != 0 ? sf.pmtu : kDefaultPmtu;
  const uint32_t start = sf.pairing.next_psn();
  uint8_t* c = frame_.data();
  std::memset(c, 0, kCtrlLen);
  c[0] = kCtrlMagic;
  c[1] = kCtrlStart;
  c[2] = sf.fwd.src.version;
  c[3] = sf.cm && sf.pairing.quiescent() ? kCtrlConfirmed : 0;
  std::memcpy(c + 4, sf.fwd.src.bytes.data(), 16);
  std::memcpy(c + 20, sf.fwd.dst.bytes.data(), 16);
  store_be32(c + 36, sf.fwd.qp);
  store_be32(c + 40, sf.rev_qp);
  store_be32(c + 44, start);
  store_be32(c + 48, pmtu);
  if (!io_.has_room(flow, kCtrlLen) || !io_.carry(flow, c, kCtrlLen, now)) return;
  split::ResponderConfig rc;
  rc.pmtu = pmtu;
  sf.responder = split::Responder(rc);
  sf.responder.start(start, sf.pairing.next_msn(), sf.pairing.quiescent());
  sf.local_peer = flow.peer;
  sf.role = Role::kIngress;
  --tracking_;
  ++stats_.flows_paired;
}

bool SplitEngine::ingress_request(SplitFlow& sf, Flow& flow, const roce::RocePacket& p,
                                  const uint8_t* ip, uint32_t len, TimePoint now) noexcept {
  split::Request r;
  r.opcode = p.bth.opcode;
  r.psn = p.bth.psn;
  r.ack_req = p.bth.ack_req;
  r.dma_len = p.has(roce::kHasReth) ? p.reth.dma_len : 0;
  split::Reply reply;
  const bool room = io_.has_room(flow, len);
  sf.max_req_len = std::max(sf.max_req_len, len);
  sf.responder.set_short_of_room(io_.short_of_room(flow.peer, window_bytes(sf)));
  const split::Verdict v =
      sf.responder.on_request(r, room, room && io_.over_share(flow), now, reply);
  if (v == split::Verdict::kCarry && io_.carry(flow, ip, len, now)) {
    ++stats_.requests_carried;
  } else {
    ++stats_.requests_dropped;
  }
  send_reply(sf, reply, now);
  return true;
}

bool SplitEngine::egress_from_responder(SplitFlow& sf, const roce::RocePacket& p,
                                        TimePoint now) noexcept {
  if (sf.dead) {  // the answers to the poison, or to what came before it
    ++stats_.dead_dropped;
    return true;
  }
  split::Requester& rq = *sf.requester;
  sf.last_active = now;
  learn_pmtu(sf, p);
  const uint8_t op = p.bth.opcode;
  const uint32_t psn = p.bth.psn;
  const uint32_t start = rq.start_psn();
  if (split::is_read_response(op) || op == roce::op::kRcAtomicAck) {
    rq.on_response(op, psn, now);
    flush(sf, now);
    if (sf.xlate) return egress_response_translated(sf, p, now);
    return false;  // responses travel end to end
  }
  if (op != roce::op::kRcAck) return false;
  const roce::AethKind kind = p.aeth.kind();
  const bool seq_nak = kind == roce::AethKind::kNak &&
                       p.aeth.value() == static_cast<uint8_t>(roce::NakCode::kPsnSequenceError);
  if (kind == roce::AethKind::kAck || seq_nak || kind == roce::AethKind::kRnrNak) {
    // Acknowledges only passthrough packets: the requester needs it.
    const uint32_t through = kind == roce::AethKind::kAck ? psn : psn_add(psn, -1);
    if (psn_lt(through, psn_add(start, -1))) return sf.xlate != nullptr;  // stale if translated
    if (rq.on_aeth(psn, p.aeth.syndrome, now) == split::Event::kRetryExceeded) {
      report_failure(sf, now);
    }
    flush(sf, now);
    if (!sf.base_relayed) {
      sf.base_relayed = true;  // it covers the passthrough part: relay this one
      return false;
    }
    ++stats_.acks_consumed;
    return true;
  }
  if (kind == roce::AethKind::kNak) {
    rq.on_aeth(psn, p.aeth.syndrome, now);
    ++stats_.fatal;
    if (sf.xlate) {  // the same NAK, at the requester's PSN of the failed request
      uint32_t in = sf.xlate->requests.next_in_psn();
      sf.xlate->requests.in_psn_of(psn, &in);
      send_aeth(sf, p.aeth.syndrome, in, p.aeth.msn, now, true);
      return true;
    }
    return false;  // the ingress fails the flow toward the requester
  }
  return false;
}

// ---------------------------------------------------------------------------
// From the WAN

bool SplitEngine::on_wan(PeerState* peer, uint64_t stream, const uint8_t* ip, uint32_t len,
                         TimePoint now) noexcept {
  if (len >= 1 && ip[0] == kCtrlMagic) {
    on_control(peer, stream, ip, len, now);
    return true;
  }
  if (looks_like_cm(ip, len)) {
    roce::RocePacket cm;
    if (roce::parse_ip({ip, len}, cm) != roce::ParseError::kOk) return false;
    const bool split = cm_split_peer_ == peer && cm_split_stream_ == stream && cm_split_pending_;
    cm_split_pending_ = false;
    const bool drain = cm_drain_peer_ == peer && cm_drain_stream_ == stream && cm_drain_pending_;
    cm_drain_pending_ = false;
    if ((drain || held_n_ > 0) && hold_dreq(cm, ip, len, drain, cm_drain_psn_, now)) return true;
    return on_cm(cm, false, split, now);
  }
  if (used_ == 0) return false;
  roce::RocePacket p;
  if (roce::parse_ip({ip, len}, p) != roce::ParseError::kOk) return false;
  if (is_request(p)) {
    SplitFlow* sf = find(key_of(p), false);
    if (sf == nullptr || sf->role != Role::kEgress) return false;
    return egress_request(*sf, p, ip, len, now);
  }
  SplitFlow* sf = find(key_of(p), true);
  if (sf == nullptr) {
    if (p.bth.opcode == roce::op::kRcAck && p.aeth.kind() == roce::AethKind::kAck) track_ack(p);
    return false;
  }
  if (sf->role == Role::kIngress) return ingress_from_remote(*sf, p, ip, len, now);
  if (sf->role == Role::kTracking && p.bth.opcode == roce::op::kRcAck &&
      p.aeth.kind() == roce::AethKind::kAck) {
    sf->pairing.on_ack(p.bth.psn, p.aeth.msn);
  }
  return false;
}

void SplitEngine::track_ack(const roce::RocePacket& p) noexcept {
  if (tracking_ == 0) return;
  const roce::IpAddr src = clean(p.src);
  const roce::IpAddr dst = clean(p.dst);
  for (SplitFlow& sf : active()) {
    if (sf.role != Role::kTracking || sf.rev_qp != 0) continue;
    if (sf.fwd.src != dst || sf.fwd.dst != src) continue;
    if (!sf.pairing.on_ack(p.bth.psn, p.aeth.msn)) continue;
    sf.rev_qp = p.bth.dest_qp;
    sf.udp_sport = p.udp_sport;
    index(static_cast<uint32_t>(&sf - flows_.data()));
    return;
  }
}

bool SplitEngine::ingress_from_remote(SplitFlow& sf, const roce::RocePacket& p, const uint8_t* ip,
                                      uint32_t len, TimePoint now) noexcept {
  const uint8_t op = p.bth.opcode;
  if (sf.dead) {  // the remote host's answers to what the dead gateway held, or to the poison
    ++stats_.dead_dropped;
    return true;
  }
  if (op == roce::op::kRcAck) {
    const roce::AethKind kind = p.aeth.kind();
    if (kind == roce::AethKind::kNak &&
        p.aeth.value() != static_cast<uint8_t>(roce::NakCode::kPsnSequenceError)) {
      // Fatal at the remote host: what we acknowledged did not all land.
      // Every later request of this flow gets the same NAK. When the
      // requester still waits on the NAKed PSN (a READ or atomic, or data
      // not yet acknowledged here), it gets the remote host's NAK now.
      ++stats_.fatal;
      if (sf.responder.fail_at(p.aeth.syndrome, p.bth.psn)) {
        io_.send_local(ip, len, now);
        ++stats_.naks_sent;
        ++stats_.fatal_relayed;
      }
      return true;
    }
    sf.responder.on_relayed_ack(kind == roce::AethKind::kAck ? p.bth.psn : psn_add(p.bth.psn, -1));
    return false;
  }
  if (split::is_read_response(op) || op == roce::op::kRcAtomicAck) {
    learn_pmtu(sf, p);
    io_.send_local(ip, len, now);  // the response first, then what it releases
    split::Reply reply;
    sf.responder.on_response(op, p.bth.psn, now, reply);
    send_reply(sf, reply, now);
    return true;
  }
  return false;
}

bool SplitEngine::egress_request(SplitFlow& sf, const roce::RocePacket& p, const uint8_t* ip,
                                 uint32_t len, TimePoint now) noexcept {
  sf.last_active = now;
  sf.dscp_tos = p.tos & 0xFC;
  split::Requester& rq = *sf.requester;
  if (sf.dead) {
    fail_remote_requester(sf, p.bth.psn, now);
    ++stats_.dead_dropped;
    return true;
  }
  if (rq.failed()) {
    ++stats_.requests_dropped;
    return true;
  }
  if (sf.xlate) return egress_translated(sf, p, now);
  learn_pmtu(sf, p);
  const uint32_t dma_len = p.has(roce::kHasReth) ? p.reth.dma_len : 0;
  switch (rq.push({ip, len}, p.bth.opcode, p.bth.psn, dma_len, now)) {
    case split::PushResult::kStored:
      flush(sf, now);
      return true;
    case split::PushResult::kFull:  // blocked() keeps this from happening
      ++stats_.requests_dropped;
      return true;
    case split::PushResult::kDuplicate:  // a passthrough retransmission or a repeated READ
    case split::PushResult::kTooLarge:
      return false;
  }
  return false;
}

void SplitEngine::on_control(PeerState* peer, uint64_t stream, const uint8_t* c, uint32_t len,
                             TimePoint now) noexcept {
  if (len >= kCtrlCmLen && c[1] == kCtrlCmSplit) {
    cm_split_peer_ = peer;
    cm_split_stream_ = stream;
    cm_split_pending_ = true;
    return;
  }
  if (len >= kCtrlDrainLen && c[1] == kCtrlCmDrain) {
    cm_drain_peer_ = peer;
    cm_drain_stream_ = stream;
    cm_drain_psn_ = load_be32(c + 4) & roce::kPsnMask;
    cm_drain_pending_ = true;
    return;
  }
  if (len < kCtrlLen || c[1] != kCtrlStart || (c[2] != 4 && c[2] != 6)) {
    ++stats_.bad_control;
    return;
  }
  FlowKey fwd;
  fwd.kind = FlowKind::kRoce;
  fwd.proto = 17;
  fwd.src.version = fwd.dst.version = c[2];
  std::memcpy(fwd.src.bytes.data(), c + 4, 16);
  std::memcpy(fwd.dst.bytes.data(), c + 20, 16);
  fwd.src = clean(fwd.src);
  fwd.dst = clean(fwd.dst);
  fwd.qp = load_be32(c + 36) & roce::kPsnMask;
  const uint32_t rev_qp = load_be32(c + 40) & roce::kPsnMask;
  const uint32_t start = load_be32(c + 44) & roce::kPsnMask;
  const uint32_t pmtu = load_be32(c + 48);
  if (SplitFlow* old = find(fwd, false); old != nullptr) {  // the ingress started over
    if (old->role == Role::kTracking) --tracking_;
    if (old->stalled) --stalled_;
    old->requester.reset();
    *old = SplitFlow{};
    --used_;
    trim();
    rebuild_index();
  }
  SplitFlow* sf = add(fwd, Role::kEgress, now);
  if (sf == nullptr) return;  // stays passthrough: records are delivered as they are
  // A CM flow whose local host runs another path MTU than the requester:
  // re-cut (split/resegment.h).
  const uint32_t out_mtu = (c[3] & kCtrlConfirmed) != 0 ? local_host_pmtu(fwd.dst, fwd.qp) : 0;
  const bool xlate = out_mtu != 0 && split::mtu_code(pmtu) != 0 && out_mtu != pmtu;
  split::RequesterConfig rc;
  rc.slots = kEgressSlots;
  rc.initial_rto = kEgressInitialRto;
  rc.slot_bytes = local_mtu_;
  rc.pmtu = xlate ? out_mtu : pmtu;
  sf->pmtu = rc.pmtu;
  if (xlate) {
    sf->xlate = std::make_unique<Translation>();
    sf->xlate->requests.start(start, start, pmtu, out_mtu);
    sf->xlate->responses.start(pmtu);
    ++stats_.translated_flows;
  }
  sf->requester = std::make_unique<split::Requester>(rc);
  sf->requester->start(start);
  sf->rev_qp = rev_qp;
  sf->base_relayed = (c[3] & kCtrlConfirmed) != 0;  // no passthrough ACK to relay
  sf->peer = peer;
  sf->stream = stream;
  index(static_cast<uint32_t>(sf - flows_.data()));
  ++stats_.flows_egress;
}

// ---------------------------------------------------------------------------
// Frames toward the hosts

void SplitEngine::send_aeth(SplitFlow& sf, uint8_t syndrome, uint32_t psn, uint32_t msn,
                            TimePoint now, bool toward_wan) noexcept {
  roce::FrameSpec s;
  s.with_eth = false;
  s.src = sf.fwd.dst;  // as if the remote host answered
  s.dst = sf.fwd.src;
  s.udp_sport = sf.udp_sport;
  s.tos = sf.dscp_tos;  // as an RNIC answers: in the traffic class of the request
  s.bth.opcode = roce::op::kRcAck;
  s.bth.dest_qp = sf.rev_qp;
  s.bth.psn = psn & roce::kPsnMask;
  s.aeth.syndrome = syndrome;
  s.aeth.msn = msn & roce::kPsnMask;
  const size_t n = roce::build(s, frame_);
  if (n == 0) return;
  if (toward_wan) {
    io_.carry_packet(frame_.data(), static_cast<uint32_t>(n), now);
  } else {
    io_.send_local(frame_.data(), static_cast<uint32_t>(n), now);
  }
}

void SplitEngine::send_reply(SplitFlow& sf, const split::Reply& r, TimePoint now) noexcept {
  if (r.send) {
    send_aeth(sf, r.syndrome, r.psn, r.msn, now, false);
    if ((r.syndrome >> 5) == 0) {
      ++stats_.acks_sent;
    } else {
      ++stats_.naks_sent;
    }
  }
  if (r.cnp) {
    roce::FrameSpec s;
    s.with_eth = false;
    s.src = sf.fwd.dst;
    s.dst = sf.fwd.src;
    s.udp_sport = sf.udp_sport;
    s.tos = kCnpTos;
    s.bth.opcode = roce::op::kCnp;
    s.bth.dest_qp = sf.rev_qp;
    s.bth.becn = true;
    const size_t n = roce::build(s, frame_);
    if (n != 0) {
      io_.send_local(frame_.data(), static_cast<uint32_t>(n), now);
      ++stats_.cnps_sent;
    }
  }
}

void SplitEngine::flush(SplitFlow& sf, TimePoint now) noexcept {
  split::Requester& rq = *sf.requester;
  const uint64_t resent_before = rq.stats().retransmitted;
  std::span<const uint8_t> pkt;
  while (rq.next_transmit(now, &pkt)) {
    send_egress(sf, pkt, rq.last_was_probe() || rq.in_flight() >= rq.max_inflight(), now);
    ++stats_.reoriginated;
  }
  stats_.retransmitted += rq.stats().retransmitted - resent_before;
}

// A responder acknowledges only the packets that ask (AckReq: rxe asks every
// 64 packets and at each message's end). Gateway B keeps at most
// max_inflight packets in flight, so a window that fills in the middle of a
// message would wait for an ACK the responder has no reason to send, until
// gateway B's retransmission timer (seen on the testbed: 76-88 ms stalls,
// each ended by a probe). Like rxe's requester for its own window, gateway B
// asks every half window and on the packet that fills it, and on a timeout's
// probe (which a lost packet would otherwise take in silently).
void SplitEngine::send_egress(SplitFlow& sf, std::span<const uint8_t> pkt, bool window_full,
                              TimePoint now) noexcept {
  const auto len = static_cast<uint32_t>(pkt.size());
  roce::RocePacket p;
  if (roce::parse_ip(pkt, p) != roce::ParseError::kOk ||
      split::request_kind(p.bth.opcode) != split::ReqKind::kData) {
    io_.send_local(pkt.data(), len, now);
    return;
  }
  const uint32_t half = std::max<uint32_t>(sf.requester->max_inflight() / 2, 1);
  if (p.bth.ack_req || (++sf.unasked < half && !window_full)) {
    if (p.bth.ack_req) sf.unasked = 0;
    io_.send_local(pkt.data(), len, now);
    return;
  }
  // IPv6 UDP checksums cover the BTH; rxe sends them as zero over IPv4 only.
  const bool v6_csum = p.src.version == 6 && (p.data[p.l4_off + 6] | p.data[p.l4_off + 7]) != 0;
  if (len > big_.size() || v6_csum) {
    io_.send_local(pkt.data(), len, now);
    return;
  }
  std::memcpy(big_.data(), pkt.data(), len);
  big_[p.bth_off + 8] |= 0x80;                                          // BTH A bit
  if (p.src.version == 4) big_[p.l4_off + 6] = big_[p.l4_off + 7] = 0;  // no UDP checksum
  roce::RocePacket q;
  if (roce::parse_ip({big_.data(), len}, q) != roce::ParseError::kOk) {
    io_.send_local(pkt.data(), len, now);
    return;
  }
  const uint32_t icrc = roce::compute_icrc(q);
  for (uint32_t i = 0; i < 4; ++i) big_[q.icrc_off + i] = static_cast<uint8_t>(icrc >> (8 * i));
  io_.send_local(big_.data(), len, now);
  sf.unasked = 0;
  ++stats_.acks_requested;
}

void SplitEngine::report_failure(SplitFlow& sf, TimePoint now) noexcept {
  ++stats_.fatal;
  send_aeth(sf, sf.requester->fatal_syndrome(), sf.requester->start_psn(), 0, now, true);
}

// ---------------------------------------------------------------------------
// A peer gateway restarted

void SplitEngine::on_peer_restart(const PeerState* peer, uint32_t peer_idx,
                                  TimePoint now) noexcept {
  ++stats_.peer_restarts;
  for (SplitFlow& sf : active()) {
    if (sf.dead) continue;
    if (sf.role == Role::kIngress && sf.local_peer == peer_idx) {
      // The peer's egress held (or had on the way) requests we acknowledged.
      split::Reply r;
      sf.responder.fail_now(kRestartSyndrome, r);
      if (r.send) ++stats_.restart_naks;
      send_reply(sf, r, now);
      // The remote responder host got some prefix of them: its expected PSN
      // is at most ours and, unless the dead gateway held more than
      // kPoisonSpan packets, at least kPoisonSpan before it.
      const uint32_t expected = sf.responder.expected_psn();
      const int32_t since_base = roce::psn_diff(expected, sf.responder.base_psn());
      const uint32_t span =
          std::min<uint32_t>(since_base > 0 ? static_cast<uint32_t>(since_base) : 0, kPoisonSpan);
      sf.poison_wan = true;
      sf.poison_top = expected;  // down to expected - span
      sf.poison_count = span + 1;
    } else if (sf.role == Role::kEgress && sf.peer == peer) {
      // The peer's ingress acknowledged requests we never got: a hole at
      // next_psn(). The local responder expects a PSN in the window.
      split::Requester& rq = *sf.requester;
      rq.abandon(kRestartSyndrome);
      sf.poison_wan = false;
      sf.poison_top = rq.next_psn();  // down to the oldest unacknowledged one
      sf.poison_count = static_cast<uint32_t>(roce::psn_diff(rq.next_psn(), rq.oldest_psn())) + 1;
      if (sf.stalled) {
        sf.stalled = false;
        --stalled_;
      }
    } else {
      continue;  // tracking flows are passthrough: end to end already
    }
    sf.dead = true;
    sf.poison_psn = sf.poison_top;
    sf.poison_left = sf.poison_count;
    sf.poison_rounds = kPoisonRounds - 1;
    sf.poison_at = now;
    ++stats_.restart_failed;
    send_poison(sf, now);
  }
  if (held_n_ > 0) release_held(now);  // DREQs waiting for a flow that failed
}

// The remote requester's requests reach a dead egress flow in passthrough
// through the restarted gateway. Its QP may never time out (rxe retries
// forever at retry_cnt 7, which ibv_rc_pingpong uses), so it gets a fatal
// NAK -- but only at its oldest unacknowledged PSN: a NAK acknowledges every
// PSN before it. A requester goes back to that PSN at each retransmission,
// so the lowest PSN seen, seen again, is it (the first burst seen may have
// begun before the new session was up).
void SplitEngine::fail_remote_requester(SplitFlow& sf, uint32_t psn, TimePoint now) noexcept {
  sf.last_active = now;
  if (sf.dead_min_seen == 0 || psn_lt(psn, sf.dead_min_psn)) {
    sf.dead_min_psn = psn;
    sf.dead_min_seen = 1;
    return;
  }
  if (psn != sf.dead_min_psn) return;
  if (sf.dead_min_seen < 2) ++sf.dead_min_seen;
  send_aeth(sf, kRestartSyndrome, psn, 0, now, true);
  ++stats_.restart_naks;
  sf.dead_told = true;
}

void SplitEngine::send_poison(SplitFlow& sf, TimePoint now) noexcept {
  if (now < sf.poison_at) return;
  sf.poison_at = now + kPoisonInterval;
  roce::FrameSpec s;
  s.with_eth = false;
  s.src = sf.fwd.src;  // as the requester host would send it
  s.dst = sf.fwd.dst;
  s.udp_sport = sf.udp_sport;
  s.tos = sf.dscp_tos;
  s.bth.dest_qp = sf.fwd.qp;
  // Two at each PSN: a SEND only with invalidate of R_Key 0 and no payload
  // takes the host's posted receive and completes it with an error (an
  // application that ignores flushed receives, like rping, sees that one);
  // without a receive posted it is RNR-NAKed and the WRITE only that
  // follows (R_Key 0, a DMA length of 1 and no payload) fails the QP.
  static constexpr uint8_t kOps[] = {roce::op::kRcSendOnlyInv, roce::op::kRcWriteOnly};
  s.ieth = 0;
  s.reth.va = 0;
  s.reth.rkey = 0;
  s.reth.dma_len = 1;
  for (uint32_t i = 0; i < kPoisonBurst && sf.poison_left > 0; ++i) {
    s.bth.psn = sf.poison_psn;
    for (const uint8_t opcode : kOps) {
      s.bth.opcode = opcode;
      const size_t n = roce::build(s, frame_);
      if (n == 0) continue;
      if (sf.poison_wan) {
        if (!io_.carry_packet(frame_.data(), static_cast<uint32_t>(n), now)) return;  // no room
      } else {
        io_.send_local(frame_.data(), static_cast<uint32_t>(n), now);
      }
      ++stats_.poison_sent;
    }
    sf.poison_psn = psn_add(sf.poison_psn, -1);
    --sf.poison_left;
  }
  if (sf.poison_left == 0 && sf.poison_rounds > 0) {
    --sf.poison_rounds;
    sf.poison_psn = sf.poison_top;
    sf.poison_left = sf.poison_count;
    sf.poison_at = now + kPoisonRoundGap;
  }
}

// ---------------------------------------------------------------------------
// Timers, back-pressure, housekeeping

bool SplitEngine::egress_full(const SplitFlow& sf) noexcept {
  // A translated input may become kMaxPmtu / 256 pieces.
  const uint32_t need = sf.xlate ? split::kMaxPmtu / 256 : 1;
  return sf.requester->in_window() + need > kEgressSlots;
}

bool SplitEngine::blocked(PeerState* peer, uint64_t stream) noexcept {
  if (used_ == 0) return false;
  for (SplitFlow& sf : active()) {
    if (sf.role != Role::kEgress || sf.peer != peer || sf.stream != stream) continue;
    if (!egress_full(sf)) return false;
    if (!sf.stalled) {
      sf.stalled = true;
      ++stalled_;
      ++stats_.stalls;
    }
    return true;
  }
  return false;
}

uint64_t SplitEngine::window_bytes(const SplitFlow& sf) noexcept {
  // What may still arrive once an ACK opens the requester's window: the
  // window it has in flight, and the one the ACK opens; each packet at most
  // the largest request seen, as a record (2 bytes of framing).
  return 2 * uint64_t{sf.responder.window_estimate()} * (sf.max_req_len + 2U);
}

bool SplitEngine::take_unblocked(PeerState** peer, uint64_t* stream) noexcept {
  if (stalled_ == 0) return false;
  for (SplitFlow& sf : active()) {
    if (!sf.stalled || (sf.requester && egress_full(sf))) continue;
    sf.stalled = false;
    --stalled_;
    *peer = sf.peer;
    *stream = sf.stream;
    return true;
  }
  return false;
}

void SplitEngine::poll(TimePoint now) noexcept {
  if (held_n_ > 0) release_held(now);
  if (used_ == 0) return;
  for (SplitFlow& sf : active()) {
    if (sf.dead) {
      if (sf.poison_left > 0) send_poison(sf, now);
      continue;
    }
    if (sf.role == Role::kIngress) {
      if (sf.responder.next_timeout() > now) continue;
      sf.responder.set_short_of_room(io_.short_of_room(sf.local_peer, window_bytes(sf)));
      split::Reply reply;
      sf.responder.poll(now, reply);
      send_reply(sf, reply, now);
    } else if (sf.role == Role::kEgress) {
      if (sf.requester->next_timeout() > now) continue;
      const uint64_t timeouts_before = sf.requester->stats().timeouts;
      if (sf.requester->poll(now) == split::Event::kRetryExceeded) report_failure(sf, now);
      stats_.egress_timeouts += sf.requester->stats().timeouts - timeouts_before;
      flush(sf, now);
    }
  }
  if (held_n_ > 0) release_held(now);  // a flow may have failed
}

TimePoint SplitEngine::next_timeout() const noexcept {
  TimePoint t = TimePoint::infinite();
  if (held_n_ > 0) {
    for (const HeldMad& h : held_) {
      if (h.used) t = std::min(t, h.since + kDreqHoldMax);
    }
  }
  if (used_ == 0) return t;
  for (const SplitFlow& sf : active()) {
    if (sf.dead) {
      if (sf.poison_left > 0) t = std::min(t, sf.poison_at);
      continue;
    }
    if (sf.role == Role::kIngress) t = std::min(t, sf.responder.next_timeout());
    if (sf.role == Role::kEgress) t = std::min(t, sf.requester->next_timeout());
  }
  return t;
}

void SplitEngine::release(SplitFlow& sf) noexcept {
  if (sf.role == Role::kFree) return;
  if (sf.role == Role::kTracking) --tracking_;
  if (sf.stalled) --stalled_;
  sf.requester.reset();
  sf = SplitFlow{};
  --used_;
  trim();
  ++stats_.flows_released;
}

uint32_t SplitEngine::release_key(const FlowKey& k) noexcept {
  uint32_t n = 0;
  if (SplitFlow* sf = find(k, false)) {
    release(*sf);
    ++n;
  }
  if (SplitFlow* sf = find(k, true)) {  // the other direction: its requester QP is k.qp
    release(*sf);
    ++n;
  }
  if (n > 0) rebuild_index();
  return n;
}

bool SplitEngine::on_cm(const roce::RocePacket& p, bool from_local, bool split_route,
                        TimePoint now) noexcept {
  split::CmMessage m;
  if (!split::parse_cm(p, m)) return false;
  split::CmConnection c;
  const uint8_t user = !split_route ? 0 : from_local ? kCmLocalSplit : kCmRemoteSplit;
  switch (cm_.on_message(p, m, user, now, &c)) {
    case split::CmEvent::kPaired:
      // The REP: from a local host, the passive side is local; from the WAN,
      // the active side is (and its REQ said whether its route is split).
      if (from_local ? split_route : (c.user & kCmLocalSplit) != 0) cm_pair(c, !from_local, now);
      break;
    case split::CmEvent::kReleased:
      if (c.established) {
        stats_.cm_released += release_key(roce_key(c.active, c.passive, c.passive_qpn));
        stats_.cm_released += release_key(roce_key(c.passive, c.active, c.active_qpn));
      }
      break;
    case split::CmEvent::kNone:
    case split::CmEvent::kRequest:
      break;
  }
  // A DREQ names the receiver's QP: enough even when the set-up was not seen
  // (or was forgotten).
  if (m.attr == split::cm_attr::kDreq && used_ > 0) {
    stats_.cm_released += release_key(roce_key(p.src, p.dst, m.remote_qpn));
  }
  if (m.attr != split::cm_attr::kReq || !split_route || from_local) return false;
  // A REQ for a local (passive) host on a split route: the host runs this
  // site's path MTU; the gateways translate.
  if (local_pmtu_ == 0 || m.pmtu == local_pmtu_ || p.len > big_.size()) return false;
  if (p.src.version == 6 && (p.data[p.l4_off + 6] | p.data[p.l4_off + 7]) != 0) return false;
  std::memcpy(big_.data(), p.data, p.len);
  uint8_t& mtu = big_[p.payload_off + kReqMtuOffset];
  mtu = static_cast<uint8_t>((split::mtu_code(local_pmtu_) << 4) | (mtu & 0x0F));
  if (p.src.version == 4) big_[p.l4_off + 6] = big_[p.l4_off + 7] = 0;  // no UDP checksum
  roce::RocePacket q;
  if (roce::parse_ip({big_.data(), p.len}, q) != roce::ParseError::kOk) return false;
  const uint32_t icrc = roce::compute_icrc(q);
  for (uint32_t i = 0; i < 4; ++i) big_[q.icrc_off + i] = static_cast<uint8_t>(icrc >> (8 * i));
  io_.send_local(big_.data(), p.len, now);
  ++stats_.cm_mtu_rewritten;
  return true;
}

void SplitEngine::announce_drain(Flow& flow, const roce::RocePacket& p, const split::CmMessage& m,
                                 TimePoint now) noexcept {
  // The DREQ names the receiver's QP: the sender's requester flow toward it.
  const SplitFlow* sf = find(roce_key(p.src, p.dst, m.remote_qpn), false);
  if (sf == nullptr || sf->role != Role::kIngress || !io_.has_room(flow, kCtrlDrainLen)) return;
  std::array<uint8_t, kCtrlDrainLen> ctrl{kCtrlMagic, kCtrlCmDrain, p.src.version, 0};
  store_be32(ctrl.data() + 4, sf->responder.expected_psn());
  io_.carry(flow, ctrl.data(), kCtrlDrainLen, now);
}

bool SplitEngine::drained(const SplitFlow& sf, uint32_t end_psn) noexcept {
  const split::Requester& rq = *sf.requester;
  if (rq.failed()) return true;  // nothing more will be delivered
  // The next request PSN in the ingress' space (translated flows count
  // their input, not the re-cut pieces).
  const uint32_t next = sf.xlate ? sf.xlate->requests.next_in_psn() : rq.next_psn();
  return !psn_lt(next, end_psn) && rq.in_window() == 0;
}

bool SplitEngine::hold_dreq(const roce::RocePacket& p, const uint8_t* ip, uint32_t len,
                            bool have_end, uint32_t end_psn, TimePoint now) noexcept {
  split::CmMessage m;
  if (!split::parse_cm(p, m) || m.attr != split::cm_attr::kDreq) return false;
  const FlowKey k = roce_key(p.src, p.dst, m.remote_qpn);
  HeldMad* slot = nullptr;
  for (HeldMad& h : held_) {
    // The host repeated its DREQ (its gateway no longer knows the flow, so
    // no drain record came): one waiting is enough.
    if (h.used && h.egress == k) return true;
    if (!h.used && slot == nullptr) slot = &h;
  }
  if (!have_end) return false;
  // A drain record means the flow was split at gateway A, so its control
  // record is on the flow's own stream: when the DREQ overtook even that
  // (a WAN loss on the flow's stream), wait for the flow to start too.
  const SplitFlow* sf = find(k, false);
  const bool started = sf != nullptr && sf->role == Role::kEgress;
  if (sf != nullptr && !started) return false;
  if (started && drained(*sf, end_psn)) return false;
  if (slot == nullptr || len > slot->bytes.size()) return false;  // table full: as before
  slot->used = true;
  slot->egress = k;
  slot->end_psn = end_psn;
  slot->seen = started;
  if (!started) ++stats_.dreqs_held_early;
  slot->since = now;
  slot->len = len;
  std::memcpy(slot->bytes.data(), ip, len);
  ++held_n_;
  ++stats_.dreqs_held;
  return true;
}

void SplitEngine::release_held(TimePoint now) noexcept {
  for (HeldMad& h : held_) {
    if (!h.used) continue;
    const SplitFlow* sf = find(h.egress, false);
    const bool expired = now - h.since >= kDreqHoldMax;
    const bool started = sf != nullptr && sf->role == Role::kEgress;
    h.seen = h.seen || started;
    if (!expired && ((started && !drained(*sf, h.end_psn)) || (!started && !h.seen))) continue;
    if (expired) ++stats_.dreq_hold_expired;
    h.used = false;
    --held_n_;
    roce::RocePacket q;
    if (roce::parse_ip({h.bytes.data(), h.len}, q) != roce::ParseError::kOk) continue;
    on_cm(q, false, false, now);  // releases the connection's flows
    io_.send_local(h.bytes.data(), h.len, now);
  }
}

uint32_t SplitEngine::local_host_pmtu(const roce::IpAddr& host, uint32_t qpn) const noexcept {
  const split::CmConnection* c = cm_.find_qp(host, qpn);
  if (c == nullptr) return 0;
  if (c->active == host) return c->pmtu;  // its own REQ
  return local_pmtu_ != 0 ? local_pmtu_ : c->pmtu;
}

bool SplitEngine::egress_translated(SplitFlow& sf, const roce::RocePacket& p,
                                    TimePoint now) noexcept {
  Translation& x = *sf.xlate;
  split::Requester& rq = *sf.requester;
  bool stored = true;
  const bool fed = x.requests.feed(p, [&](const roce::FrameSpec& s) {
    const size_t n = roce::build(s, big_);
    if (n == 0 || rq.push({big_.data(), n}, s.bth.opcode, s.bth.psn, s.reth.dma_len, now) !=
                      split::PushResult::kStored) {
      stored = false;
      return;
    }
    ++stats_.resegmented;
  });
  if (!fed) {
    // A READ/atomic the requester repeated: the remote host answers it again
    // (sent as is, like an untranslated duplicate). Other repeats are ours.
    const bool again = x.requests.reissue(p, [&](const roce::FrameSpec& s) {
      const size_t n = roce::build(s, big_);
      if (n != 0) io_.send_local(big_.data(), static_cast<uint32_t>(n), now);
    });
    if (!again) ++stats_.requests_dropped;
    return true;
  }
  if (!stored) ++stats_.requests_dropped;  // blocked() leaves room for a whole input
  flush(sf, now);
  return true;
}

bool SplitEngine::egress_response_translated(SplitFlow& sf, const roce::RocePacket& p,
                                             TimePoint now) noexcept {
  Translation& x = *sf.xlate;
  x.responses.feed(p, x.requests, [&](const roce::FrameSpec& s) {
    const size_t n = roce::build(s, big_);
    if (n != 0) io_.carry_packet(big_.data(), static_cast<uint32_t>(n), now);
  });
  return true;  // replaced by the re-cut responses (or dropped: the requester retries)
}

void SplitEngine::cm_pair(const split::CmConnection& c, bool active_local, TimePoint now) noexcept {
  const roce::IpAddr& local = active_local ? c.active : c.passive;
  const roce::IpAddr& remote = active_local ? c.passive : c.active;
  const FlowKey fwd = roce_key(local, remote, active_local ? c.passive_qpn : c.active_qpn);
  if (SplitFlow* old = find(fwd, false)) {  // the same QPs connected again
    release(*old);
    rebuild_index();
  }
  SplitFlow* sf = add(fwd, Role::kTracking, now);
  if (sf == nullptr) return;
  ++tracking_;
  ++stats_.flows_tracked;
  sf->cm = true;
  sf->rev_qp = active_local ? c.active_qpn : c.passive_qpn;
  sf->pairing.preset(active_local ? c.active_psn : c.passive_psn, 0);
  // The MTU the local requester runs: its own REQ's, or, as the passive
  // side, the site's (its REQ was given that) when configured.
  const uint32_t pmtu = active_local || local_pmtu_ == 0 ? c.pmtu : local_pmtu_;
  if (pmtu != 0) {
    sf->pmtu = pmtu;
    sf->responder.set_pmtu(pmtu);
  }
  index(static_cast<uint32_t>(sf - flows_.data()));
  ++stats_.cm_paired;
}

void SplitEngine::expire(TimePoint cutoff) noexcept {
  cm_.expire(cutoff);
  if (used_ == 0) return;
  bool any = false;
  for (SplitFlow& sf : active()) {
    if (sf.role == Role::kFree) continue;
    if (sf.poison_left > 0) continue;  // a dead flow still failing its hosts' QPs
    // A QP error: the failure went back to the requester (ingress) or was
    // reported to the peer gateway (egress); the QPs are in the error state.
    // A dead egress flow (a peer restart) waits to NAK the remote requester.
    const bool failed =
        (sf.role == Role::kIngress && sf.responder.failed() &&
         (sf.responder.stats().failed_requests > 0 || sf.responder.stats().fatal_relayed > 0)) ||
        (sf.role == Role::kEgress && sf.requester->failed() && (!sf.dead || sf.dead_told));
    if (failed) {
      ++stats_.failed_released;
    } else {
      if (sf.last_active >= cutoff) continue;
      // An egress still holding packets it owns keeps retransmitting them.
      if (sf.role == Role::kEgress && sf.requester->in_window() > 0) continue;
    }
    release(sf);
    any = true;
  }
  if (any) rebuild_index();
}

nlohmann::ordered_json SplitEngine::snapshot() const {
  using J = nlohmann::ordered_json;
  J flows = J::array();
  static constexpr const char* kRoles[] = {"free", "tracking", "ingress", "egress"};
  for (const SplitFlow& sf : active()) {
    if (sf.role == Role::kFree) continue;
    char a[64];
    char b[64];
    roce::format_ip_addr(sf.fwd.src, a, sizeof a);
    roce::format_ip_addr(sf.fwd.dst, b, sizeof b);
    J f{{"role", kRoles[static_cast<int>(sf.role)]},
        {"requester", a},
        {"responder", b},
        {"responder_qp", sf.fwd.qp},
        {"requester_qp", sf.rev_qp},
        {"pmtu", sf.pmtu},
        {"paired_by", sf.cm ? "cm" : "ack"},
        {"dead", sf.dead}};
    if (sf.role == Role::kIngress) {
      const split::ResponderStats& s = sf.responder.stats();
      f["expected_psn"] = sf.responder.expected_psn();
      f["msn"] = sf.responder.msn();
      f["base_confirmed"] = sf.responder.base_confirmed();
      f["failed"] = sf.responder.failed();
      f["fatal_relayed"] = s.fatal_relayed;
      f["accepted"] = s.accepted;
      f["forwarded"] = s.forwarded;
      f["duplicates"] = s.duplicates;
      f["out_of_sequence"] = s.out_of_sequence;
      f["no_room"] = s.no_room;
      f["acks_held"] = s.acks_held;
      f["holds_expired"] = s.holds_expired;
      f["acks"] = s.acks;
      f["naks"] = s.naks;
      f["cnps"] = s.cnps;
    } else if (sf.role == Role::kEgress) {
      const split::RequesterStats& s = sf.requester->stats();
      f["start_psn"] = sf.requester->start_psn();
      f["next_psn"] = sf.requester->next_psn();
      f["in_window"] = sf.requester->in_window();
      f["failed"] = sf.requester->failed();
      f["transmitted"] = s.transmitted;
      f["retransmitted"] = s.retransmitted;
      f["acked"] = s.acked;
      f["seq_naks"] = s.seq_naks;
      f["rnr_naks"] = s.rnr_naks;
      f["fatal_naks"] = s.fatal_naks;
      f["timeouts"] = s.timeouts;
    }
    flows.push_back(std::move(f));
  }
  const SplitStats& s = stats_;
  return J{{"flows_tracked", s.flows_tracked},
           {"flows_paired", s.flows_paired},
           {"flows_egress", s.flows_egress},
           {"flows_released", s.flows_released},
           {"table_full", s.table_full},
           {"acks_sent", s.acks_sent},
           {"naks_sent", s.naks_sent},
           {"cnps_sent", s.cnps_sent},
           {"requests_carried", s.requests_carried},
           {"requests_dropped", s.requests_dropped},
           {"reoriginated", s.reoriginated},
           {"retransmitted", s.retransmitted},
           {"egress_timeouts", s.egress_timeouts},
           {"acks_requested", s.acks_requested},
           {"acks_consumed", s.acks_consumed},
           {"fatal", s.fatal},
           {"fatal_relayed", s.fatal_relayed},
           {"stalls", s.stalls},
           {"bad_control", s.bad_control},
           {"cm_paired", s.cm_paired},
           {"cm_released", s.cm_released},
           {"failed_released", s.failed_released},
           {"translated_flows", s.translated_flows},
           {"resegmented", s.resegmented},
           {"cm_mtu_rewritten", s.cm_mtu_rewritten},
           {"dreqs_held", s.dreqs_held},
           {"dreq_hold_expired", s.dreq_hold_expired},
           {"dreqs_held_early", s.dreqs_held_early},
           {"dreqs_waiting", held_n_},
           {"peer_restarts", s.peer_restarts},
           {"restart_failed", s.restart_failed},
           {"restart_naks", s.restart_naks},
           {"poison_sent", s.poison_sent},
           {"dead_dropped", s.dead_dropped},
           {"cm_connections", cm_.size()},
           {"flows", flows}};
}

}  // namespace rowan::gw
