// MTU translation for split mode: the gateways carry data, not packets.
//
// The two hosts of a split flow may use different path MTUs (e.g. 4096 on
// the requester's site, 1024 on the responder's). The ingress gateway acts
// as the responder in the requester's PSN space ("in" space: its packets,
// its MTU) and needs no translation. The egress gateway re-segments:
//
//  - RequestSegmenter: the requester's SEND/WRITE packets (in-space PSNs,
//    in-MTU payloads) become packets of the out-MTU with the egress's own,
//    consecutive PSNs (out space, what the remote responder expects), the
//    message structure kept: FIRST/MIDDLE payloads exactly one out-MTU, the
//    RETH on the first (or only) packet, immediate data / invalidate R_Key,
//    SE on the last; AckReq on the piece that ends an input packet that asked.
//    Larger in-MTU: one input packet → several; smaller: several → one (the
//    bytes wait in an assembly buffer until an out-MTU is full or the
//    message ends). READ and atomic requests keep their fields; a READ
//    spans ceil(DMA length / out-MTU) out-PSNs. The MSN needs no mapping
//    (it counts messages, which re-segmentation keeps).
//  - ResponseSegmenter: READ responses come back in out space at out-MTU;
//    the requester needs them in its own space at its MTU, starting at the
//    READ's in-PSN: the same assembly, with the AETH (syndrome, MSN) of the
//    first and last response. Atomic ACKs get the atomic's in-PSN.
//  - in_psn_of(): maps an out-PSN back to the in-PSN whose data starts that
//    packet (a NAK from the remote host reported toward the requester).
//
// ACKs from the remote host free the egress's copies in out space (the
// Requester works in out space unchanged); the requester's ACKs come from
// the ingress in in space. PSNs are 24-bit and wrap.
//
// Memory: fixed (one assembly buffer of 4096 bytes, rings of kMapEntries
// input packets and kReads READs/atomics); no allocation. Emission is through
// a callable taking a `const roce::FrameSpec&` (a bare IP packet with the
// input's addresses, UDP source port, TOS, TTL, P_Key and destination QP)
// whose payload span is valid only during the call: build the packet there
// (roce::build computes the new ICRC). Single-threaded: the packet lcore only.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <span>

#include "split/opcodes.h"

namespace rowan::split {

inline constexpr uint32_t kMaxPmtu = 4096;

/// Cuts a message's bytes into pieces of exactly `mtu`, except the last.
/// A full piece is handed out as soon as more bytes of the message are
/// known to follow; the last one when the message ends.
class Assembler {
 public:
  void reset(uint32_t mtu) noexcept {
    mtu_ = mtu == 0 || mtu > kMaxPmtu ? kMaxPmtu : mtu;
    len_ = 0;
    started_ = false;
  }
  /// `emit(std::span<const uint8_t> payload, bool first, bool end, bool last_of_input)`.
  template <typename Emit>
  void add(std::span<const uint8_t> data, bool end, Emit&& emit) {
    while (!data.empty()) {
      const uint32_t n = std::min<uint32_t>(mtu_ - len_, static_cast<uint32_t>(data.size()));
      std::memcpy(buf_.data() + len_, data.data(), n);
      len_ += n;
      data = data.subspan(n);
      if (len_ == mtu_ && (!data.empty() || !end)) {
        emit(std::span<const uint8_t>(buf_.data(), len_), !started_, false, data.empty());
        started_ = true;
        len_ = 0;
      }
    }
    if (end) {
      emit(std::span<const uint8_t>(buf_.data(), len_), !started_, true, true);
      started_ = false;
      len_ = 0;
    }
  }
  bool mid_message() const { return started_ || len_ > 0; }
  uint32_t held() const { return len_; }
  uint32_t mtu() const { return mtu_; }

