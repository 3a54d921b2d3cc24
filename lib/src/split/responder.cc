#include "split/responder.h"

namespace rowan::split {

using roce::psn_add;
using roce::psn_diff;
using roce::psn_le;
using roce::psn_lt;

void Responder::start(uint32_t expected_psn, uint32_t msn, bool base_confirmed) noexcept {
  started_ = true;
  base_confirmed_ = base_confirmed;
  failed_ = false;
  base_ = expected_psn & roce::kPsnMask;
  expected_ = base_;
  msn_ = msn & roce::kPsnMask;
  acked_psn_ = psn_add(base_, -1);
  acked_msn_ = msn_;
  unacked_ = 0;
  window_ = 0;
  held_since_ = TimePoint::infinite();
  ack_due_ = TimePoint::infinite();
  in_nak_episode_ = false;
  nak_deferred_ = false;
  nak_owed_ = false;
  nreads_ = 0;
  read_head_ = 0;
}

void Responder::make_ack(Reply& r) noexcept {
  r.send = true;
  r.syndrome = syndrome::kAckUnlimited;
  r.psn = psn_add(expected_, -1);
  r.msn = msn_;
  acked_psn_ = r.psn;
  acked_msn_ = msn_;
  unacked_ = 0;
  ack_due_ = TimePoint::infinite();
  held_since_ = TimePoint::infinite();
  ++stats_.acks;
}

bool Responder::ack_allowed(TimePoint now) noexcept {
  if (!may_ack()) return false;
  if (!short_of_room_ || cfg_.hold_max.ns() <= 0) return true;
  if (held_since_.is_infinite()) {
    held_since_ = now;
    ++stats_.acks_held;
  }
  if (now - held_since_ >= cfg_.hold_max) {
    ++stats_.holds_expired;
    return true;  // no longer: the requester's ACK timeout is closer than the room
  }
  hold_check_at_ = now + cfg_.hold_recheck;
  return false;
}

void Responder::maybe_cnp(bool over_share, TimePoint now, Reply& r) noexcept {
  if (!over_share) return;
  if (cnp_sent_ && now - last_cnp_ < cfg_.cnp_interval) return;
  r.cnp = true;
  last_cnp_ = now;
  cnp_sent_ = true;
  ++stats_.cnps;
}

void Responder::nak_sequence(TimePoint now, Reply& r) noexcept {
  // A NAK acknowledges every PSN before it: never while passthrough packets
  // are unconfirmed. Behind a READ/atomic whose response is still on its way
  // it waits for that response, as the remote host's NAK would have (a
  // responder answers in PSN order: the responses first, then the NAK).
  if (!base_confirmed_) {
    // Owed: sent as soon as a relayed ACK confirms the base (poll()), so the
    // requester goes back now rather than at its ACK timeout (rxe's 67 ms
    // at the default of 14, far longer at the larger values WAN users set).
    nak_owed_ = true;
    return;
  }
  if (nreads_ != 0) {
    nak_deferred_ = true;
    return;
  }
  if (in_nak_episode_ && now - last_nak_ < cfg_.nak_retry) return;
  in_nak_episode_ = true;
  last_nak_ = now;
  r.send = true;
  r.syndrome = syndrome::nak(roce::NakCode::kPsnSequenceError);
  r.psn = expected_;
  r.msn = msn_;
  acked_psn_ = psn_add(expected_, -1);
  acked_msn_ = msn_;
  unacked_ = 0;
  ack_due_ = TimePoint::infinite();
  held_since_ = TimePoint::infinite();
  ++stats_.naks;
}

Verdict Responder::on_request(const Request& req, bool room, bool over_share, TimePoint now,
                              Reply& reply) noexcept {
  reply = Reply{};
  const ReqKind kind = request_kind(req.opcode);
  if (!started_ || kind == ReqKind::kOther) return Verdict::kDrop;
  if (failed_) {
    // The NAK must not pass a PSN the requester has not had acknowledged: a
    // NAK acknowledges everything before it (rxe completes those work
    // requests as successful). Past our last ACK it goes at the first PSN
    // after it; with the base unconfirmed that is unknown (passthrough
    // packets before it may be lost), and the requester goes back to its
    // oldest unacknowledged PSN at its ACK timeout, which is NAKed then.
    ++stats_.failed_requests;
    const uint32_t first = psn_add(acked_psn_, 1);
    if (!psn_le(req.psn, first) && !base_confirmed_) return Verdict::kDrop;
    reply.send = true;
    reply.syndrome = fail_syndrome_;
    reply.psn = psn_le(req.psn, first) ? req.psn : first;
    reply.msn = acked_msn_;
    return Verdict::kDrop;
  }
  const int32_t d = psn_diff(req.psn, expected_);
  if (d > 0) {
    ++stats_.out_of_sequence;
    nak_sequence(now, reply);
    return Verdict::kDrop;
  }
  if (d < 0) {
    ++stats_.duplicates;
    // A retransmission of a passthrough packet, or a repeated READ/atomic:
    // the remote host answers it (as a responder answers duplicates).
    if (!base_confirmed_ && psn_lt(req.psn, base_)) return Verdict::kCarry;
    if (kind != ReqKind::kData) return Verdict::kCarry;
    if (ack_allowed(now)) {
      make_ack(reply);
    } else if (base_confirmed_ && !failed_) {
      reply.send = true;  // the last ACK again (it stops before the oldest READ)
      reply.syndrome = syndrome::kAckUnlimited;
      reply.psn = acked_psn_;
      reply.msn = acked_msn_;
      ++stats_.acks;
    }
    return Verdict::kDrop;
  }
  // In sequence.
  if (!room) {
    ++stats_.no_room;
    nak_sequence(now, reply);
    maybe_cnp(true, now, reply);
    return Verdict::kDrop;
  }
  if (kind != ReqKind::kData && nreads_ == kMaxReads) {
    // More outstanding READs/atomics than any QP may have: not ours to judge,
    // but we cannot track it; the requester retries.
    ++stats_.no_room;
    return Verdict::kDrop;
  }
  in_nak_episode_ = false;
  nak_deferred_ = false;  // the requester came back by itself
  nak_owed_ = false;
  if (kind == ReqKind::kData) {
    expected_ = psn_add(expected_, 1);
    if (ends_message(req.opcode)) msn_ = (msn_ + 1) & roce::kPsnMask;
    ++unacked_;
    ++stats_.accepted;
    // The requester's window: how far past our last ACK it has sent.
    window_ = std::max(window_, static_cast<uint32_t>(psn_diff(req.psn, acked_psn_)));
    if (!(req.ack_req || unacked_ >= cfg_.ack_every)) {
      defer_ack(now);
    } else if (ack_allowed(now)) {
      make_ack(reply);
    } else if (holding()) {
      // Owed now: it goes at the first look that finds room (poll()).
      if (ack_due_.is_infinite()) first_unacked_at_ = now;
      ack_due_ = std::min(ack_due_, now);
    } else {
      defer_ack(now);
    }
  } else {
    if (unacked_ > 0 && ack_allowed(now)) make_ack(reply);  // what came before the READ
    const uint32_t span = psn_span(req.opcode, req.dma_len, cfg_.pmtu);
    Read& rd = reads_[(read_head_ + nreads_) % kMaxReads];
    rd.first = req.psn;
    rd.last = psn_add(req.psn, span - 1);
    rd.msn_before = msn_;
    ++nreads_;
    expected_ = psn_add(expected_, span);
    msn_ = (msn_ + 1) & roce::kPsnMask;
    ++stats_.forwarded;
  }
  maybe_cnp(over_share, now, reply);
  return Verdict::kCarry;
}

void Responder::on_response(uint8_t opcode, uint32_t psn, TimePoint now, Reply& reply) noexcept {
  reply = Reply{};
  const bool completes = opcode == roce::op::kRcReadResponseLast ||
                         opcode == roce::op::kRcReadResponseOnly ||
                         opcode == roce::op::kRcAtomicAck;
  if (!completes) return;
  bool popped = false;
  while (nreads_ > 0 && psn_le(reads_[read_head_].last, psn)) {
    read_head_ = (read_head_ + 1) % kMaxReads;
    --nreads_;
    popped = true;
  }
  if (!popped) return;
  // The responses carry the remote host's MSN through the READ; what we
  // accepted after it is ours to acknowledge now.
  if (nreads_ == 0 && nak_deferred_) {
    // An out-of-sequence packet came while the READ was outstanding: its
    // NAK goes now, after the response (it also acknowledges what we took).
    nak_deferred_ = false;
    nak_sequence(now, reply);
    if (reply.send) return;
  }
  if (nreads_ == 0 && unacked_ == 0) {
    acked_psn_ = psn_add(expected_, -1);
    acked_msn_ = msn_;
  }
  if (unacked_ > 0 && ack_allowed(now)) {
    make_ack(reply);
  } else if (unacked_ > 0) {
    defer_ack(now);
  }
}

void Responder::defer_ack(TimePoint now) noexcept {
  if (ack_due_.is_infinite()) {
    first_unacked_at_ = now;
  } else if (ack_due_ <= now) {
    return;  // already due (an ACK owed at the next poll)
  }
  ack_due_ = std::min(now + cfg_.ack_delay, first_unacked_at_ + cfg_.ack_max_delay);
}

void Responder::on_relayed_ack(uint32_t through) noexcept {
  if (base_confirmed_) return;
  if (psn_le(psn_add(base_, -1), through)) {
    base_confirmed_ = true;
    // An owed NAK goes at the next poll (next_timeout()); else the ACK does.
    if (unacked_ > 0) ack_due_ = TimePoint::zero();
  }
}

void Responder::fail(uint8_t syndrome) noexcept {
  failed_ = true;
  nak_deferred_ = false;
  nak_owed_ = false;
  fail_syndrome_ = syndrome;
  unacked_ = 0;
  ack_due_ = TimePoint::infinite();
}

bool Responder::fail_at(uint8_t syndrome, uint32_t psn) noexcept {
  // Everything through acked_psn_ completed at the requester already (our
  // ACKs); a NAK for it would be stale there. No ACK ever passes an
  // outstanding READ, so a NAKed READ is always after acked_psn_.
  const bool waiting =
      started_ && !failed_ && base_confirmed_ && psn_lt(acked_psn_, psn) && psn_lt(psn, expected_);
  fail(syndrome);
  if (waiting) ++stats_.fatal_relayed;
  return waiting;
}

void Responder::fail_now(uint8_t syndrome, Reply& reply) noexcept {
  reply = Reply{};
  const uint32_t first = psn_add(acked_psn_, 1);
  const bool unacked = started_ && !failed_ && base_confirmed_ && psn_lt(first, expected_);
  fail(syndrome);
  if (!unacked) return;
  reply.send = true;
  reply.syndrome = syndrome;
  reply.psn = first;
  reply.msn = acked_msn_;
  ++stats_.fatal_relayed;
}

void Responder::poll(TimePoint now, Reply& reply) noexcept {
  reply = Reply{};
  if (nak_owed()) {
    // Dropped while the base was unconfirmed: the requester is waiting for
    // its timer. The NAK also acknowledges everything accepted before it.
    nak_owed_ = false;
    nak_sequence(now, reply);  // (after a READ's response, if one is outstanding)
    if (reply.send) return;
  }
  if (unacked_ > 0 && now >= ack_due_ && ack_allowed(now)) make_ack(reply);
}

TimePoint Responder::next_timeout() const noexcept {
  if (nak_owed()) return TimePoint::zero();
  if (unacked_ == 0 || !may_ack()) return TimePoint::infinite();
  // A held ACK looks at the room again every hold_recheck (and goes at the
  // latest hold_max after it was first held).
  if (holding() && short_of_room_) return std::max(ack_due_, hold_check_at_);
  return ack_due_;
}

}  // namespace rowan::split
