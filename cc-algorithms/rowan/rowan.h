// rowan: the project's delay-based congestion control for long-haul links
// (the flagship; registered as "rowan", kDefaultAlgorithm). The control law,
// its reasons, parameters and limits are in docs/cc-rowan.md.
//
// Follows no single paper; it combines:
//  - BBR's model (Cardwell et al. 2016, Linux tcp_bbr.c): a per-round
//    delivery rate, a windowed min RTT and a startup that doubles per round;
//    pacing is the primary control, cwnd only a bound;
//  - Swift's delay target with flow scaling (Kumar et al., SIGCOMM'20): a
//    per-flow target queueing delay that is larger for flows with a smaller
//    share, corrections normalized by the total delay;
//  - Copa's standing RTT (min over the last srtt/4) and velocity (NSDI'18),
//    to ignore ACK-compression noise and to refill freed capacity quickly.
// The rate is re-anchored once per round trip on the delivery rate the
// bottleneck actually gave the flow (damping), then moved by a term
// proportional to the queueing-delay error: a sub-linear increase
// (∝ √(rate·capacity)) below target and a proportional decrease (∝ rate)
// above it, which together converge to equal rates independently of RTT.
// Random loss is ignored; loss reacts only with a queue well above target or
// when a round loses more than `heavy_loss`. PathHints (link rate, base RTT)
// start the flow at a fraction of the link rate, cap its rate at the link
// rate and anchor the base RTT.
//
// Units of state: rates BitsPerSec (uint64 bit/s), times Duration/TimePoint
// (int64 ns), byte counts Bytes (uint64), gains fixed point with 16
// fractional bits (kOne = 65536). Every product of two of these goes through
// 128-bit integers; no floating point on the ACK path. Ranges: rate ≤ 1.8e19
// bit/s, RTT ≤ 292 years; the arithmetic is exact to 1 bit/s and 1 ns over
// 100 Mbit/s–400 Gbit/s × 0.1–200 ms (tested at the corners).
//
// Parameters: see Rowan::Config and docs/cc-rowan.md.
#pragma once

#include <cstdint>

#include "common/windowed_filter.h"
#include "congestion_controller.h"

namespace rowan::cc {

class Rowan final : public CongestionController {
 public:
  /// Gains and fractions are fixed point: value / 65536.
  static constexpr uint32_t kOne = 1U << 16;

  struct Config {
    Duration target_queue = Duration::from_us(100);  ///< target queueing delay of a flow alone
    Duration fs_range = Duration::from_us(500);      ///< extra target for a flow with ~0 share
    uint32_t gain_up = kOne / 2;           ///< increase gain (× √(rate·capacity) × error/RTT)
    uint32_t gain_down = kOne / 2;         ///< decrease gain (× rate × error/RTT)
    uint32_t max_decrease = kOne / 2;      ///< largest multiplicative cut per round
    uint32_t heavy_loss = kOne / 10;       ///< per-round loss ratio treated as congestion
    uint32_t loss_cut = kOne * 85 / 100;   ///< factor on loss with a queue, or on heavy loss
    uint32_t startup_fraction = kOne / 8;  ///< initial rate / link rate when hinted
    uint32_t cwnd_gain = 2 * kOne;         ///< cwnd = gain × rate × (base RTT + target)
    uint32_t max_rate_factor = kOne;       ///< rate cap / hinted link rate
    Duration min_rtt_window = Duration::from_s(10);
    uint32_t rebase_rounds = 16;  ///< rounds of unmoving "queue" before it is taken as path delay
    uint32_t initial_cwnd_packets = 10;
  };
  static Config parse(const CcParams& params);

  enum class Phase : uint8_t { kStartup, kSteady };

  Rowan(const Clock& clock, const PathHints& hints, const Config& config);

  std::string_view name() const override { return "rowan"; }
  void on_packet_sent(const SentEvent& ev) override;
  void on_ack(const AckEvent& ev) override;
  void on_rto(TimePoint now) override;
  void on_spurious_loss(TimePoint now) override;
  void on_idle(TimePoint now) override;
  Bytes cwnd() const override { return cwnd_; }
  BitsPerSec pacing_rate() const override { return rate_; }
  Bytes send_quantum() const override;

