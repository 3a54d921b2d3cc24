// Classification of RC opcodes for split mode (IBA vol. 1 ch. 9.2, 9.7): what
// a packet means to the responder and the requester state machines.
#pragma once

#include <cstdint>

#include "codec/roce.h"

namespace rowan::split {

enum class ReqKind : uint8_t {
  kData,    ///< SEND or RDMA WRITE (first/middle/last/only, imm, inv), ATOMIC WRITE: the
            ///< gateway ACKs (an ATOMIC WRITE is answered with an ACK, like a WRITE)
  kRead,    ///< RDMA READ request, FLUSH (answered with a READ response only, IBA 1.5):
            ///< forwarded, answered by the remote host; a FLUSH spans one PSN
  kAtomic,  ///< compare-swap / fetch-add: forwarded, answered by the remote host
  kOther,   ///< not an RC request
};

constexpr ReqKind request_kind(uint8_t opcode) {
  if (opcode <= roce::op::kRcWriteOnlyImm) return ReqKind::kData;
  if (opcode == roce::op::kRcSendLastInv || opcode == roce::op::kRcSendOnlyInv ||
      opcode == roce::op::kRcAtomicWrite) {
    return ReqKind::kData;
  }
  if (opcode == roce::op::kRcReadRequest || opcode == roce::op::kRcFlush) return ReqKind::kRead;
  if (opcode == roce::op::kRcCompareSwap || opcode == roce::op::kRcFetchAdd) {
    return ReqKind::kAtomic;
  }
  return ReqKind::kOther;
}

/// Whether a request packet completes a message (last/only; READ and atomic
/// requests are one-packet messages). The responder's MSN counts these.
constexpr bool ends_message(uint8_t opcode) {
  switch (opcode) {
    case roce::op::kRcSendLast:
    case roce::op::kRcSendLastImm:
    case roce::op::kRcSendOnly:
    case roce::op::kRcSendOnlyImm:
    case roce::op::kRcWriteLast:
    case roce::op::kRcWriteLastImm:
    case roce::op::kRcWriteOnly:
    case roce::op::kRcWriteOnlyImm:
    case roce::op::kRcSendLastInv:
    case roce::op::kRcSendOnlyInv:
    case roce::op::kRcReadRequest:
    case roce::op::kRcCompareSwap:
    case roce::op::kRcFetchAdd:
    case roce::op::kRcFlush:
    case roce::op::kRcAtomicWrite:
      return true;
    default:
      return false;
  }
}

constexpr bool is_read_response(uint8_t opcode) {
  return opcode >= roce::op::kRcReadResponseFirst && opcode <= roce::op::kRcReadResponseOnly;
}

/// PSNs a request consumes: one per packet, and for a READ one per response
/// packet (ceil(dma_len / pmtu), at least one).
constexpr uint32_t psn_span(uint8_t opcode, uint32_t dma_len, uint32_t pmtu) {
  if (opcode != roce::op::kRcReadRequest || pmtu == 0) return 1;
  const uint32_t n = (dma_len + pmtu - 1) / pmtu;
  return n == 0 ? 1 : n;
}

/// AETH syndromes used by split mode.
namespace syndrome {
inline constexpr uint8_t kAckUnlimited = 0x1F;  ///< ACK, credit count invalid
constexpr uint8_t nak(roce::NakCode c) {
  return static_cast<uint8_t>(0x60 | static_cast<uint8_t>(c));
}
constexpr uint8_t rnr_nak(uint8_t timer) { return static_cast<uint8_t>(0x20 | (timer & 0x1F)); }
}  // namespace syndrome

/// The RNR NAK timer code (IBA table 45) as a duration, in microseconds.
constexpr int64_t rnr_timer_us(uint8_t code) {
  constexpr int64_t kUs[32] = {655360, 10,    20,    30,     40,     60,     80,     120,
                               160,    240,   320,   480,    640,    960,    1280,   1920,
                               2560,   3840,  5120,  7680,   10240,  15360,  20480,  30720,
                               40960,  61440, 81920, 122880, 163840, 245760, 327680, 491520};
  return kUs[code & 0x1F];
}

}  // namespace rowan::split
