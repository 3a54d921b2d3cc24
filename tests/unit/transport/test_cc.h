// A test-only congestion controller: fixed window, optional fixed pacing
// rate. Registered as "test-fixed" with params `cwnd` (bytes) and `rate`.
// Records what the transport tells it so tests can check the events.
#pragma once

#include <vector>

#include "congestion_controller.h"

namespace rowan::test {

class FixedCc final : public cc::CongestionController {
 public:
  FixedCc(const Clock& clock, const cc::PathHints& hints, const cc::CcParams& params)
      : CongestionController(clock, hints) {
    cwnd_ = static_cast<Bytes>(params.get_double("cwnd", 64.0 * 1500, 1000, 1e12));
    rate_ = params.get_rate("rate", BitsPerSec::zero());
  }
  std::string_view name() const override { return "test-fixed"; }
  void on_ack(const cc::AckEvent& ev) override {
    ++acks;
    if (ev.rate.valid() && !ev.rate.is_app_limited) rates.push_back(ev.rate.rate());
    if (ev.round_start) ++round_starts;
    last_round_count = ev.round_count;
    lost_packets += ev.lost_packets;
    if (!ev.rtt.is_zero()) rtts.push_back(ev.rtt);
  }
  void on_rto(TimePoint) override { ++rtos; }
  void on_spurious_loss(TimePoint) override { ++spurious; }
  Bytes cwnd() const override { return cwnd_; }
  BitsPerSec pacing_rate() const override { return rate_; }

  uint64_t acks = 0, round_starts = 0, last_round_count = 0, lost_packets = 0, rtos = 0,
           spurious = 0;
  std::vector<BitsPerSec> rates;
  std::vector<Duration> rtts;

 private:
  Bytes cwnd_;
  BitsPerSec rate_;
};

}  // namespace rowan::test
