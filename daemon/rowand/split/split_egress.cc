// The egress half of the split engine (split_engine.h): a local responder's
// flow, started by the peer's control record; a Requester re-originates the
// requests toward the host, consumes its ACKs and retransmits; MTU
// translation of requests and responses; back-pressure on the stream.
#include "split/split_engine_internal.h"

#include <algorithm>
#include <cstring>

namespace rowan::gw {

using namespace split_detail;

bool SplitEngine::egress_from_responder(SplitFlow& sf, const roce::RocePacket& p,
                                        TimePoint now) noexcept {
  if (sf.dead) {  // the answers to the poison, or to what came before it
    ++stats_.dead_dropped;
    return true;
  }
  split::Requester& rq = *sf.out.requester;
  sf.last_active = now;
  learn_pmtu(sf, p);
  const uint8_t op = p.bth.opcode;
  const uint32_t psn = p.bth.psn;
  const uint32_t start = rq.start_psn();
  if (split::is_read_response(op) || op == roce::op::kRcAtomicAck) {
    rq.on_response(op, psn, now);
    flush(sf, now);
    if (sf.out.xlate) return egress_response_translated(sf, p, now);
    return false;  // responses travel end to end
  }
  if (op != roce::op::kRcAck) return false;
  const roce::AethKind kind = p.aeth.kind();
  const bool seq_nak = kind == roce::AethKind::kNak &&
                       p.aeth.value() == static_cast<uint8_t>(roce::NakCode::kPsnSequenceError);
  if (kind == roce::AethKind::kAck || seq_nak || kind == roce::AethKind::kRnrNak) {
    // Acknowledges only passthrough packets: the requester needs it.
    const uint32_t through = kind == roce::AethKind::kAck ? psn : psn_add(psn, -1);
    if (psn_lt(through, psn_add(start, -1))) return sf.out.xlate != nullptr;  // stale if translated
    if (rq.on_aeth(psn, p.aeth.syndrome, now) == split::Event::kRetryExceeded) {
      report_failure(sf, now);
    }
    flush(sf, now);
    if (!sf.out.base_relayed) {
      sf.out.base_relayed = true;  // it covers the passthrough part: relay this one
      return false;
    }
    ++stats_.acks_consumed;
    return true;
  }
  if (kind == roce::AethKind::kNak) {
    rq.on_aeth(psn, p.aeth.syndrome, now);
    ++stats_.fatal;
    if (sf.out.xlate) {  // the same NAK, at the requester's PSN of the failed request
      uint32_t in = sf.out.xlate->requests.next_in_psn();
      sf.out.xlate->requests.in_psn_of(psn, &in);
      send_aeth(sf, p.aeth.syndrome, in, p.aeth.msn, now, true);
      return true;
    }
    return false;  // the ingress fails the flow toward the requester
  }
  return false;
}

bool SplitEngine::egress_request(SplitFlow& sf, const roce::RocePacket& p, const uint8_t* ip,
                                 uint32_t len, TimePoint now) noexcept {
  sf.last_active = now;
  sf.dscp_tos = p.tos & 0xFC;
  sf.out.wan_tag = wan_tag_;  // re-originated (and resent) in its sender's class
  split::Requester& rq = *sf.out.requester;
  if (sf.dead) {
    fail_remote_requester(sf, p.bth.psn, now);
    ++stats_.dead_dropped;
    return true;
  }
  if (rq.failed()) {
    ++stats_.requests_dropped;
    return true;
  }
  if (sf.out.xlate) return egress_translated(sf, p, now);
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
  if (SplitFlow* old = find_wan(fwd, false); old != nullptr) {  // the ingress started over
    release(*old, false);                                       // replaced, not released
    rebuild_index();
  }
  // Held by the flow entry that carries the local responder's answers.
  FlowKey answers = fwd;
  answers.src = fwd.dst;
  answers.dst = fwd.src;
  answers.qp = rev_qp;
  Flow* local = io_.open_flow(answers, now);
  SplitFlow* sf = local == nullptr ? nullptr : add(fwd, Role::kEgress, local, now);
  if (sf == nullptr) {  // stays passthrough: records are delivered as they are
    if (local == nullptr) ++stats_.table_full;
    return;
  }
  // A CM flow whose local host runs another path MTU than the requester:
  // re-cut (split/resegment.h).
  const uint32_t out_mtu = (c[3] & kCtrlConfirmed) != 0 ? local_host_pmtu(fwd.dst, fwd.qp) : 0;
  const bool xlate = out_mtu != 0 && split::mtu_code(pmtu) != 0 && out_mtu != pmtu;
  const auto slot = static_cast<uint32_t>(sf - flows_.data());
  if (xlate && !take_translation(*sf)) {  // every translation in use: stays passthrough
    release(*sf, false);
    ++stats_.table_full;
    return;
  }
  split::RequesterConfig rc;
  rc.slots = kEgressSlots;
  rc.initial_rto = kEgressInitialRto;
  rc.slot_bytes = local_mtu_;
  rc.pmtu = xlate ? out_mtu : pmtu;
  sf->pmtu = rc.pmtu;
  if (xlate) {
    sf->out.xlate->requests.start(start, start, pmtu, out_mtu);
    sf->out.xlate->responses.start(pmtu);
    ++stats_.translated_flows;
  }
  sf->out.requester = &requesters_[slot];
  sf->out.requester->configure(rc);
  sf->out.requester->start(start);
  sf->rev_qp = rev_qp;
  sf->out.base_relayed = (c[3] & kCtrlConfirmed) != 0;  // no passthrough ACK to relay
  sf->out.peer = peer;
  sf->out.stream = stream;
  index_wan(*sf);  // now under its stream too
  ++stats_.flows_egress;
}

void SplitEngine::flush(SplitFlow& sf, TimePoint now) noexcept {
  split::Requester& rq = *sf.out.requester;
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
    io_.send_local(pkt.data(), len, now, sf.out.wan_tag, true);
    return;
  }
  const uint32_t half = std::max<uint32_t>(sf.out.requester->max_inflight() / 2, 1);
  if (p.bth.ack_req || (++sf.out.unasked < half && !window_full)) {
    if (p.bth.ack_req) sf.out.unasked = 0;
    io_.send_local(pkt.data(), len, now, sf.out.wan_tag, true);
    return;
  }
  // IPv6 UDP checksums cover the BTH; rxe sends them as zero over IPv4 only.
  const bool v6_csum = p.src.version == 6 && (p.data[p.l4_off + 6] | p.data[p.l4_off + 7]) != 0;
  if (len > big_.size() || v6_csum) {
    io_.send_local(pkt.data(), len, now, sf.out.wan_tag, true);
    return;
  }
  std::memcpy(big_.data(), pkt.data(), len);
  big_[p.bth_off + 8] |= 0x80;                                          // BTH A bit
  if (p.src.version == 4) big_[p.l4_off + 6] = big_[p.l4_off + 7] = 0;  // no UDP checksum
  roce::RocePacket q;
  if (roce::parse_ip({big_.data(), len}, q) != roce::ParseError::kOk) {
    io_.send_local(pkt.data(), len, now, sf.out.wan_tag, true);
    return;
  }
  const uint32_t icrc = roce::compute_icrc(q);
  for (uint32_t i = 0; i < 4; ++i) big_[q.icrc_off + i] = static_cast<uint8_t>(icrc >> (8 * i));
  io_.send_local(big_.data(), len, now, sf.out.wan_tag, true);
  sf.out.unasked = 0;
  ++stats_.acks_requested;
}

