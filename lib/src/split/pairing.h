// Flow pairing for split mode, by PSN match: a flow starts in passthrough;
// the gateway notes the PSN of each request it forwards that a responder
// acknowledges (AckReq set or a message's end) together with the number of
// messages forwarded so far. When an ACK from the remote host for that flow's
// IP pair carries one of those PSNs, the flow is identified (the ACK's
// destination QP is the requester's QP) and the remote host's MSN gives the
// offset between its message count and ours, so the gateway can take over as
// responder at the next PSN with the MSN the remote host would have used.
//
// Retransmissions (PSNs before the next expected one) are not counted twice.
// Fixed memory (a ring of recent marks). Single-threaded: the packet lcore.
#pragma once

#include <array>
#include <cstdint>

#include "split/opcodes.h"

namespace rowan::split {

class PairingTracker {
 public:
  static constexpr uint32_t kMarks = 128;

  /// A request packet forwarded in passthrough toward the remote host.
  void on_forwarded(uint8_t opcode, uint32_t psn, bool ack_req, uint32_t dma_len,
                    uint32_t pmtu) noexcept;
  /// A plain ACK (syndrome class ACK) from the remote host for this IP pair,
  /// relayed to the requester. Returns whether its PSN matched a forwarded
  /// request (then matched() holds and next_msn() is valid).
  bool on_ack(uint32_t psn, uint32_t msn) noexcept;
  /// Paired before any data (RDMA CM REQ/REP, cm.h): the requester sends
  /// from `next_psn` and the remote host has completed `msn` messages.
  void preset(uint32_t next_psn, uint32_t msn) noexcept;

  bool matched() const { return matched_; }
  bool seen_any() const { return any_; }
  /// The PSN after the last forwarded request: where split mode would start.
  uint32_t next_psn() const { return next_psn_; }
  /// The remote host's MSN once everything before next_psn() is completed.
  uint32_t next_msn() const { return (msn_offset_ + msgs_) & roce::kPsnMask; }
  /// The last PSN a matched ACK acknowledged.
  uint32_t acked_through() const { return acked_through_; }
  /// Everything forwarded is acknowledged (no passthrough packet in flight).
  bool quiescent() const { return matched_ && roce::psn_add(acked_through_, 1) == next_psn_; }

 private:
  struct Mark {
    uint32_t psn = 0;   ///< last PSN of the request
    uint32_t msgs = 0;  ///< messages forwarded through it
  };
  std::array<Mark, kMarks> marks_{};
  uint32_t head_ = 0;  ///< next mark slot
  uint32_t nmarks_ = 0;
  uint32_t msgs_ = 0;  ///< messages forwarded (mod 2^24)
  uint32_t next_psn_ = 0;
  bool any_ = false;
  bool matched_ = false;
  uint32_t msn_offset_ = 0;
  uint32_t acked_through_ = 0;
};

}  // namespace rowan::split
