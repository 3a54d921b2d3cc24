// RDMA CM in the split engine (split_engine.h): pairing from REQ/REP,
// release on DREQ/DREP/REJ, the site's path MTU in a REQ, and DREQs held
// until the data before them is delivered.
#include "split/split_engine_internal.h"

#include <algorithm>
#include <cstring>

namespace rowan::gw {

using namespace split_detail;

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
  io_.send_local(big_.data(), p.len, now, wan_tag_, true);
  ++stats_.cm_mtu_rewritten;
  return true;
}

void SplitEngine::announce_drain(Flow& flow, const roce::RocePacket& p, const split::CmMessage& m,
                                 TimePoint now) noexcept {
  // The DREQ names the receiver's QP: the sender's requester flow toward it.
  const SplitFlow* sf = find_fwd(roce_key(p.src, p.dst, m.remote_qpn));
  if (sf == nullptr || sf->role != Role::kIngress || !io_.has_room(flow, kCtrlDrainLen)) return;
  std::array<uint8_t, kCtrlDrainLen> ctrl{kCtrlMagic, kCtrlCmDrain, p.src.version, 0};
  store_be32(ctrl.data() + 4, sf->in.responder.expected_psn());
  io_.carry(flow, ctrl.data(), kCtrlDrainLen, now);
}

bool SplitEngine::drained(const SplitFlow& sf, uint32_t end_psn) noexcept {
  const split::Requester& rq = *sf.out.requester;
  if (rq.failed()) return true;  // nothing more will be delivered
  // The next request PSN in the ingress' space (translated flows count
  // their input, not the re-cut pieces).
  const uint32_t next = sf.out.xlate ? sf.out.xlate->requests.next_in_psn() : rq.next_psn();
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
  const SplitFlow* sf = find_wan(k, false);
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
  slot->tag = wan_tag_;
  ++held_n_;
  ++stats_.dreqs_held;
  return true;
}

void SplitEngine::release_held(TimePoint now) noexcept {
  for (HeldMad& h : held_) {
    if (!h.used) continue;
    const SplitFlow* sf = find_wan(h.egress, false);
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
    io_.send_local(h.bytes.data(), h.len, now, h.tag, true);
  }
}

uint32_t SplitEngine::local_host_pmtu(const roce::IpAddr& host, uint32_t qpn) const noexcept {
  const split::CmConnection* c = cm_.find_qp(host, qpn);
  if (c == nullptr) return 0;
  if (c->active == host) return c->pmtu;  // its own REQ
  return local_pmtu_ != 0 ? local_pmtu_ : c->pmtu;
}

void SplitEngine::cm_pair(const split::CmConnection& c, bool active_local, TimePoint now) noexcept {
  const roce::IpAddr& local = active_local ? c.active : c.passive;
  const roce::IpAddr& remote = active_local ? c.passive : c.active;
  const FlowKey fwd = roce_key(local, remote, active_local ? c.passive_qpn : c.active_qpn);
  Flow* flow = io_.open_flow(fwd, now);  // the local requester's (add() replaces a former one)
  SplitFlow* sf = flow == nullptr ? nullptr : add(fwd, Role::kTracking, flow, now);
  if (sf == nullptr) {
    if (flow == nullptr) ++stats_.table_full;
    return;
  }
  ++tracking_;
  ++stats_.flows_tracked;
  sf->cm = true;
  sf->rev_qp = active_local ? c.active_qpn : c.passive_qpn;
  sf->in.pairing.preset(active_local ? c.active_psn : c.passive_psn, 0);
  // The MTU the local requester runs: its own REQ's, or, as the passive
  // side, the site's (its REQ was given that) when configured.
  const uint32_t pmtu = active_local || local_pmtu_ == 0 ? c.pmtu : local_pmtu_;
  if (pmtu != 0) {
    sf->pmtu = pmtu;
    sf->in.responder.set_pmtu(pmtu);
  }
  index_wan(*sf);
  ++stats_.cm_paired;
}

}  // namespace rowan::gw
