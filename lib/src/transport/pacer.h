// Pacer: wraps whatever congestion controller the connection runs (quiche
// PacingSender) and decides when the next packet may leave.
//
// Release times are kept in nanoseconds. After idle the pacer grants at most
// one send quantum of credit, so no burst exceeds the controller's
// send_quantum(). A sender that the pacer alone held back, with data waiting
// and room in its window (hold()), and that then ran late, woke past the
// release time because its host did (a timer's slack, a shared CPU, a
// sleeping event loop): it sends what it owed since the release time, back
// to back, up to twice the lateness it has seen so far (an EWMA) and never
// more than kMaxOwed. Granting one quantum there made the host's
// lateness the rate: an event loop that slept 80 us per wake-up at a 25 us
// quantum sent a third of the paced rate, and the delivery rate, the model
// and the pacing rate followed it down. The paced rate is still the average:
// the catch-up ends once the release time is in the future again, and a
// sender that ran out of data (idle()) starts over from one quantum.
//
// Threading: owned by one connection; single-threaded.
#pragma once

#include <algorithm>

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
      owed_ = false;
      return;
    }
    // Credit for a burst: a quantum minus the packet the burst starts with,
    // or what a late wake-up owes (up to kMaxOwed).
    Duration credit = rate.transfer_time(quantum > mss ? quantum - mss : 0);
    if (owed_ && now > next_release_) {
      if (!catching_up_) {
        // The catch-up is bounded by twice the lateness seen before this
        // one, so that a stall of another kind (the loop not sending for a
        // handshake, a full socket) is not taken for a late timer.
        const Duration late = std::min(now - next_release_, kMaxOwed);
        owed_cap_ = std::min(late_ * 2, kMaxOwed);
        late_ = late_ + (late - late_) / 8;
        catching_up_ = true;
      }
      credit = std::max(credit, std::min(now - next_release_, owed_cap_));
    }
    TimePoint base = next_release_;
    if (base < now - credit) base = now - credit;
    next_release_ = base + rate.transfer_time(bytes);
    if (next_release_ >= now) {  // caught up
      owed_ = false;
      catching_up_ = false;
    }
  }
  /// The sender has data and window and waits for this pacer alone.
  void hold() { owed_ = true; }
  /// The sender has nothing to send: after idle, one quantum again.
  void idle() {
    owed_ = false;
    catching_up_ = false;
  }
  bool owed() const { return owed_; }
  /// EWMA (1/8) of how late a held sender woke past its release time.
  Duration lateness() const { return late_; }

  /// The most a late sender catches up at once (the flagship's send quantum
  /// covers up to 2 ms of a host's lateness for the same reason).
  static constexpr Duration kMaxOwed = Duration::from_ms(2);

 private:
  TimePoint next_release_;
  bool owed_ = false;
  bool catching_up_ = false;
  Duration late_;      ///< EWMA of the lateness of held senders
  Duration owed_cap_;  ///< the current catch-up's bound
};

}  // namespace rowan::transport
