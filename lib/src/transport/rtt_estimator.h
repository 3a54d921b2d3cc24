// RTT estimation as in RFC 9002 §5: latest, min (over a window), smoothed and
// variance, with the peer's ack delay removed when that keeps the sample above
// min_rtt. Durations in nanoseconds.
#pragma once

#include <algorithm>

#include "base/units.h"

namespace rowan::transport {

class RttEstimator {
 public:
  explicit RttEstimator(Duration initial, Duration min_rtt_window = Duration::from_s(10))
      : initial_(initial), window_(min_rtt_window) {}

  /// One sample: `latest` = ack time − send time of the newest acked packet.
  void on_sample(Duration latest, Duration ack_delay, TimePoint now) {
    if (latest.ns() <= 0) latest = Duration::from_ns(1);
    latest_ = latest;
    if (min_rtt_.is_zero() || latest <= min_rtt_ || now - min_rtt_stamp_ > window_) {
      min_rtt_ = latest;
      min_rtt_stamp_ = now;
    }
    Duration adjusted = latest;
    if (latest >= min_rtt_ + ack_delay) adjusted = latest - ack_delay;
    if (!has_sample_) {
      has_sample_ = true;
      srtt_ = adjusted;
      rttvar_ = adjusted / 2;
      return;
    }
    const Duration diff = srtt_ > adjusted ? srtt_ - adjusted : adjusted - srtt_;
    rttvar_ = (rttvar_ * 3 + diff) / 4;
    srtt_ = (srtt_ * 7 + adjusted) / 8;
    adjusted_ = adjusted;
  }

  bool has_sample() const { return has_sample_; }
  Duration latest() const { return has_sample_ ? latest_ : initial_; }
  Duration smoothed() const { return has_sample_ ? srtt_ : initial_; }
  Duration rttvar() const { return has_sample_ ? rttvar_ : initial_ / 2; }
  Duration min_rtt() const { return min_rtt_; }  ///< zero before the first sample

 private:
  Duration initial_;
  Duration window_;
  bool has_sample_ = false;
  Duration latest_;
  Duration adjusted_;
  Duration min_rtt_;
  TimePoint min_rtt_stamp_;
  Duration srtt_;
  Duration rttvar_;
};

}  // namespace rowan::transport