 private:
  std::array<uint8_t, kMaxPmtu> buf_{};
  uint32_t mtu_ = kMaxPmtu;
  uint32_t len_ = 0;
  bool started_ = false;
};

/// A READ or atomic as both spaces see it.
struct MappedRead {
  uint32_t in_psn = 0;
  uint32_t out_psn = 0;
  uint32_t out_span = 1;
  uint32_t dma_len = 0;
  bool atomic = false;
};

class RequestSegmenter {
 public:
  static constexpr uint32_t kMapEntries = 1024;
  static constexpr uint32_t kReads = 32;

  /// Starts both spaces: the first input packet has in-PSN `in_psn` and its
  /// first piece gets `out_psn`; pieces carry at most `out_mtu` bytes. The
  /// requester's `in_mtu` gives a READ's span in its own space.
  void start(uint32_t in_psn, uint32_t out_psn, uint32_t in_mtu, uint32_t out_mtu) noexcept;

  /// One request packet `p` of the requester, in PSN order (the WAN stream
  /// is ordered). Returns false when it is not the next in-PSN (a
  /// retransmission the egress already has: the caller drops it) or not a
  /// request. Otherwise `emit(const roce::FrameSpec&)` ran for every piece.
  template <typename Emit>
  bool feed(const roce::RocePacket& p, Emit&& emit);

  /// The in-PSN whose data starts the out-packet `out_psn` (for a READ or
  /// atomic: that request). False when it is older than the map remembers.
  bool in_psn_of(uint32_t out_psn, uint32_t* in_psn) const noexcept;
  /// The READ/atomic whose out-PSN range holds `out_psn`.
  const MappedRead* read_at(uint32_t out_psn) const noexcept;
  /// The READ/atomic the requester sent at `in_psn`.
  const MappedRead* read_in(uint32_t in_psn) const noexcept;

  /// A READ/atomic request the requester sent again (its in-PSN is behind
  /// next_in_psn()): emits it at its out-PSN so the remote host answers it
  /// again. False when the map no longer knows it.
  template <typename Emit>
  bool reissue(const roce::RocePacket& p, Emit&& emit) const;

  uint32_t next_in_psn() const { return next_in_; }
  uint32_t next_out_psn() const { return next_out_; }
  uint32_t out_mtu() const { return asm_.mtu(); }
  uint32_t in_mtu() const { return in_mtu_; }

 private:
  struct Mark {
    uint32_t in_psn = 0;
    uint32_t out_psn = 0;  ///< where its first byte (or request) lands
  };
  void mark(uint32_t in_psn, uint32_t out_psn) noexcept;

  Assembler asm_;
  uint32_t in_mtu_ = 1024;
  uint32_t next_in_ = 0;
  uint32_t next_out_ = 0;
  bool is_write_ = false;
  roce::Reth reth_;  ///< of the message being cut (WRITE)
  std::array<Mark, kMapEntries> marks_{};
  uint32_t mark_head_ = 0;
  uint32_t nmarks_ = 0;
  std::array<MappedRead, kReads> reads_{};
  uint32_t read_head_ = 0;
  uint32_t nreads_ = 0;
};

/// READ responses (and atomic ACKs) from the remote host, out space → in
/// space, re-cut to the requester's MTU.
class ResponseSegmenter {
 public:
  void start(uint32_t in_mtu) noexcept {
    asm_.reset(in_mtu);
    cur_ = nullptr;
  }
  /// A response `p` from the remote host; `map` knows its READ. Returns
  /// false when it belongs to no known READ/atomic or comes out of order
  /// (the caller drops it: the requester's own retry recovers).
  template <typename Emit>
  bool feed(const roce::RocePacket& p, const RequestSegmenter& map, Emit&& emit);

