// How busy a packet loop is: the time of its passes that found work against
// those that found none (and slept), for rowan_worker_busy_seconds_total /
// _idle_seconds_total and the rowan_worker_busy_ratio gauge.
//
// The loop reads the clock once per pass already; each pass's time runs from
// its `now` to the next pass's `now` and counts as busy when the pass did work,
// idle when it did not (the sleep that follows an idle pass is in that time).
// No clock reads of its own, no allocation: on_pass() is two additions.
// Threading: the packet-loop thread only (publish() copies the values out).
#pragma once

#include "base/units.h"

namespace rowan::gw {

class BusyMeter {
 public:
  /// The ratio gauge covers about this much of the recent past.
  static constexpr Duration kWindow = Duration::from_s(1);

  /// At the start of each pass, with that pass's `now`, and whether the
  /// previous pass did work.
  void on_pass(TimePoint now, bool previous_worked) noexcept {
    if (started_) {
      const Duration d = now - last_;
      if (previous_worked) {
        busy_ += d;
      } else {
        idle_ += d;
      }
    } else {
      started_ = true;
      window_start_ = now;
    }
    last_ = now;
    if (now - window_start_ >= kWindow) {
      const Duration busy = busy_ - window_busy_;
      const Duration all = (busy_ + idle_) - (window_busy_ + window_idle_);
      ratio_ = all.is_zero() ? 0 : busy.seconds() / all.seconds();
      window_start_ = now;
      window_busy_ = busy_;
      window_idle_ = idle_;
    }
  }

  Duration busy() const noexcept { return busy_; }
  Duration idle() const noexcept { return idle_; }
  /// Busy share (0..1) of the last full window.
  double busy_ratio() const noexcept { return ratio_; }

 private:
  bool started_ = false;
  TimePoint last_;
  Duration busy_, idle_;
  TimePoint window_start_;
  Duration window_busy_, window_idle_;
  double ratio_ = 0;
};

}  // namespace rowan::gw
