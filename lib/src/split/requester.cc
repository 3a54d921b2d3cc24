#include "split/requester.h"

#include <algorithm>
#include <cstring>

namespace rowan::split {

using roce::psn_add;
using roce::psn_diff;
using roce::psn_lt;

SlotPool::SlotPool(uint32_t slots, uint32_t slot_bytes)
    : slot_bytes_(slot_bytes),
      entries_(slots),
      storage_(new uint8_t[static_cast<size_t>(slots) * slot_bytes]) {
  free_.reserve(slots);
  for (uint32_t i = slots; i > 0; --i) free_.push_back(i - 1);
}

uint32_t SlotPool::take() noexcept {
  if (free_.empty()) {
    ++exhausted_;
    return kNone;
  }
  const uint32_t s = free_.back();
  free_.pop_back();
  return s;
}

Requester::Requester(const RequesterConfig& cfg)
    : cfg_(cfg),
      slots_(std::max<uint32_t>(cfg.slots, 1)),
      own_(std::make_unique<SlotPool>(slots_, cfg.slot_bytes)),
      pool_(own_.get()),
      ring_(slots_),
      rto_base_(first_rto()),
      rto_cur_(first_rto()) {}

Requester::Requester(const RequesterConfig& cfg, SlotPool& pool)
    : cfg_(cfg),
      slots_(std::max<uint32_t>(cfg.slots, 1)),
      pool_(&pool),
      ring_(slots_),
      rto_base_(first_rto()),
      rto_cur_(first_rto()) {
  cfg_.slot_bytes = pool.slot_bytes();
}

void Requester::configure(const RequesterConfig& cfg) noexcept {
  clear();
  const uint32_t slot_bytes = pool_->slot_bytes();
  cfg_ = cfg;
  cfg_.slot_bytes = slot_bytes;
  slots_ = std::clamp<uint32_t>(cfg.slots, 1, static_cast<uint32_t>(ring_.size()));
  cfg_.slots = slots_;
  stats_ = RequesterStats{};
  started_ = false;
  failed_ = false;
  rto_base_ = rto_cur_ = first_rto();
}

void Requester::clear() noexcept {
  for (uint32_t i = 0; i < count_; ++i) pool_->give(slot(i));
  head_ = count_ = send_ = 0;
  bytes_ = 0;
}

void Requester::start(uint32_t next_psn) noexcept {
  clear();
  started_ = true;
  failed_ = false;
  bytes_ = 0;
  start_psn_ = next_psn_ = next_psn & roce::kPsnMask;
  retries_ = 0;
  probe_ = false;
  rto_base_ = rto_cur_ = first_rto();
  srtt_ = rttvar_ = Duration::zero();
  timer_ = TimePoint::infinite();
  rnr_until_ = TimePoint::zero();
}

PushResult Requester::push(std::span<const uint8_t> pkt, uint8_t opcode, uint32_t psn,
                           uint32_t dma_len, TimePoint now) noexcept {
  (void)now;
  if (started_ && psn_lt(psn, next_psn_)) return PushResult::kDuplicate;
  if (pkt.size() > cfg_.slot_bytes) return PushResult::kTooLarge;
  if (count_ == slots_) return PushResult::kFull;
  const uint32_t s = pool_->take();
  if (s == SlotPool::kNone) return PushResult::kFull;
  ring_[(head_ + count_) % slots_] = s;
  Entry& e = pool_->entries_[s];
  e.psn = psn;
  e.span = psn_span(opcode, dma_len, cfg_.pmtu);
  e.len = static_cast<uint32_t>(pkt.size());
  e.opcode = opcode;
  e.sent = false;
  e.retransmitted = false;
  std::memcpy(pool_->bytes(s), pkt.data(), pkt.size());
  ++count_;
  bytes_ += e.len;
  next_psn_ = psn_add(psn, e.span);
  ++stats_.pushed;
  return PushResult::kStored;
}

bool Requester::next_transmit(TimePoint now, std::span<const uint8_t>* pkt) noexcept {
  if (failed_ || now < rnr_until_) return false;
  // A timeout's probe: the oldest packet alone, whatever else is in flight.
  const bool probe = probe_ && count_ > 0 && send_ > 0;
  probe_ = false;
  if (!probe && (send_ >= count_ || send_ >= cfg_.max_inflight)) return false;
  const uint32_t s = slot(probe ? 0 : send_);
  Entry& e = pool_->entries_[s];
  if (e.sent) {
    ++stats_.retransmitted;
    e.retransmitted = true;
  }
  e.sent = true;
  e.sent_at = now;
  ++stats_.transmitted;
  if (!probe) ++send_;
  last_probe_ = probe;
  if (timer_.is_infinite()) {
    timer_ = now + rto_cur_;
    if (retries_ == 0) waiting_since_ = now;
  }
  *pkt = {pool_->bytes(s), e.len};
  return true;
}

bool Requester::free_through(uint32_t psn, bool inclusive, TimePoint now) noexcept {
  bool progress = false;
  bool sampled = false;
  Duration sample;
  while (count_ > 0) {
    const Entry& e = at(0);
    const int32_t d = psn_diff(last_psn(e), psn);
    if (d > 0 || (d == 0 && !inclusive)) break;
    // Never free what was not sent: an ACK cannot cover it (a stale or bogus
    // PSN from before a wrap).
    if (!e.sent) break;
    if (!e.retransmitted) {  // Karn: only packets sent once give a sample
      sample = now - e.sent_at;
      sampled = true;
    }
    bytes_ -= e.len;
    pool_->give(slot(0));
    head_ = (head_ + 1) % slots_;
    --count_;
    if (send_ > 0) --send_;
    ++stats_.acked;
    progress = true;
  }
  if (sampled) {
    if (srtt_.ns() == 0) {
      srtt_ = sample;
      rttvar_ = sample / 2;
    } else {
      const Duration err = srtt_ > sample ? srtt_ - sample : sample - srtt_;
      rttvar_ = (rttvar_ * 3 + err) / 4;
      srtt_ = (srtt_ * 7 + sample) / 8;
    }
    rto_base_ = std::clamp(srtt_ + rttvar_ * 4, cfg_.rto, cfg_.max_rto);
  }
  if (progress) {
    retries_ = 0;
    probe_ = false;
    // RFC 6298 5.7: a backed-off timeout stays until a fresh sample.
    if (sampled) rto_cur_ = rto_base_;
    timer_ = send_ > 0 ? now + rto_cur_ : TimePoint::infinite();
    waiting_since_ = now;
  }
  return progress;
}

void Requester::go_back() noexcept {
  send_ = 0;
  probe_ = false;
  timer_ = TimePoint::infinite();  // re-armed by the retransmission
}

Event Requester::on_aeth(uint32_t psn, uint8_t syndrome, TimePoint now) noexcept {
  if (!started_ || failed_) return Event::kNone;
  const auto kind = static_cast<roce::AethKind>(syndrome >> 5);
  const uint8_t value = syndrome & 0x1F;
  switch (kind) {
    case roce::AethKind::kAck:
      free_through(psn, true, now);
      return Event::kNone;
    case roce::AethKind::kRnrNak:
      free_through(psn, false, now);
      ++stats_.rnr_naks;
      if (count_ == 0 || at(0).psn != psn) return Event::kNone;  // stale
      go_back();
      rnr_until_ = now + Duration::from_us(rnr_timer_us(value));
      return Event::kNone;
    case roce::AethKind::kNak:
      if (value == static_cast<uint8_t>(roce::NakCode::kPsnSequenceError)) {
        ++stats_.seq_naks;
        const bool progress = free_through(psn, false, now);
        if (count_ == 0 || at(0).psn != psn) return Event::kNone;  // stale
        if (!progress && ++retries_ > cfg_.max_retries) {
          failed_ = true;
          fatal_syndrome_ = syndrome;
          return Event::kRetryExceeded;
        }
        go_back();
        return Event::kNone;
      }
      free_through(psn, false, now);
      ++stats_.fatal_naks;
      failed_ = true;
      fatal_syndrome_ = syndrome;
      return Event::kFatal;
    case roce::AethKind::kReserved:
      break;
  }
  return Event::kNone;
}

void Requester::on_response(uint8_t opcode, uint32_t psn, TimePoint now) noexcept {
  if (!started_ || failed_) return;
  const bool last = opcode == roce::op::kRcReadResponseLast ||
                    opcode == roce::op::kRcReadResponseOnly || opcode == roce::op::kRcAtomicAck;
  if (!last && !is_read_response(opcode)) return;
  if (!free_through(psn, last, now) && !last) {
    // A middle response is progress for the READ in flight: push the timer.
    if (send_ > 0) timer_ = now + rto_cur_;
  }
}

Event Requester::poll(TimePoint now) noexcept {
  if (failed_ || timer_.is_infinite() || now < timer_) return Event::kNone;
  if (count_ == 0 || send_ == 0) {
    timer_ = TimePoint::infinite();
    return Event::kNone;
  }
  ++stats_.timeouts;
  if (++retries_ > cfg_.max_retries) {
    failed_ = true;
    fatal_syndrome_ = syndrome::nak(roce::NakCode::kRemoteOperationalError);
    return Event::kRetryExceeded;
  }
  rto_cur_ = std::min(rto_cur_ + rto_cur_, cfg_.max_rto);
  if (retries_ <= kProbes || now - waiting_since_ < cfg_.go_back_after) {
    // The first timeouts since progress probe with the oldest packet only
    // (the caller asks for an ACK on it): a responder that is only slow (a
    // soft-RoCE guest descheduled for 100+ ms) answers with its progress,
    // where going back N would queue a whole window of duplicates behind it.
    probe_ = true;
    timer_ = TimePoint::infinite();  // re-armed by the probe
  } else {
    go_back();
  }
  return Event::kNone;
}

TimePoint Requester::next_timeout() const noexcept {
  if (failed_) return TimePoint::infinite();
  TimePoint t = timer_;
  // Something to send (after an RNR wait): only while the window has room;
  // a full window waits for ACKs or the timer (not the loop spinning on it).
  const bool can_send = send_ < count_ && send_ < cfg_.max_inflight;
  if (can_send || probe_) t = std::min(t, rnr_until_);
  return t;
}

}  // namespace rowan::split
