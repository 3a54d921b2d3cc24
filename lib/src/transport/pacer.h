// Pacer: wraps whatever congestion controller the connection runs (quiche
// PacingSender) and decides when the next packet may leave.
//
// Release times are kept in nanoseconds (finer than the microsecond the issue
// asks for). After idle the pacer grants at most one send quantum of credit,
// so no burst exceeds the controller's send_quantum().
//
// Threading: owned by one connection; single-threaded.
#pragma once

#include "base/units.h"

namespace rowan::transport {

class Pacer {
 public:
  /// True when a packet may be released at `now`.
  bool ready(TimePoint now) const { return next_release_ <= now; }
  /// Earliest time the next packet may leave.
  TimePoint release_time() const { return next_release_; }

  /// After a packet of `bytes` left at `now`, paced at `rate` with bursts of
  /// at most `quantum` bytes (`mss`: the connection's packet size). A zero rate
  /// means "unpaced": only the congestion window limits sending.
  void on_sent(TimePoint now, Bytes bytes, BitsPerSec rate, Bytes quantum, Bytes mss) {
    if (rate.is_zero() || rate == BitsPerSec::infinite()) {
      next_release_ = now;
      return;
    }
    // Credit for a burst: a quantum minus the packet the burst starts with.
    const Duration credit = rate.transfer_time(quantum > mss ? quantum - mss : 0);
    TimePoint base = next_release_;
    if (base < now - credit) base = now - credit;
    next_release_ = base + rate.transfer_time(bytes);
  }

 private:
  TimePoint next_release_;
};

}  // namespace rowan::transport