 private:
  Assembler asm_;
  const MappedRead* cur_ = nullptr;
  MappedRead read_;          ///< a copy of the READ being answered
  uint32_t expect_out_ = 0;  ///< next response out-PSN
  uint32_t next_in_ = 0;     ///< next in-PSN to hand out
  roce::Aeth first_aeth_;
};

// ---------------------------------------------------------------------------

namespace detail {
/// The opcode of a piece: SEND or WRITE, where in the message, and the
/// suffix (immediate / invalidate) of the input's last or only packet.
constexpr uint8_t piece_opcode(bool write, bool first, bool end, uint8_t in_op) {
  namespace op = roce::op;
  const bool imm = in_op == op::kRcSendLastImm || in_op == op::kRcSendOnlyImm ||
                   in_op == op::kRcWriteLastImm || in_op == op::kRcWriteOnlyImm;
  const bool inv = in_op == op::kRcSendLastInv || in_op == op::kRcSendOnlyInv;
  if (write) {
    if (first && end) return imm ? op::kRcWriteOnlyImm : op::kRcWriteOnly;
    if (first) return op::kRcWriteFirst;
    if (!end) return op::kRcWriteMiddle;
    return imm ? op::kRcWriteLastImm : op::kRcWriteLast;
  }
  if (first && end) return imm ? op::kRcSendOnlyImm : (inv ? op::kRcSendOnlyInv : op::kRcSendOnly);
  if (first) return op::kRcSendFirst;
  if (!end) return op::kRcSendMiddle;
  return imm ? op::kRcSendLastImm : (inv ? op::kRcSendLastInv : op::kRcSendLast);
}
/// A bare IP packet spec with `p`'s addresses, ports and IP fields.
inline roce::FrameSpec spec_like(const roce::RocePacket& p) {
  roce::FrameSpec s;
  s.with_eth = false;
  s.src = p.src;
  s.dst = p.dst;
  s.ttl = p.ttl;
  s.tos = p.tos;
  s.udp_sport = p.udp_sport;
  return s;
}
constexpr bool is_write(uint8_t op) {
  return op >= roce::op::kRcWriteFirst && op <= roce::op::kRcWriteOnlyImm;
}
constexpr bool starts(uint8_t op) {
  namespace o = roce::op;
  return op == o::kRcSendFirst || op == o::kRcSendOnly || op == o::kRcSendOnlyImm ||
         op == o::kRcSendOnlyInv || op == o::kRcWriteFirst || op == o::kRcWriteOnly ||
         op == o::kRcWriteOnlyImm;
}
}  // namespace detail

template <typename Emit>
bool RequestSegmenter::feed(const roce::RocePacket& p, Emit&& emit) {
  const uint8_t op = p.bth.opcode;
  const ReqKind kind = request_kind(op);
  if (kind == ReqKind::kOther || p.bth.psn != next_in_) return false;
  roce::FrameSpec s = detail::spec_like(p);
  if (kind != ReqKind::kData) {
    if (asm_.mid_message()) asm_.reset(asm_.mtu());  // cannot happen on a sane QP
    const uint32_t span = psn_span(op, p.reth.dma_len, asm_.mtu());
    MappedRead& r = reads_[(read_head_ + nreads_) % kReads];
    if (nreads_ == kReads) {
      read_head_ = (read_head_ + 1) % kReads;
    } else {
      ++nreads_;
    }
    r = MappedRead{p.bth.psn, next_out_, span, p.reth.dma_len, kind == ReqKind::kAtomic};
    mark(p.bth.psn, next_out_);
    s.bth = p.bth;
    s.bth.psn = next_out_;
    s.reth = p.reth;
    s.atomic_eth = p.atomic_eth;
    s.feth = p.feth;
    emit(static_cast<const roce::FrameSpec&>(s));
    next_out_ = roce::psn_add(next_out_, span);
    next_in_ = roce::psn_add(next_in_, psn_span(op, p.reth.dma_len, in_mtu_));
    return true;
  }
  if (op == roce::op::kRcAtomicWrite) {  // 8 bytes in one packet: fits every MTU, as it is
    if (asm_.mid_message()) asm_.reset(asm_.mtu());
    mark(p.bth.psn, next_out_);
    s.bth = p.bth;
    s.bth.psn = next_out_;
    s.reth = p.reth;
    s.payload = p.payload();
    emit(static_cast<const roce::FrameSpec&>(s));
    next_out_ = roce::psn_add(next_out_, 1);
    next_in_ = roce::psn_add(next_in_, 1);
    return true;
  }
  if (detail::starts(op)) {
    if (asm_.mid_message()) asm_.reset(asm_.mtu());
    is_write_ = detail::is_write(op);
    reth_ = p.reth;
  }
  mark(p.bth.psn, next_out_);
  const bool end = ends_message(op);
  asm_.add(p.payload(), end,
           [&](std::span<const uint8_t> payload, bool first, bool last, bool last_of_input) {
             s.bth = roce::Bth{};
             s.bth.pkey = p.bth.pkey;
             s.bth.dest_qp = p.bth.dest_qp;
             s.bth.opcode = detail::piece_opcode(is_write_, first, last, op);
             s.bth.psn = next_out_;
             s.bth.ack_req = last_of_input && p.bth.ack_req;
             s.bth.se = last && p.bth.se;
             s.reth = is_write_ && first ? reth_ : roce::Reth{};
             s.immdt = last ? p.immdt : 0;
             s.ieth = last ? p.ieth : 0;
             s.payload = payload;
             emit(static_cast<const roce::FrameSpec&>(s));
             next_out_ = roce::psn_add(next_out_, 1);
           });
  next_in_ = roce::psn_add(next_in_, 1);
  return true;
}

template <typename Emit>
bool RequestSegmenter::reissue(const roce::RocePacket& p, Emit&& emit) const {
  if (request_kind(p.bth.opcode) == ReqKind::kData) return false;
  const MappedRead* r = read_in(p.bth.psn);
  if (r == nullptr) return false;
  roce::FrameSpec s = detail::spec_like(p);
  s.bth = p.bth;
  s.bth.psn = r->out_psn;
  s.reth = p.reth;
  s.atomic_eth = p.atomic_eth;
  s.feth = p.feth;
  emit(static_cast<const roce::FrameSpec&>(s));
  return true;
}

template <typename Emit>
bool ResponseSegmenter::feed(const roce::RocePacket& p, const RequestSegmenter& map, Emit&& emit) {
  namespace op = roce::op;
  const uint8_t o = p.bth.opcode;
  roce::FrameSpec s = detail::spec_like(p);
  if (o == op::kRcAtomicAck) {
    const MappedRead* r = map.read_at(p.bth.psn);
    if (r == nullptr || !r->atomic) return false;
    s.bth = p.bth;
    s.bth.psn = r->in_psn;
    s.aeth = p.aeth;
    s.atomic_ack = p.atomic_ack;
    emit(static_cast<const roce::FrameSpec&>(s));
    return true;
  }
  if (!is_read_response(o)) return false;
  const bool first = o == op::kRcReadResponseFirst || o == op::kRcReadResponseOnly;
  const bool end = o == op::kRcReadResponseLast || o == op::kRcReadResponseOnly;
  if (first) {
    const MappedRead* r = map.read_at(p.bth.psn);
    if (r == nullptr || r->atomic || r->out_psn != p.bth.psn) return false;
    read_ = *r;
    cur_ = &read_;
    asm_.reset(asm_.mtu());
    expect_out_ = p.bth.psn;
    next_in_ = r->in_psn;
    first_aeth_ = p.aeth;
  } else if (cur_ == nullptr || p.bth.psn != expect_out_) {
    return false;
  }
  expect_out_ = roce::psn_add(expect_out_, 1);
  asm_.add(p.payload(), end,
           [&](std::span<const uint8_t> payload, bool pfirst, bool plast, bool /*last_of_input*/) {
             s.bth = roce::Bth{};
             s.bth.pkey = p.bth.pkey;
             s.bth.dest_qp = p.bth.dest_qp;
             s.bth.opcode = pfirst && plast ? op::kRcReadResponseOnly
                            : pfirst        ? op::kRcReadResponseFirst
                            : plast         ? op::kRcReadResponseLast
                                            : op::kRcReadResponseMiddle;
             s.bth.psn = next_in_;
             s.aeth = plast ? p.aeth : first_aeth_;
             s.payload = payload;
             emit(static_cast<const roce::FrameSpec&>(s));
             next_in_ = roce::psn_add(next_in_, 1);
           });
  if (end) cur_ = nullptr;
  return true;
}

}  // namespace rowan::split
