#include "split/resegment.h"

namespace rowan::split {

using roce::psn_diff;

void RequestSegmenter::start(uint32_t in_psn, uint32_t out_psn, uint32_t in_mtu,
                             uint32_t out_mtu) noexcept {
  asm_.reset(out_mtu);
  in_mtu_ = in_mtu == 0 || in_mtu > kMaxPmtu ? kMaxPmtu : in_mtu;
  next_in_ = in_psn & roce::kPsnMask;
  next_out_ = out_psn & roce::kPsnMask;
  is_write_ = false;
  reth_ = roce::Reth{};
  mark_head_ = nmarks_ = 0;
  read_head_ = nreads_ = 0;
}

void RequestSegmenter::mark(uint32_t in_psn, uint32_t out_psn) noexcept {
  marks_[mark_head_] = Mark{in_psn, out_psn};
  mark_head_ = (mark_head_ + 1) % kMapEntries;
  if (nmarks_ < kMapEntries) ++nmarks_;
}

bool RequestSegmenter::in_psn_of(uint32_t out_psn, uint32_t* in_psn) const noexcept {
  // Newest first. Several inputs may start in the same out-packet (a smaller
  // in-MTU): the oldest of them starts it. One input may span several
  // out-packets (a larger in-MTU): the newest input starting before it.
  bool found = false;
  for (uint32_t i = 0; i < nmarks_; ++i) {
    const Mark& m = marks_[(mark_head_ + kMapEntries - 1 - i) % kMapEntries];
    const int32_t d = psn_diff(m.out_psn, out_psn);
    if (d > 0) continue;
    if (d == 0) {
      *in_psn = m.in_psn;
      found = true;
      continue;
    }
    if (!found) *in_psn = m.in_psn;
    return true;
  }
  return found;
}

const MappedRead* RequestSegmenter::read_at(uint32_t out_psn) const noexcept {
  for (uint32_t i = 0; i < nreads_; ++i) {
    const MappedRead& r = reads_[(read_head_ + nreads_ - 1 - i) % kReads];
    const int32_t d = psn_diff(out_psn, r.out_psn);
    if (d >= 0 && static_cast<uint32_t>(d) < r.out_span) return &r;
  }
  return nullptr;
}

const MappedRead* RequestSegmenter::read_in(uint32_t in_psn) const noexcept {
  for (uint32_t i = 0; i < nreads_; ++i) {
    const MappedRead& r = reads_[(read_head_ + nreads_ - 1 - i) % kReads];
    if (r.in_psn == in_psn) return &r;
  }
  return nullptr;
}

}  // namespace rowan::split
