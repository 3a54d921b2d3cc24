#include "transport/delivery_rate.h"

#include <algorithm>

namespace rowan::transport {

DeliveryStamp DeliveryRateSampler::on_sent(TimePoint now, Bytes in_flight_before) noexcept {
  if (in_flight_before == 0) {
    first_sent_time_ = now;
    delivered_time_ = now;
  }
  return DeliveryStamp{delivered_, delivered_time_, first_sent_time_, app_limited_until_ > 0};
}

void DeliveryRateSampler::on_app_limited(Bytes in_flight) noexcept {
  app_limited_until_ = std::max<uint64_t>(delivered_ + in_flight, 1);
}

void DeliveryRateSampler::on_acked(const DeliveryStamp& stamp, TimePoint sent_time, Bytes bytes,
                                   TimePoint now) noexcept {
  delivered_ += bytes;
  delivered_time_ = now;
  if (!have_sample_ || stamp.delivered >= rs_prior_delivered_) {
    have_sample_ = true;
    rs_prior_delivered_ = stamp.delivered;
    rs_prior_time_ = stamp.delivered_time;
    rs_app_limited_ = stamp.app_limited;
    rs_send_elapsed_ = sent_time - stamp.first_sent_time;
    first_sent_time_ = sent_time;
  }
}

void DeliveryRateSampler::end_ack(Duration min_rtt, cc::AckEvent& ev) noexcept {
  if (have_sample_) {
    if (rs_prior_delivered_ >= next_round_delivered_) {
      next_round_delivered_ = delivered_;
      ++round_count_;
      ev.round_start = true;
    }
    ev.largest_acked_sent_time = first_sent_time_;
    ev.rate.delivered = delivered_ - rs_prior_delivered_;
    ev.rate.prior_delivered = rs_prior_delivered_;
    ev.rate.is_app_limited = rs_app_limited_;
    const Duration ack_elapsed = delivered_time_ - rs_prior_time_;
    const Duration interval = std::max(rs_send_elapsed_, ack_elapsed);
    // tcp_rate.c: an interval below min_rtt is a compressed ACK, not a sample.
    if (interval >= min_rtt && interval.ns() > 0) ev.rate.interval = interval;
    if (ev.rate.valid()) {
      const BitsPerSec r = ev.rate.rate();
      const bool expired = round_count_ > btlbw_round_ + 10;
      if (r >= btlbw_ || (expired && !ev.rate.is_app_limited)) {
        btlbw_ = r;
        btlbw_round_ = round_count_;
      }
    }
  }
  ev.round_count = round_count_;
  if (app_limited_until_ > 0 && delivered_ > app_limited_until_) app_limited_until_ = 0;
  have_sample_ = false;
}

}  // namespace rowan::transport
