// The split engine's flow table, the dispatch of local and WAN packets to
// its halves, the frames both halves send, a peer's restart, the timers and
// the snapshot (split_engine.h).
#include "split/split_engine_internal.h"

#include <algorithm>
#include <cstring>

namespace rowan::gw {

using namespace split_detail;

SplitEngine::SplitEngine(SplitIo& io, uint32_t local_mtu, const SplitLimits& limits)
    : io_(io),
      local_mtu_(local_mtu),
      flows_(std::max<uint32_t>(limits.flows, 1)),
      pool_(static_cast<uint32_t>(std::max<uint64_t>(
                limits.pool_bytes / std::max<uint32_t>(local_mtu, 1), kEgressSlots)),
            local_mtu),
      xlates_(limits.translations),
      index_size_(4 * static_cast<uint32_t>(flows_.size())),
      wan_req_index_(index_size_),
      wan_ans_index_(index_size_),
      stream_index_(index_size_) {
  const auto n = static_cast<uint32_t>(flows_.size());
  free_.reserve(n);
  for (uint32_t i = n; i > 0; --i) free_.push_back(i - 1);
  split::RequesterConfig rc;
  rc.slots = kEgressSlots;
  requesters_.reserve(n);
  for (uint32_t i = 0; i < n; ++i) requesters_.emplace_back(rc, pool_);
  free_xlate_.reserve(xlates_.size());
  for (auto i = static_cast<uint32_t>(xlates_.size()); i > 0; --i) free_xlate_.push_back(i - 1);
}

uint64_t SplitEngine::memory_bytes() const noexcept {
  uint64_t n = sizeof(*this) + pool_.memory_bytes();
  n += flows_.size() * sizeof(SplitFlow) + free_.capacity() * sizeof(uint32_t);
  for (const split::Requester& r : requesters_) n += sizeof(r) + r.memory_bytes();
  n += xlates_.size() * sizeof(Translation) + free_xlate_.capacity() * sizeof(uint32_t);
  n += 3 * uint64_t{index_size_} * sizeof(int32_t);
  return n;
}

bool SplitEngine::take_translation(SplitFlow& sf) noexcept {
  if (free_xlate_.empty()) return false;
  sf.out.xlate = &xlates_[free_xlate_.back()];
  free_xlate_.pop_back();
  return true;
}

FlowKey SplitEngine::rev_key(const SplitFlow& sf) {
  FlowKey k = sf.fwd;
  k.src = sf.fwd.dst;
  k.dst = sf.fwd.src;
  k.qp = sf.rev_qp;
  return k;
}

SplitEngine::SplitFlow* SplitEngine::find_wan(const FlowKey& k, bool answers) noexcept {
  const auto& idx = answers ? wan_ans_index_ : wan_req_index_;
  const uint32_t n = index_size_;
  for (uint32_t i = 0, b = static_cast<uint32_t>(k.hash() % n); i < n; ++i, b = (b + 1) % n) {
    if (idx[b] == 0) return nullptr;
    SplitFlow& sf = flows_[static_cast<uint32_t>(idx[b] - 1)];
    if (sf.role == Role::kFree || (sf.role == Role::kEgress) == answers) continue;
    if (answers ? (sf.rev_qp != 0 && rev_key(sf) == k) : sf.fwd == k) return &sf;
  }
  return nullptr;
}

SplitEngine::SplitFlow* SplitEngine::find_fwd(const FlowKey& k) noexcept {
  // A local requester's flow (its own flow entry), or a remote one's (egress).
  if (Flow* f = io_.find_flow(k); f != nullptr && f->split_ingress != 0) {
    return slot_of(f->split_ingress);
  }
  return find_wan(k, false);
}

SplitEngine::SplitFlow* SplitEngine::find_rev(const FlowKey& k) noexcept {
  // A local responder's answers (egress), or a remote one's (ingress).
  if (Flow* f = io_.find_flow(k); f != nullptr && f->split_egress != 0) {
    return slot_of(f->split_egress);
  }
  return find_wan(k, true);
}

uint64_t SplitEngine::stream_hash(const PeerState* peer, uint64_t stream) noexcept {
  return pkt::fmix64(reinterpret_cast<uintptr_t>(peer) * 0x9E3779B97F4A7C15ULL ^ stream);
}

SplitEngine::SplitFlow* SplitEngine::find_stream(const PeerState* peer, uint64_t stream) noexcept {
  const uint32_t n = index_size_;
  for (uint32_t i = 0, b = static_cast<uint32_t>(stream_hash(peer, stream) % n); i < n;
       ++i, b = (b + 1) % n) {
    if (stream_index_[b] == 0) return nullptr;
    SplitFlow& sf = flows_[static_cast<uint32_t>(stream_index_[b] - 1)];
    if (sf.role == Role::kEgress && sf.out.peer == peer && sf.out.stream == stream) return &sf;
  }
  return nullptr;
}

void SplitEngine::index_wan(SplitFlow& sf) noexcept {
  const auto slot = static_cast<int32_t>(&sf - flows_.data() + 1);
  const uint32_t n = index_size_;
  auto put = [slot, n](std::vector<int32_t>& idx, uint64_t hash) {
    for (uint32_t i = 0, b = static_cast<uint32_t>(hash % n); i < n; ++i, b = (b + 1) % n) {
      if (idx[b] == slot) return;
      if (idx[b] == 0) {
        idx[b] = slot;
        return;
      }
    }
  };
  if (sf.role == Role::kEgress) {
    put(wan_req_index_, sf.fwd.hash());
    put(stream_index_, stream_hash(sf.out.peer, sf.out.stream));
  } else if (sf.rev_qp != 0) {
    put(wan_ans_index_, rev_key(sf).hash());
  }
}

void SplitEngine::rebuild_index() noexcept {
  std::fill(wan_req_index_.begin(), wan_req_index_.end(), 0);
  std::fill(wan_ans_index_.begin(), wan_ans_index_.end(), 0);
  std::fill(stream_index_.begin(), stream_index_.end(), 0);
  for (SplitFlow& sf : active()) {
    if (sf.role != Role::kFree) index_wan(sf);
  }
}

SplitEngine::SplitFlow* SplitEngine::add(const FlowKey& fwd, Role role, Flow* local,
                                         TimePoint now) noexcept {
  uint32_t& handle = role == Role::kEgress ? local->split_egress : local->split_ingress;
  if (SplitFlow* old = slot_of(handle)) {  // the same QPs again (a new connection, or started over)
    release(*old);
    rebuild_index();
  }
  if (free_.empty()) {
    ++stats_.table_full;
    return nullptr;
  }
  const uint32_t i = free_.back();
  free_.pop_back();
  SplitFlow& sf = flows_[i];
  sf = SplitFlow{};
  sf.role = role;
  sf.fwd = fwd;
  sf.udp_sport = kDefaultSport;
  sf.local = local;
  sf.last_active = now;
  handle = i + 1;
  ++used_;
  high_ = std::max(high_, i + 1);
  index_wan(sf);
  return &sf;
}

void SplitEngine::trim() noexcept {
  while (high_ > 0 && flows_[high_ - 1].role == Role::kFree) --high_;
}

void SplitEngine::learn_pmtu(SplitFlow& sf, const roce::RocePacket& p) noexcept {
  if (!is_full_size(p.bth.opcode)) return;
  const uint32_t n = p.payload_len;
  if (n < 256 || n > 4096 || (n & (n - 1)) != 0 || n <= sf.pmtu) return;
  sf.pmtu = n;
  sf.in.responder.set_pmtu(n);
  if (sf.out.requester) sf.out.requester->set_pmtu(n);
}

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
    SplitFlow* sf = slot_of(flow.split_ingress);
    if (sf == nullptr) {
      if (!split_route) return false;
      sf = add(key_of(p), Role::kTracking, &flow, now);
      if (sf == nullptr) return false;
      ++tracking_;
      ++stats_.flows_tracked;
    }
    sf->last_active = now;
    sf->dscp_tos = p.tos & 0xFC;  // answers go in the requester's class (ECN bits: not ECT)
    learn_pmtu(*sf, p);
    if (sf->role == Role::kIngress) return ingress_request(*sf, flow, p, ip, len, now);
    if (sf->role != Role::kTracking) return false;
    if (sf->in.pairing.matched() && sf->rev_qp != 0 && p.bth.psn == sf->in.pairing.next_psn()) {
      start_split(*sf, flow, now);
      if (sf->role == Role::kIngress) return ingress_request(*sf, flow, p, ip, len, now);
    }
    sf->in.pairing.on_forwarded(p.bth.opcode, p.bth.psn, p.bth.ack_req, p.reth.dma_len,
                                sf->pmtu != 0 ? sf->pmtu : kDefaultPmtu);
    return false;
  }
  // A local responder answering a remote requester.
  SplitFlow* sf = slot_of(flow.split_egress);
  if (sf == nullptr || sf->role != Role::kEgress) return false;
  const bool consumed = egress_from_responder(*sf, p, now);
  if (held_n_ > 0) release_held(now);  // this ACK may have drained a flow a DREQ waits for
  return consumed;
}

