// Helpers to drive a congestion controller's events by hand in unit tests.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>

#include "base/units.h"
#include "congestion_controller.h"

namespace rowan::cc::test {

inline CcParams params(std::initializer_list<std::pair<const std::string, std::string>> kv) {
  return CcParams(std::map<std::string, std::string>(kv));
}

/// Builds ACK events for one flow: keeps its own delivered count, round count
/// and send times so tests read like "a round of ACKs at RTT r".
class AckDriver {
 public:
  AckDriver(CongestionController& cc, Bytes mss, TimePoint start)
      : cc_(cc), mss_(mss), now_(start) {}

  TimePoint now() const { return now_; }
  void advance(Duration d) { now_ += d; }
  uint64_t round() const { return round_; }

  /// One ACK for `packets` packets with RTT `rtt`; the delivery-rate sample
  /// says `rate` (zero: none). `round_start` marks the first ACK of a round.
  AckEvent ack(uint32_t packets, Duration rtt, BitsPerSec rate = BitsPerSec::zero(),
               bool round_start = false, uint32_t lost_packets = 0, bool app_limited = false) {
    AckEvent ev;
    ev.now = now_;
    ev.rtt = rtt;
    min_rtt_ = min_rtt_.is_zero() ? rtt : std::min(min_rtt_, rtt);
    ev.min_rtt = min_rtt_;
    ev.acked_packets = packets;
    ev.acked_bytes = packets * mss_;
    ev.lost_packets = lost_packets;
    ev.lost_bytes = lost_packets * mss_;
    ev.prior_in_flight = in_flight_override_ ? in_flight_override_ : cc_.cwnd();
    ev.in_flight = ev.prior_in_flight > ev.acked_bytes + ev.lost_bytes
                       ? ev.prior_in_flight - ev.acked_bytes - ev.lost_bytes
                       : 0;
    if (round_start) ++round_;
    ev.round_start = round_start;
    ev.round_count = round_;
    ev.largest_acked_sent_time = now_ - rtt;
    if (!rate.is_zero()) {
      ev.rate.interval = rtt;
      ev.rate.delivered = rate.bytes_in(rtt);
      ev.rate.is_app_limited = app_limited;
      ev.rate.prior_delivered = delivered_;
    }
    delivered_ += ev.acked_bytes;
    cc_.on_ack(ev);
    return ev;
  }

  /// A full round trip: cwnd's worth of packets acked in `acks` ACKs spread
  /// over `rtt`, the first marked as a round start. Returns packets acked.
  uint64_t round_trip(Duration rtt, BitsPerSec rate = BitsPerSec::zero(), uint32_t acks = 10) {
    const uint64_t pkts = std::max<uint64_t>(1, cc_.cwnd() / mss_);
    const uint64_t per = std::max<uint64_t>(1, pkts / acks);
    uint64_t done = 0;
    bool first = true;
    while (done < pkts) {
      const uint64_t n = std::min(per, pkts - done);
      advance(rtt / static_cast<int64_t>(acks));
      ack(static_cast<uint32_t>(n), rtt, rate, first);
      first = false;
      done += n;
    }
    return done;
  }

  void set_in_flight(Bytes b) { in_flight_override_ = b; }

 private:
  CongestionController& cc_;
  Bytes mss_;
  TimePoint now_;
  Duration min_rtt_;
  uint64_t round_ = 0;
  Bytes delivered_ = 0;
  Bytes in_flight_override_ = 0;
};

}  // namespace rowan::cc::test
