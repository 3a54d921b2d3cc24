// RDMA CM on QP1 (IBA vol. 1 ch. 12 "Communication Management", 12.6 message
// formats; Linux drivers/infiniband/core/cm_msgs.h; Wireshark's
// packet-infiniband.c): the connection set-up and teardown MADs that the
// gateway reads to pair a split flow before any data.
//
// A CM MAD is a RoCEv2 UD SEND only (opcode 0x64) to QP 1 with a DETH; its
// payload is a 256-byte MAD: a 24-byte common header (base version 1,
// management class 0x07 ConnectionManager, class version 2, method, status,
// transaction ID, attribute ID, attribute modifier), then the CM message.
//
// What the messages carry (verified against Linux soft-RoCE captures in
// tests/fixtures/rxe): the REQ (attribute 0x0010) comes from the active side
// with its local QPN, the path MTU and a starting PSN that is the PSN the
// PASSIVE side sends from (the active side's receive PSN); the REP (0x0013)
// comes from the passive side with its local QPN and the PSN the ACTIVE side
// sends from. RTU (0x0014) completes the set-up; DREQ (0x0015) and DREP
// (0x0016) tear it down; REJ (0x0012) refuses it.
//
// CmTracker pairs REQ and REP by communication ID (REP's remote comm ID is
// REQ's local comm ID) and the address pair, and finds a connection again
// on DREQ/DREP/REJ. Fixed memory (kConns entries); no allocation; the packet
// lcore only.
#pragma once

#include <array>
#include <cstdint>

#include "base/units.h"
#include "codec/roce.h"

namespace rowan::split {

/// CM attribute IDs (IBA table 212).
namespace cm_attr {
inline constexpr uint16_t kReq = 0x0010;
inline constexpr uint16_t kMra = 0x0011;
inline constexpr uint16_t kRej = 0x0012;
inline constexpr uint16_t kRep = 0x0013;
inline constexpr uint16_t kRtu = 0x0014;
inline constexpr uint16_t kDreq = 0x0015;
inline constexpr uint16_t kDrep = 0x0016;
}  // namespace cm_attr

inline constexpr uint8_t kMadClassCm = 0x07;
inline constexpr uint32_t kCmQp = 1;
inline constexpr size_t kMadHeaderLen = 24;
inline constexpr size_t kMadLen = 256;

/// The fields of a CM message the gateway uses. Which are valid depends on
/// `attr` (see each field).
struct CmMessage {
  uint16_t attr = 0;
  uint32_t local_comm_id = 0;   ///< every message
  uint32_t remote_comm_id = 0;  ///< all but REQ
  uint32_t local_qpn = 0;       ///< REQ, REP: the sender's QP
  uint32_t starting_psn = 0;    ///< REQ: the passive side's send PSN; REP: the active side's
  uint32_t pmtu = 0;            ///< REQ: path MTU in bytes (0: unknown code)
  uint32_t remote_qpn = 0;      ///< DREQ: the receiver's QP
};

/// Path MTU code (IBA table 224: 1 = 256 ... 5 = 4096) in bytes; 0 if invalid.
constexpr uint32_t mtu_from_code(uint8_t code) { return code >= 1 && code <= 5 ? 128U << code : 0; }
/// The inverse: bytes → code, 0 if not one of the five MTUs.
constexpr uint8_t mtu_code(uint32_t bytes) {
  for (uint8_t c = 1; c <= 5; ++c) {
    if (mtu_from_code(c) == bytes) return c;
  }
  return 0;
}

/// Whether `p` is a CM MAD (UD SEND only to QP 1, class 0x07) with one of
/// the attributes above, long enough for its fields; fills `out`.
bool parse_cm(const roce::RocePacket& p, CmMessage& out) noexcept;

/// A connection as the tracker knows it: "active" sent the REQ.
struct CmConnection {
  roce::IpAddr active;
  roce::IpAddr passive;
  uint32_t active_comm_id = 0;
  uint32_t passive_comm_id = 0;
  uint32_t active_qpn = 0;
  uint32_t passive_qpn = 0;
  uint32_t active_psn = 0;   ///< first PSN the active side sends (from the REP)
  uint32_t passive_psn = 0;  ///< first PSN the passive side sends (from the REQ)
  uint32_t pmtu = 0;         ///< from the REQ
  bool established = false;  ///< REP seen
  uint8_t user = 0;          ///< the caller's bits, kept with the connection
  TimePoint seen;            ///< last message
};

enum class CmEvent : uint8_t {
  kNone,      ///< not a CM MAD, or nothing to do (RTU, MRA, a retransmitted REQ)
  kRequest,   ///< a new REQ: the connection is pending
  kPaired,    ///< a REP completed a pending REQ: both QPNs and PSNs known
  kReleased,  ///< DREQ, DREP or REJ: the connection is gone (was established or pending)
};

class CmTracker {
 public:
  /// Connections followed at once: as many as split flows (the engine's
  /// 4,096). Lookups scan them (a few µs per CM MAD at 4,096; MADs come per
  /// connection set-up and teardown, never per data packet).
  static constexpr uint32_t kConns = 4096;

  /// A CM MAD `m` seen at `now` (in either direction). `user`: stored with a
  /// new connection (REQ) and OR-ed into it on later messages. On kPaired
  /// and kReleased, `*conn` is the connection (a copy; a released one is
  /// already forgotten).
  CmEvent on_message(const roce::RocePacket& p, const CmMessage& m, uint8_t user, TimePoint now,
                     CmConnection* conn) noexcept;

  /// Forgets connections that have seen no message since `cutoff` (REQs
  /// never answered; established ones are kept until DREQ/REJ, or this).
  uint32_t expire(TimePoint cutoff) noexcept;

  /// The established connection in which `host` owns QP `qpn`, if known.
  const CmConnection* find_qp(const roce::IpAddr& host, uint32_t qpn) const noexcept;

  uint32_t size() const { return n_; }

 private:
  struct Slot {
    bool used = false;
    CmConnection c;
  };
  Slot* find_by_active(const roce::IpAddr& active, const roce::IpAddr& passive,
                       uint32_t active_comm) noexcept;
  Slot* find_by_any(const roce::IpAddr& from, const roce::IpAddr& to, uint32_t local_comm,
                    uint32_t remote_comm) noexcept;
  std::array<Slot, kConns> slots_{};
  uint32_t n_ = 0;
};

}  // namespace rowan::split
