// Delivery-rate sampling and packet-timed rounds, as Linux tcp_rate.c does
// (and draft-cheng-iccrg-delivery-rate-estimation): each packet records, when
// it leaves, the path's delivered count and time and the first-sent time of
// its flight; on ACK the newest-sent acked packet gives one sample
//   delivered now − delivered then over max(send interval, ACK interval),
// discarded when that interval is below min RTT (a compressed ACK). A round
// ends when a packet sent after the previous round's end is acked.
//
// Units: bytes (wire bytes, as the congestion controller counts them),
// TimePoint / Duration in nanoseconds. State is fixed-size; nothing allocates.
//
// Threading: owned by one path of one connection; single-threaded.
#pragma once

#include <cstdint>

#include "base/units.h"
#include "congestion_controller.h"

namespace rowan::transport {

/// What a packet remembers of the sampler when it leaves.
struct DeliveryStamp {
  uint64_t delivered = 0;
  TimePoint delivered_time;
  TimePoint first_sent_time;
  bool app_limited = false;
};

class DeliveryRateSampler {
 public:
  explicit DeliveryRateSampler(TimePoint now) : delivered_time_(now), first_sent_time_(now) {}

  /// An ack-eliciting packet leaves at `now`; `in_flight_before` is what was
  /// in flight before it (zero: a new flight starts here).
  DeliveryStamp on_sent(TimePoint now, Bytes in_flight_before) noexcept;
  /// The sender had nothing to send below cwnd with `in_flight` bytes out:
  /// samples until that data is acked are app-limited (tcp_rate_check_app_limited).
  void on_app_limited(Bytes in_flight) noexcept;

  /// Before the packets of one ACK frame are handed to on_acked().
  void begin_ack() noexcept { have_sample_ = false; }
  /// One packet of `bytes`, sent at `sent_time` with `stamp`, newly acked at `now`.
  void on_acked(const DeliveryStamp& stamp, TimePoint sent_time, Bytes bytes,
                TimePoint now) noexcept;
  /// After the ACK frame's packets: fills ev.round_start, ev.round_count,
  /// ev.largest_acked_sent_time and ev.rate (left invalid without a sample)
  /// and updates btlbw(). `min_rtt` is the path's (zero before any sample).
  void end_ack(Duration min_rtt, cc::AckEvent& ev) noexcept;

  uint64_t delivered() const noexcept { return delivered_; }
  uint64_t round_count() const noexcept { return round_count_; }
  /// Bottleneck bandwidth for telemetry: BBR's windowed max, simplified to
  /// one slot that a newer sample replaces once it is 10 rounds old.
  BitsPerSec btlbw() const noexcept { return btlbw_; }

 private:
  uint64_t delivered_ = 0;
  TimePoint delivered_time_;
  TimePoint first_sent_time_;
  uint64_t app_limited_until_ = 0;
  uint64_t next_round_delivered_ = 0;
  uint64_t round_count_ = 0;
  BitsPerSec btlbw_;
  uint64_t btlbw_round_ = 0;  ///< round of the sample btlbw_ holds
  // The sample of the ACK being processed: values of its newest-sent packet.
  bool have_sample_ = false;
  uint64_t rs_prior_delivered_ = 0;
  TimePoint rs_prior_time_;
  Duration rs_send_elapsed_;
  bool rs_app_limited_ = false;
};

}  // namespace rowan::transport