  // Introspection for tests and metrics.
  Phase phase() const { return phase_; }
  BitsPerSec rate() const { return rate_; }
  Duration base_rtt() const { return base_rtt_; }
  Duration queue_delay() const { return queue_; }
  /// This flow's current target queueing delay (target_queue + flow scaling).
  Duration target() const;
  /// The part of the target that covers RTT measurement noise (0 on a
  /// noiseless path).
  Duration noise_floor() const;
  /// The most RTT noise a path with base RTT `base` may claim as target:
  /// min(base/40 + 750 us, base/4), within the queueing budget 0.05·base + 1 ms.
  static Duration noise_ceiling(Duration base);
  /// The capacity the flow scales against: the hinted link rate, or the
  /// windowed-max delivery rate.
  BitsPerSec capacity() const;
  BitsPerSec delivery_rate() const { return last_delivery_rate_; }

 private:
  void update_rtt(const AckEvent& ev);
  void end_round(const AckEvent& ev);
  /// One control step. `accepted`: the rate the path took from us last
  /// round (delivered + randomly lost); `delivered`: acked bytes only.
  void steady_update(BitsPerSec accepted, BitsPerSec delivered, bool app_limited, uint64_t lost,
                     uint64_t acked);
  void exit_startup(BitsPerSec delivered);
  void set_cwnd();
  BitsPerSec cap(BitsPerSec r) const;

  Config config_;
  Bytes mss_;
  Phase phase_ = Phase::kStartup;
  BitsPerSec rate_;
  Bytes cwnd_;
  // RTT state.
  Duration srtt_;
  Duration recent_rtt_[3];  ///< the three previous RTT samples, oldest first (median-of-3
                            ///< for the base RTT, min-of-4 for startup's overshoot)
  Duration recent_min_rtt_ = Duration::infinite();  ///< least of the last four samples
  Duration rtt_noise_;  ///< mean excess of the standing RTT over the round's min
  Duration base_rtt_;   ///< propagation estimate: min RTT (hint-aware)
  TimeMinFilter<Duration, TimePoint, Duration> min_rtt_;
  TimeMinFilter<Duration, TimePoint, Duration> standing_rtt_;
  Duration queue_;  ///< standing RTT − base RTT
  // Per-round accumulation.
  TimePoint round_start_time_;
  Bytes round_acked_ = 0;
  Bytes round_lost_ = 0;
  uint64_t round_acked_pkts_ = 0;
  uint64_t round_lost_pkts_ = 0;
  Duration round_min_rtt_ = Duration::infinite();
  bool round_app_limited_ = false;
  BitsPerSec last_delivery_rate_;
  RoundMaxFilter<BitsPerSec> max_bw_;
  uint64_t rounds_ = 0;
  // Startup plateau detection (BBR full_bw).
  BitsPerSec full_bw_;
  uint32_t full_bw_count_ = 0;
  // Velocity: consecutive rounds with an empty queue.
  uint32_t empty_rounds_ = 0;
  // Base-RTT re-estimation: rounds the queue stayed put above target.
  uint32_t stuck_rounds_ = 0;
  Duration stuck_queue_;
  bool hint_off_ = false;
  // The least round-minimum RTT of startup, and the base-RTT floor it
  // proved (zero: the hint alone); see exit_startup.
  Duration startup_min_rtt_ = Duration::infinite();
  Duration proven_base_;
  // Feedback-loop gating: the time of the last rate change, whether an RTT
  // sample of a packet sent after it arrived, and what was held back meanwhile.
  TimePoint last_change_;
  bool fresh_ = false;
  uint64_t pending_lost_ = 0;
  uint64_t pending_acked_ = 0;  ///< the hinted base RTT proved wrong (route change)
  // Undo of a loss cut.
  BitsPerSec rate_before_loss_cut_;
  bool can_undo_ = false;
};

// Per-flow state is fixed-size and small (no allocation per flow).
static_assert(sizeof(Rowan) <= 640, "rowan per-flow state grew");

}  // namespace rowan::cc
