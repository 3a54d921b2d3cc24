// The ingress half of the split engine (split_engine.h): a local requester's
// flow, tracked in passthrough until an ACK from the remote host pairs it,
// then answered here by a Responder while its requests go on the WAN.
#include "split/split_engine_internal.h"

#include <algorithm>
#include <cstring>

namespace rowan::gw {

using namespace split_detail;

void SplitEngine::start_split(SplitFlow& sf, Flow& flow, TimePoint now) noexcept {
  const uint32_t pmtu = sf.pmtu != 0 ? sf.pmtu : kDefaultPmtu;
  const uint32_t start = sf.in.pairing.next_psn();
  uint8_t* c = frame_.data();
  std::memset(c, 0, kCtrlLen);
  c[0] = kCtrlMagic;
  c[1] = kCtrlStart;
  c[2] = sf.fwd.src.version;
  c[3] = sf.cm && sf.in.pairing.quiescent() ? kCtrlConfirmed : 0;
  std::memcpy(c + 4, sf.fwd.src.bytes.data(), 16);
  std::memcpy(c + 20, sf.fwd.dst.bytes.data(), 16);
  store_be32(c + 36, sf.fwd.qp);
  store_be32(c + 40, sf.rev_qp);
  store_be32(c + 44, start);
  store_be32(c + 48, pmtu);
  if (!io_.has_room(flow, kCtrlLen) || !io_.carry(flow, c, kCtrlLen, now)) return;
  split::ResponderConfig rc;
  rc.pmtu = pmtu;
  sf.in.responder = split::Responder(rc);
  sf.in.responder.start(start, sf.in.pairing.next_msn(), sf.in.pairing.quiescent());
  sf.in.local_peer = flow.peer;
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
  sf.in.max_req_len = std::max(sf.in.max_req_len, len);
  sf.in.responder.set_short_of_room(io_.short_of_room(flow.peer, window_bytes(sf)));
  const split::Verdict v =
      sf.in.responder.on_request(r, room, room && io_.over_share(flow), now, reply);
  if (v == split::Verdict::kCarry && io_.carry(flow, ip, len, now)) {
    ++stats_.requests_carried;
  } else {
    ++stats_.requests_dropped;
  }
  send_reply(sf, reply, now);
  return true;
}

void SplitEngine::track_ack(const roce::RocePacket& p) noexcept {
  if (tracking_ == 0) return;
  const roce::IpAddr src = clean(p.src);
  const roce::IpAddr dst = clean(p.dst);
  for (SplitFlow& sf : active()) {
    if (sf.role != Role::kTracking || sf.rev_qp != 0) continue;
    if (sf.fwd.src != dst || sf.fwd.dst != src) continue;
    if (!sf.in.pairing.on_ack(p.bth.psn, p.aeth.msn)) continue;
    sf.rev_qp = p.bth.dest_qp;
    sf.udp_sport = p.udp_sport;
    index_wan(sf);
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
      if (sf.in.responder.fail_at(p.aeth.syndrome, p.bth.psn)) {
        io_.send_local(ip, len, now, wan_tag_, true);
        ++stats_.naks_sent;
        ++stats_.fatal_relayed;
      }
      return true;
    }
    sf.in.responder.on_relayed_ack(kind == roce::AethKind::kAck ? p.bth.psn
                                                                : psn_add(p.bth.psn, -1));
    return false;
  }
  if (split::is_read_response(op) || op == roce::op::kRcAtomicAck) {
    learn_pmtu(sf, p);
    io_.send_local(ip, len, now, wan_tag_, true);  // the response first, then what it releases
    split::Reply reply;
    sf.in.responder.on_response(op, p.bth.psn, now, reply);
    send_reply(sf, reply, now);
    return true;
  }
  return false;
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
    s.tos = cnp_tos_;
    s.bth.opcode = roce::op::kCnp;
    s.bth.dest_qp = sf.rev_qp;
    s.bth.becn = true;
    const size_t n = roce::build(s, frame_);
    if (n != 0) {
      // In the fabric's CNP class: its DSCP, and on a tagged QP its PCP.
      VlanTag tag = local_tag(sf);
      if (tag.present) tag = VlanTag::make(cnp_pcp_, tag.vid());
      io_.send_local(frame_.data(), static_cast<uint32_t>(n), now, tag, false);
      ++stats_.cnps_sent;
    }
  }
}

uint64_t SplitEngine::window_bytes(const SplitFlow& sf) noexcept {
  // What may still arrive once an ACK opens the requester's window: the
  // window it has in flight, and the one the ACK opens; each packet at most
  // the largest request seen, as a record (2 bytes of framing).
  return 2 * uint64_t{sf.in.responder.window_estimate()} * (sf.in.max_req_len + 2U);
}

}  // namespace rowan::gw
