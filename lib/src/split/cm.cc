#include "split/cm.h"

#include <cstring>

namespace rowan::split {
namespace {

uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
uint32_t be24(const uint8_t* p) {
  return (static_cast<uint32_t>(p[0]) << 16) | (static_cast<uint32_t>(p[1]) << 8) | p[2];
}
uint32_t be32(const uint8_t* p) { return (be24(p) << 8) | p[3]; }

roce::IpAddr clean(const roce::IpAddr& a) {
  roce::IpAddr r;
  r.version = a.version;
  std::memcpy(r.bytes.data(), a.bytes.data(), a.version == 6 ? 16 : 4);
  return r;
}

// Offsets in the CM message (after the MAD header), IBA 12.6.
constexpr size_t kReqLocalQpn = 32;
constexpr size_t kReqStartPsn = 44;
constexpr size_t kReqMtu = 50;  // high nibble
constexpr size_t kRepLocalQpn = 12;
constexpr size_t kRepStartPsn = 20;
constexpr size_t kDreqRemoteQpn = 8;

}  // namespace

bool parse_cm(const roce::RocePacket& p, CmMessage& out) noexcept {
  if (p.bth.opcode != roce::op::kUdSendOnly || p.bth.dest_qp != kCmQp) return false;
  if (!p.has(roce::kHasDeth) || p.payload_len < kMadHeaderLen + 64) return false;
  const uint8_t* mad = p.data + p.payload_off;
  if (mad[0] != 1 || mad[1] != kMadClassCm) return false;  // base version, class
  const uint16_t attr = be16(mad + 16);
  const uint8_t* m = mad + kMadHeaderLen;
  out = CmMessage{};
  out.attr = attr;
  out.local_comm_id = be32(m);
  switch (attr) {
    case cm_attr::kReq:
      out.local_qpn = be24(m + kReqLocalQpn);
      out.starting_psn = be24(m + kReqStartPsn);
      out.pmtu = mtu_from_code(static_cast<uint8_t>(m[kReqMtu] >> 4));
      return true;
    case cm_attr::kRep:
      out.remote_comm_id = be32(m + 4);
      out.local_qpn = be24(m + kRepLocalQpn);
      out.starting_psn = be24(m + kRepStartPsn);
      return true;
    case cm_attr::kDreq:
      out.remote_comm_id = be32(m + 4);
      out.remote_qpn = be24(m + kDreqRemoteQpn);
      return true;
    case cm_attr::kRej:
    case cm_attr::kRtu:
    case cm_attr::kDrep:
    case cm_attr::kMra:
      out.remote_comm_id = be32(m + 4);
      return true;
    default:
      return false;
  }
}

CmTracker::Slot* CmTracker::find_by_active(const roce::IpAddr& active, const roce::IpAddr& passive,
                                           uint32_t active_comm) noexcept {
  if (n_ == 0) return nullptr;
  for (Slot& s : slots_) {
    if (s.used && s.c.active_comm_id == active_comm && s.c.active == active &&
        s.c.passive == passive) {
      return &s;
    }
  }
  return nullptr;
}

CmTracker::Slot* CmTracker::find_by_any(const roce::IpAddr& from, const roce::IpAddr& to,
                                        uint32_t local_comm, uint32_t remote_comm) noexcept {
  // From the active side its own comm ID is the local one; from the passive
  // side the active's is the remote one (a REJ of a REQ included).
  if (Slot* s = find_by_active(from, to, local_comm)) return s;
  return find_by_active(to, from, remote_comm);
}

CmEvent CmTracker::on_message(const roce::RocePacket& p, const CmMessage& m, uint8_t user,
                              TimePoint now, CmConnection* conn) noexcept {
  const roce::IpAddr src = clean(p.src);
  const roce::IpAddr dst = clean(p.dst);
  switch (m.attr) {
    case cm_attr::kReq: {
      if (Slot* s = find_by_active(src, dst, m.local_comm_id)) {  // retransmitted REQ
        s->c.seen = now;
        s->c.user |= user;
        return CmEvent::kNone;
      }
      Slot* free = nullptr;
      Slot* oldest = nullptr;
      for (Slot& s : slots_) {
        if (!s.used) {
          free = &s;
          break;
        }
        if (oldest == nullptr || s.c.seen < oldest->c.seen) oldest = &s;
      }
      if (free == nullptr) {  // full: the oldest connection gives way
        free = oldest;
        --n_;
      }
      free->used = true;
      free->c = CmConnection{};
      free->c.active = src;
      free->c.passive = dst;
      free->c.active_comm_id = m.local_comm_id;
      free->c.active_qpn = m.local_qpn;
      free->c.passive_psn = m.starting_psn;
      free->c.pmtu = m.pmtu;
      free->c.user = user;
      free->c.seen = now;
      ++n_;
      if (conn != nullptr) *conn = free->c;
      return CmEvent::kRequest;
    }
    case cm_attr::kRep: {
      Slot* s = find_by_active(dst, src, m.remote_comm_id);
      if (s == nullptr) return CmEvent::kNone;
      s->c.seen = now;
      s->c.user |= user;
      if (s->c.established) return CmEvent::kNone;  // a retransmitted REP
      s->c.established = true;
      s->c.passive_comm_id = m.local_comm_id;
      s->c.passive_qpn = m.local_qpn;
      s->c.active_psn = m.starting_psn;
      if (conn != nullptr) *conn = s->c;
      return CmEvent::kPaired;
    }
    case cm_attr::kRej:
    case cm_attr::kDreq:
    case cm_attr::kDrep: {
      Slot* s = find_by_any(src, dst, m.local_comm_id, m.remote_comm_id);
      if (s == nullptr) return CmEvent::kNone;
      if (conn != nullptr) *conn = s->c;
      s->used = false;
      --n_;
      return CmEvent::kReleased;
    }
    default:  // RTU, MRA
      if (Slot* s = find_by_any(src, dst, m.local_comm_id, m.remote_comm_id)) s->c.seen = now;
      return CmEvent::kNone;
  }
}

const CmConnection* CmTracker::find_qp(const roce::IpAddr& host, uint32_t qpn) const noexcept {
  if (n_ == 0) return nullptr;
  for (const Slot& s : slots_) {
    if (!s.used || !s.c.established) continue;
    if ((s.c.active_qpn == qpn && s.c.active == host) ||
        (s.c.passive_qpn == qpn && s.c.passive == host)) {
      return &s.c;
    }
  }
  return nullptr;
}

uint32_t CmTracker::expire(TimePoint cutoff) noexcept {
  uint32_t n = 0;
  if (n_ == 0) return 0;
  for (Slot& s : slots_) {
    if (s.used && s.c.seen < cutoff) {
      s.used = false;
      --n_;
      ++n;
    }
  }
  return n;
}

}  // namespace rowan::split
