// Admission of a flow's packet into its peer's send buffer (passthrough,
// docs/gateway.md "Backpressure", docs/faults.md "Flows that start during an
// outage").
//
// The send buffer holds every byte written and not yet acknowledged by the
// peer gateway, within a budget (send_buffer_bdp × BDP). A flow whose packets
// are not drained (its sender outruns the WAN, or its receiver stalls) must not
// take the whole buffer, or every other flow finds it full:
//   - a flow may fill up to its fair share: the budget over the flows that
//     sent recently (`flows`);
//   - beyond its share only while an eighth of the budget (the reserve) stays
//     free for the others.
// A flow under its share may use the reserve while the link drains: what it
// takes comes back within an RTT. While the link does not drain (an outage:
// no acknowledgement for half a smoothed RTT plus 5 ms with data waiting)
// whatever is admitted stays until the link returns, so the reserve is then
// kept for flows that hold little: flows that start during the outage, such
// as a RoCE QP that opens while the WAN is down. Without that, the flows
// active when the outage began (their hosts' whole windows arrive in its
// first RTTs, each flow looking under its share) fill the reserve too, and a
// flow that starts during the outage loses most of its packets
// (bench/faults-long: 182 and 297 of 300 RoCE packets in two 30 s flaps).
//
// Threading: the packet lcore only. No allocation.
#pragma once

#include <cstdint>

#include "base/units.h"

namespace rowan::gw {

/// Whether a connection's send buffer drains. update() once per pass of the
/// packet loop (never per packet), right after the connection took in what
/// the link received, with its counters. stalled() answers as of that update,
/// not of a later `now`: a gateway descheduled for a while must first read the
/// ACKs that arrived meanwhile before it calls the link stalled.
class DrainWatch {
 public:
  /// Data waiting longer than half a smoothed RTT plus this with nothing
  /// acknowledged is a stall. Detection must be fast: the hosts' windows
  /// arrive within the first RTTs of an outage. Under load the peer ACKs every
  /// second packet within 1 ms, so a gap this long means the ACKs stopped; a
  /// lightly loaded link may look stalled between ACKs, which only matters
  /// when its buffer is nearly full (admit()).
  static constexpr Duration kSlack = Duration::from_ms(5);

  /// `delivered`: bytes the peer acknowledged so far (ConnStats::delivered_bytes);
  /// `unacked`: bytes written and not yet acknowledged; `srtt`: smoothed RTT.
  void update(TimePoint now, uint64_t delivered, Bytes unacked, Duration srtt) noexcept {
    if (unacked == 0 || delivered != delivered_) {
      delivered_ = delivered;
      progress_ = now;
    }
    stalled_ = now - progress_ > srtt / 2 + kSlack;
  }
  /// At the last update, data had waited longer than the limit with no
  /// acknowledgement.
  bool stalled() const noexcept { return stalled_; }

 private:
  uint64_t delivered_ = 0;
  TimePoint progress_;  ///< last acknowledgement, or last moment nothing waited
  bool stalled_ = false;
};

/// What admit() decides on: one record of `record` bytes of a flow that holds
/// `held` bytes unacknowledged, in a buffer with budget `capacity` of which
/// `free` bytes are free (what write() would accept), shared by `flows` flows
/// (at least 1) that sent recently.
struct AdmissionView {
  Bytes capacity = 0;
  Bytes free = 0;
  Bytes held = 0;
  Bytes record = 0;
  uint32_t flows = 1;
  bool stalled = false;  ///< DrainWatch::stalled()
};

/// The budget's part kept free for others: flows beyond their share never
/// take it; while the link is stalled, only flows holding little do.
inline Bytes admission_reserve(Bytes capacity) noexcept { return capacity / 8; }
/// While the link is stalled a flow may take reserve space only while it
/// holds at most this much (at least two new flows fit in the reserve).
inline Bytes admission_small_flow(Bytes capacity) noexcept { return capacity / 16; }

/// Whether the flow's record may be written (the caller still checks that
/// the buffer has the room: `free` >= `record`).
inline bool admit(const AdmissionView& v) noexcept {
  const Bytes reserve = admission_reserve(v.capacity);
  if (v.free >= v.record + reserve) return true;  // outside the reserve: anyone
  const uint32_t flows = v.flows == 0 ? 1 : v.flows;
  if (v.held + v.record > v.capacity / flows) return false;  // beyond its share
  if (!v.stalled) return true;  // under its share, and reserve space comes back
  return v.held + v.record <= admission_small_flow(v.capacity);
}

}  // namespace rowan::gw