bool SplitEngine::on_wan(PeerState* peer, uint64_t stream, const uint8_t* ip, uint32_t len,
                         TimePoint now, const VlanTag& tag) noexcept {
  wan_tag_ = tag;
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
    SplitFlow* sf = find_wan(key_of(p), false);
    if (sf == nullptr) return false;
    return egress_request(*sf, p, ip, len, now);
  }
  SplitFlow* sf = find_wan(key_of(p), true);
  if (sf == nullptr) {
    if (p.bth.opcode == roce::op::kRcAck && p.aeth.kind() == roce::AethKind::kAck) track_ack(p);
    return false;
  }
  if (sf->role == Role::kIngress) return ingress_from_remote(*sf, p, ip, len, now);
  if (sf->role == Role::kTracking && p.bth.opcode == roce::op::kRcAck &&
      p.aeth.kind() == roce::AethKind::kAck) {
    sf->in.pairing.on_ack(p.bth.psn, p.aeth.msn);
  }
  return false;
}

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
    io_.send_local(frame_.data(), static_cast<uint32_t>(n), now, local_tag(sf), false);
  }
}

void SplitEngine::on_peer_restart(const PeerState* peer, uint32_t peer_idx,
                                  TimePoint now) noexcept {
  ++stats_.peer_restarts;
  for (SplitFlow& sf : active()) {
    if (sf.dead) continue;
    if (sf.role == Role::kIngress && sf.in.local_peer == peer_idx) {
      // The peer's egress held (or had on the way) requests we acknowledged.
      split::Reply r;
      sf.in.responder.fail_now(kRestartSyndrome, r);
      if (r.send) ++stats_.restart_naks;
      send_reply(sf, r, now);
      // The remote responder host got some prefix of them: its expected PSN
      // is at most ours and, unless the dead gateway held more than
      // kPoisonSpan packets, at least kPoisonSpan before it.
      const uint32_t expected = sf.in.responder.expected_psn();
      const int32_t since_base = roce::psn_diff(expected, sf.in.responder.base_psn());
      const uint32_t span =
          std::min<uint32_t>(since_base > 0 ? static_cast<uint32_t>(since_base) : 0, kPoisonSpan);
      sf.poison_wan = true;
      sf.poison_top = expected;  // down to expected - span
      sf.poison_count = span + 1;
    } else if (sf.role == Role::kEgress && sf.out.peer == peer) {
      // The peer's ingress acknowledged requests we never got: a hole at
      // next_psn(). The local responder expects a PSN in the window.
      split::Requester& rq = *sf.out.requester;
      rq.abandon(kRestartSyndrome);
      sf.poison_wan = false;
      sf.poison_top = rq.next_psn();  // down to the oldest unacknowledged one
      sf.poison_count = static_cast<uint32_t>(roce::psn_diff(rq.next_psn(), rq.oldest_psn())) + 1;
      if (sf.out.stalled) {
        sf.out.stalled = false;
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
        io_.send_local(frame_.data(), static_cast<uint32_t>(n), now, sf.out.wan_tag, true);
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

void SplitEngine::poll(TimePoint now) noexcept {
  if (held_n_ > 0) release_held(now);
  if (used_ == 0) return;
  for (SplitFlow& sf : active()) {
    if (sf.dead) {
      if (sf.poison_left > 0) send_poison(sf, now);
      continue;
    }
    if (sf.role == Role::kIngress) {
      if (sf.in.responder.next_timeout() > now) continue;
      sf.in.responder.set_short_of_room(io_.short_of_room(sf.in.local_peer, window_bytes(sf)));
      split::Reply reply;
      sf.in.responder.poll(now, reply);
      send_reply(sf, reply, now);
    } else if (sf.role == Role::kEgress) {
      if (sf.out.requester->next_timeout() > now) continue;
      const uint64_t timeouts_before = sf.out.requester->stats().timeouts;
      if (sf.out.requester->poll(now) == split::Event::kRetryExceeded) report_failure(sf, now);
      stats_.egress_timeouts += sf.out.requester->stats().timeouts - timeouts_before;
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
    if (sf.role == Role::kIngress) t = std::min(t, sf.in.responder.next_timeout());
    if (sf.role == Role::kEgress) t = std::min(t, sf.out.requester->next_timeout());
  }
  return t;
}

void SplitEngine::release(SplitFlow& sf, bool count) noexcept {
  if (sf.role == Role::kFree) return;
  if (sf.role == Role::kTracking) --tracking_;
  if (sf.out.stalled) --stalled_;
  (sf.role == Role::kEgress ? sf.local->split_egress : sf.local->split_ingress) = 0;
  if (sf.out.requester != nullptr) sf.out.requester->clear();
  if (sf.out.xlate != nullptr) {
    free_xlate_.push_back(static_cast<uint32_t>(sf.out.xlate - xlates_.data()));
  }
  sf = SplitFlow{};
  free_.push_back(static_cast<uint32_t>(&sf - flows_.data()));
  --used_;
  trim();
  if (count) ++stats_.flows_released;
}

uint32_t SplitEngine::release_key(const FlowKey& k) noexcept {
  uint32_t n = 0;
  if (SplitFlow* sf = find_fwd(k)) {
    release(*sf);
    ++n;
  }
  if (SplitFlow* sf = find_rev(k)) {  // the other direction: its requester QP is k.qp
    release(*sf);
    ++n;
  }
  if (n > 0) rebuild_index();
  return n;
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
        (sf.role == Role::kIngress && sf.in.responder.failed() &&
         (sf.in.responder.stats().failed_requests > 0 ||
          sf.in.responder.stats().fatal_relayed > 0)) ||
        (sf.role == Role::kEgress && sf.out.requester->failed() && (!sf.dead || sf.out.dead_told));
    if (failed) {
      ++stats_.failed_released;
    } else {
      if (sf.last_active >= cutoff) continue;
      // An egress still holding packets it owns keeps retransmitting them.
      if (sf.role == Role::kEgress && sf.out.requester->in_window() > 0) continue;
    }
    release(sf);
    any = true;
  }
  if (any) rebuild_index();
}

void SplitEngine::view(View& v) const {
  v.flows.clear();
  for (const SplitFlow& sf : active()) {
    if (sf.role == Role::kFree) continue;
    View::FlowView& f = v.flows.emplace_back();
    f.role = static_cast<uint8_t>(sf.role);
    f.requester = sf.fwd.src;
    f.responder = sf.fwd.dst;
    f.responder_qp = sf.fwd.qp;
    f.requester_qp = sf.rev_qp;
    f.pmtu = sf.pmtu;
    f.cm = sf.cm;
    f.dead = sf.dead;
    if (sf.role == Role::kIngress) {
      f.expected_psn = sf.in.responder.expected_psn();
      f.msn = sf.in.responder.msn();
      f.base_confirmed = sf.in.responder.base_confirmed();
      f.failed = sf.in.responder.failed();
      f.responder_stats = sf.in.responder.stats();
    } else if (sf.role == Role::kEgress) {
      f.start_psn = sf.out.requester->start_psn();
      f.next_psn = sf.out.requester->next_psn();
      f.in_window = sf.out.requester->in_window();
      f.failed = sf.out.requester->failed();
      f.requester_stats = sf.out.requester->stats();
    }
  }
  v.stats = stats_;
  v.dreqs_waiting = held_n_;
  v.cm_connections = cm_.size();
  v.pool_slots = pool_.capacity();
  v.pool_free = pool_.available();
  v.pool_exhausted = pool_.exhausted();
  v.memory_bytes = memory_bytes();
}

nlohmann::ordered_json SplitEngine::render(const View& v) {
  using J = nlohmann::ordered_json;
  J flows = J::array();
  static constexpr const char* kRoles[] = {"free", "tracking", "ingress", "egress"};
  for (const View::FlowView& sf : v.flows) {
    char a[64];
    char b[64];
    roce::format_ip_addr(sf.requester, a, sizeof a);
    roce::format_ip_addr(sf.responder, b, sizeof b);
    J f{{"role", kRoles[sf.role]},
        {"requester", a},
        {"responder", b},
        {"responder_qp", sf.responder_qp},
        {"requester_qp", sf.requester_qp},
        {"pmtu", sf.pmtu},
        {"paired_by", sf.cm ? "cm" : "ack"},
        {"dead", sf.dead}};
    if (sf.role == static_cast<uint8_t>(Role::kIngress)) {
      const split::ResponderStats& s = sf.responder_stats;
      f["expected_psn"] = sf.expected_psn;
      f["msn"] = sf.msn;
      f["base_confirmed"] = sf.base_confirmed;
      f["failed"] = sf.failed;
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
    } else if (sf.role == static_cast<uint8_t>(Role::kEgress)) {
      const split::RequesterStats& s = sf.requester_stats;
      f["start_psn"] = sf.start_psn;
      f["next_psn"] = sf.next_psn;
      f["in_window"] = sf.in_window;
      f["failed"] = sf.failed;
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
  const SplitStats& s = v.stats;
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
           {"dreqs_waiting", v.dreqs_waiting},
           {"peer_restarts", s.peer_restarts},
           {"restart_failed", s.restart_failed},
           {"restart_naks", s.restart_naks},
           {"poison_sent", s.poison_sent},
           {"dead_dropped", s.dead_dropped},
           {"cm_connections", v.cm_connections},
           {"pool_slots", v.pool_slots},
           {"pool_free", v.pool_free},
           {"pool_exhausted", v.pool_exhausted},
           {"memory_bytes", v.memory_bytes},
           {"flows", flows}};
}

}  // namespace rowan::gw