void SplitEngine::report_failure(SplitFlow& sf, TimePoint now) noexcept {
  ++stats_.fatal;
  send_aeth(sf, sf.out.requester->fatal_syndrome(), sf.out.requester->start_psn(), 0, now, true);
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
  if (sf.out.dead_min_seen == 0 || psn_lt(psn, sf.out.dead_min_psn)) {
    sf.out.dead_min_psn = psn;
    sf.out.dead_min_seen = 1;
    return;
  }
  if (psn != sf.out.dead_min_psn) return;
  if (sf.out.dead_min_seen < 2) ++sf.out.dead_min_seen;
  send_aeth(sf, kRestartSyndrome, psn, 0, now, true);
  ++stats_.restart_naks;
  sf.out.dead_told = true;
}

bool SplitEngine::egress_full(const SplitFlow& sf) noexcept {
  // A translated input may become kMaxPmtu / 256 pieces.
  const uint32_t need = sf.out.xlate ? split::kMaxPmtu / 256 : 1;
  return !sf.out.requester->room_for(need);
}

bool SplitEngine::blocked(PeerState* peer, uint64_t stream) noexcept {
  if (used_ == 0) return false;
  SplitFlow* sf = find_stream(peer, stream);
  if (sf == nullptr || !egress_full(*sf)) return false;
  if (!sf->out.stalled) {
    sf->out.stalled = true;
    ++stalled_;
    ++stats_.stalls;
  }
  return true;
}

bool SplitEngine::take_unblocked(PeerState** peer, uint64_t* stream) noexcept {
  if (stalled_ == 0) return false;
  for (SplitFlow& sf : active()) {
    if (!sf.out.stalled || (sf.out.requester && egress_full(sf))) continue;
    sf.out.stalled = false;
    --stalled_;
    *peer = sf.out.peer;
    *stream = sf.out.stream;
    return true;
  }
  return false;
}

bool SplitEngine::egress_translated(SplitFlow& sf, const roce::RocePacket& p,
                                    TimePoint now) noexcept {
  Translation& x = *sf.out.xlate;
  split::Requester& rq = *sf.out.requester;
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
      if (n != 0) io_.send_local(big_.data(), static_cast<uint32_t>(n), now, wan_tag_, true);
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
  Translation& x = *sf.out.xlate;
  x.responses.feed(p, x.requests, [&](const roce::FrameSpec& s) {
    const size_t n = roce::build(s, big_);
    if (n != 0) io_.carry_packet(big_.data(), static_cast<uint32_t>(n), now);
  });
  return true;  // replaced by the re-cut responses (or dropped: the requester retries)
}

}  // namespace rowan::gw
