#include "transport/fec_coder.h"

#include <algorithm>
#include <cstring>

namespace rowan::transport {
namespace {

// A symbol is the packet number (8 bytes) and the packet's frames.
constexpr size_t kPnBytes = 8;

}  // namespace

FecCoder::FecCoder(const FecConfig& cfg, size_t max_frames)
    : cfg_(cfg),
      encoder_(cfg.mode == FecMode::kOff ? 0 : kPnBytes + max_frames),
      decoder_(cfg.mode == FecMode::kOff ? 0 : kPnBytes + max_frames,
               cfg.mode == FecMode::kOff ? 1 : cfg.decoder_blocks) {}

void FecCoder::on_sent() noexcept {
  ++packets_sent_;
  meter_.on_sent();
}

void FecCoder::next_source(uint32_t* block, uint8_t* index) noexcept {
  if (!open_) {
    // A new block may start only once the previous one's repair has left
    // (the caller sends due repair before data).
    block_ = next_block_++;
    open_ = true;
    wire_longest_ = 0;
    encoder_.begin(rate_.enabled() ? rate_.k : 1, rate_.enabled() ? rate_.m : 1);
    BlockRecord& r = records_[block_ % kRecords];
    r = BlockRecord{};
    r.block = block_;
    r.used = true;
  }
  *block = block_;
  *index = static_cast<uint8_t>(encoder_.sources());
}

void FecCoder::add_source(uint64_t pn, const uint8_t* frames, size_t len, size_t elided,
                          std::span<const io::TxPiece> pieces, size_t frames_off) noexcept {
  uint8_t head[kPnBytes];
  wire::put_u64(head, pn);
  uint8_t* dst = encoder_.add_slot(len, {head, kPnBytes});
  if (dst != nullptr) {
    // The symbol is the frames as sent: the buffer's bytes between the
    // pieces, and each piece from where it lies (the send buffer).
    io::for_each_run(frames, len, pieces.data(), pieces.size(), frames_off,
                     [&dst](const uint8_t* src, size_t n) {
                       std::memcpy(dst, src, n);
                       dst += n;
                     });
  }
  wire_longest_ = std::max(wire_longest_, fec::kLengthPrefix + kPnBytes + len + elided);
  // Repair credit: the overhead cap's share of every source packet.
  credit_ = std::min(credit_ + cfg_.policy.max_overhead, static_cast<double>(2 * fec::kMaxRepair));
  if (encoder_.full()) close_block(encoder_.m());
}

void FecCoder::flush() noexcept {
  if (!open_ || encoder_.sources() == 0) return;
  // A block cut short gets its share of the block's repair, rounded up, but
  // only as far as the credit goes: many short blocks (small messages)
  // would otherwise cost one repair each and break the overhead cap.
  const int k = encoder_.k(), c = encoder_.sources();
  const int share = std::max(1, (encoder_.m() * c + k - 1) / k);
  close_block(std::min(share, static_cast<int>(credit_)));
}

void FecCoder::close_block(int m) noexcept {
  open_ = false;
  if (m <= 0) {  // no credit: the block goes unprotected, retransmission covers it
    abandon_repair();
    return;
  }
  repair_len_ = encoder_.encode(m);
  repair_count_ = encoder_.m();
  repair_next_ = 0;
  credit_ = std::max(0.0, credit_ - repair_count_);
}

size_t FecCoder::repair_frame_size() const noexcept {
  return wire::kRepairFrameOverhead + repair_len_;
}

size_t FecCoder::write_repair(wire::FrameWriter& w, uint64_t pn, TimePoint now) noexcept {
  const int i = repair_next_++;
  uint8_t* dst = w.repair(block_, static_cast<uint8_t>(encoder_.sources()),
                          static_cast<uint8_t>(repair_count_), static_cast<uint8_t>(i),
                          static_cast<uint16_t>(repair_len_));
  std::memcpy(dst, encoder_.repair(i), repair_len_);
  BlockRecord& r = records_[block_ % kRecords];
  if (r.used && r.block == block_) {
    r.last_repair_pn = pn;
    r.last_repair_time = now;
    r.sent = repair_next_ == repair_count_;
  }
  return wire_longest_ > repair_len_ ? wire_longest_ - repair_len_ : 0;
}

void FecCoder::abandon_repair() noexcept {
  repair_count_ = repair_next_ = 0;
  BlockRecord& r = records_[block_ % kRecords];
  if (r.used && r.block == block_) r.used = false;
}

bool FecCoder::loss_reference(uint32_t block, uint64_t* pn, TimePoint* sent) const noexcept {
  const BlockRecord& r = records_[block % kRecords];
  if (!r.used || r.block != block) return true;  // long gone: the packet's own reference
  if (!r.sent) return false;
  *pn = std::max(*pn, r.last_repair_pn);
  *sent = std::max(*sent, r.last_repair_time);
  return true;
}

void FecCoder::update_rate(Duration srtt, Duration packet_time) noexcept {
  if (!enabled()) return;
  // A coded path re-chooses every 256 packets at most (the choice costs a few
  // microseconds); an uncoded one whenever asked (free while loss is zero).
  if (rate_.enabled() && packets_sent_ < sent_at_update_ + 256) return;
  sent_at_update_ = packets_sent_;
  fec::PathSample path;
  path.loss_rate = meter_.planning_loss_rate();
  path.mean_burst = meter_.mean_burst();
  path.rtt = srtt;
  path.packet_time = packet_time;
  rate_ = fec::choose_code_rate(path, cfg_.policy);
}

fec::Status FecCoder::on_source(uint32_t block, uint8_t index, uint64_t pn, const uint8_t* frames,
                                size_t len) noexcept {
  uint8_t head[kPnBytes];
  wire::put_u64(head, pn);
  return decoder_.add_source(block, index, frames, len, {head, kPnBytes});
}

fec::Status FecCoder::on_repair(const wire::RepairFrame& r) noexcept {
  return decoder_.add_repair(fec::RepairInfo{r.block, r.k, r.m, r.index}, r.data, r.length);
}

}  // namespace rowan::transport
