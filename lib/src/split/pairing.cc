#include "split/pairing.h"

namespace rowan::split {

using roce::psn_add;
using roce::psn_lt;

void PairingTracker::on_forwarded(uint8_t opcode, uint32_t psn, bool ack_req, uint32_t dma_len,
                                  uint32_t pmtu) noexcept {
  if (request_kind(opcode) == ReqKind::kOther) return;
  if (any_ && psn_lt(psn, next_psn_)) return;  // a retransmission: already counted
  any_ = true;
  const uint32_t span = psn_span(opcode, dma_len, pmtu);
  const uint32_t last = psn_add(psn, span - 1);
  next_psn_ = psn_add(psn, span);
  const bool ends = ends_message(opcode);
  if (ends) msgs_ = (msgs_ + 1) & roce::kPsnMask;
  if (ends || ack_req) {
    marks_[head_] = Mark{last, msgs_};
    head_ = (head_ + 1) % kMarks;
    if (nmarks_ < kMarks) ++nmarks_;
  }
}

bool PairingTracker::on_ack(uint32_t psn, uint32_t msn) noexcept {
  for (uint32_t i = 0; i < nmarks_; ++i) {
    const Mark& m = marks_[(head_ + kMarks - 1 - i) % kMarks];
    if (m.psn != psn) continue;
    msn_offset_ = (msn - m.msgs) & roce::kPsnMask;
    matched_ = true;
    acked_through_ = psn;
    return true;
  }
  return false;
}

void PairingTracker::preset(uint32_t next_psn, uint32_t msn) noexcept {
  *this = PairingTracker{};
  any_ = true;
  matched_ = true;
  next_psn_ = next_psn & roce::kPsnMask;
  msn_offset_ = msn & roce::kPsnMask;
  acked_through_ = psn_add(next_psn_, -1);
}

}  // namespace rowan::split
