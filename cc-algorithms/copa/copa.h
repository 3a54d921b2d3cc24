// Copa congestion control, default mode (Arun & Balakrishnan, "Copa:
// Practical Delay-Based Congestion Control for the Internet", NSDI 2018;
// structure as mvfst quic/congestion_control/Copa.cpp).
//
// Follows the paper's default mode: queueing delay d_q = RTT_standing −
// RTT_min, where RTT_standing is the min RTT over the last srtt/2 and RTT_min
// the min over 10 s; target rate λ_t = 1/(δ·d_q) packets/s; per ACK, when the
// current rate cwnd/RTT_standing is below λ_t, cwnd += v·acked/(δ·cwnd)
// (packets), else cwnd −= the same; the velocity v doubles after the window
// moved in the same direction for 3 consecutive RTTs and resets to 1 when the
// direction changes; slow start doubles cwnd once per RTT until the first
// decrease; pacing at 2·cwnd/RTT_standing. Losses are ignored (default mode);
// an RTO resets cwnd to the minimum and re-enters slow start.
//
// Units of state: cwnd in Bytes; RTTs as Duration ns; δ dimensionless
// (packets per (packet/s × s)); the velocity is an integer power of two.
//
// Deviations: competitive mode (δ adaptation against buffer-filling flows) is
// not implemented; the velocity is capped so one ACK changes cwnd by at most
// its acked bytes times the velocity and never below the 2-packet minimum;
// d_q = 0 counts as "below target" (increase), as mvfst.
//
// Parameters (CcParams): delta [0.001,10]=0.5, initial_cwnd_packets
// [2,1000]=10, min_rtt_window (duration)=10s.
#pragma once

#include <cstdint>

#include "common/windowed_filter.h"
#include "congestion_controller.h"

namespace rowan::cc {

class Copa final : public CongestionController {
 public:
  struct Config {
    double delta = 0.5;
    uint32_t initial_cwnd_packets = 10;
    Duration min_rtt_window = Duration::from_s(10);
  };
  static Config parse(const CcParams& params);

  Copa(const Clock& clock, const PathHints& hints, const Config& config);

  std::string_view name() const override { return "copa"; }
  void on_ack(const AckEvent& ev) override;
  void on_rto(TimePoint now) override;
  Bytes cwnd() const override { return cwnd_; }
  BitsPerSec pacing_rate() const override;

  // Introspection for tests.
  bool in_slow_start() const { return slow_start_; }
  uint64_t velocity() const { return velocity_; }
  Duration standing_rtt() const { return standing_rtt_.get(); }
  Duration min_rtt() const { return min_rtt_.get(); }

 private:
  enum class Direction : uint8_t { kNone, kUp, kDown };
  void update_direction(TimePoint now);
  void change_direction(Direction d, TimePoint now);

  Config config_;
  Bytes mss_;
  Bytes min_cwnd_;
  Bytes cwnd_;
  bool slow_start_ = true;
  TimePoint last_double_;
  Duration srtt_;
  TimeMinFilter<Duration, TimePoint, Duration> min_rtt_;
  TimeMinFilter<Duration, TimePoint, Duration> standing_rtt_;
  // Velocity state.
  uint64_t velocity_ = 1;
  Direction direction_ = Direction::kNone;
  uint32_t same_direction_rounds_ = 0;
  Bytes last_recorded_cwnd_ = 0;
  TimePoint last_record_time_;
};

}  // namespace rowan::cc
