// Outage detection for one peer's WAN link (docs/faults.md): the link is up
// while something authentic was heard from the peer within `dead_after`, and
// every up→down transition is an outage whose length is measured from the
// last datagram heard before it to the first one after it. With SecureIo's
// persistent keepalive (one empty datagram a second each way) an idle link is
// heard too, so silence means the path or the peer is gone, not idleness —
// BFD's idea with the link's own datagrams.
//
// Thread: the packet lcore calls update() from housekeeping (every 100 ms);
// readers copy it in publish(). No allocation.
#pragma once

#include <cstdint>

#include "base/units.h"

namespace rowan::gw {

class PeerHealth {
 public:
  /// SecureIo's persistent keepalive on gateway links.
  static constexpr Duration kKeepalive = Duration::from_s(1);
  /// Silence longer than this is an outage: three keepalive intervals.
  static constexpr Duration kDeadAfter = kKeepalive * 3;
  /// The transport's probe timeout never backs off beyond this, so traffic
  /// resumes within about a second of the path coming back.
  static constexpr Duration kMaxProbeTimeout = Duration::from_s(1);

  /// `heard`: when the peer was last heard (zero: never). Call periodically.
  void update(TimePoint now, TimePoint heard) noexcept {
    const bool alive = !heard.is_zero() && now - heard < kDeadAfter;
    if (alive && !up_) {
      if (seen_) {  // back from an outage: it lasted from the last word before to now's
        last_outage_ = heard - down_since_;
        outage_total_ += last_outage_;
      }
      up_ = true;
      seen_ = true;
    } else if (!alive && up_) {
      up_ = false;
      ++outages_;
      down_since_ = heard;
    }
  }

  /// Heard within kDeadAfter at the last update.
  bool up() const noexcept { return up_; }
  /// Up at least once (before that the link is "waiting", not down).
  bool seen() const noexcept { return seen_; }
  /// Up→down transitions.
  uint64_t outages() const noexcept { return outages_; }
  /// Finished outages' total and the last one's length (zero: none yet).
  Duration outage_total() const noexcept { return outage_total_; }
  Duration last_outage() const noexcept { return last_outage_; }
  /// Silence so far of the outage under way (zero while up).
  Duration down_for(TimePoint now) const noexcept {
    return up_ || !seen_ ? Duration::zero() : now - down_since_;
  }

 private:
  bool up_ = false;
  bool seen_ = false;
  uint64_t outages_ = 0;
  TimePoint down_since_;
  Duration outage_total_ = Duration::zero();
  Duration last_outage_ = Duration::zero();
};

}  // namespace rowan::gw
