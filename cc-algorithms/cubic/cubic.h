// CUBIC congestion control, RFC 9438 (with HyStart++, RFC 9406).
//
// Follows: RFC 9438 §4 — slow start, the cubic window W_cubic(t) =
// C·(t−K)³ + W_max with K = ∛((W_max − cwnd_epoch)/C), the Reno-friendly
// region W_est (α_cubic = 3(1−β)/(1+β), switching to 1 once W_est ≥
// cwnd_prior), fast convergence, multiplicative decrease β = 0.7 at most once
// per round trip, and undo of a reduction caused by a spurious loss
// (§4.9). Optional HyStart++ (RFC 9406) leaves slow start on RTT growth
// through a conservative-slow-start phase.
//
// Units of state: windows in Bytes (segments are `mss` bytes; C is in
// segments/s³ as the RFC gives it, converted to bytes when used); times as
// TimePoint/Duration in ns. The cubic function itself is evaluated in double
// (53-bit mantissa: exact far beyond any window this transport will see).
//
// Deviations: recovery is bounded by the send time of the newest acked packet
// (a loss reported while no packet sent after the last reduction has been
// acked belongs to the same congestion event) because the interface carries no
// per-lost-packet send times; the minimum window is 2 segments; after an RTO
// cwnd is 2 segments (RFC 9002's minimum window) rather than 1; growth stops
// while the sender is not cwnd-limited (RFC 9438 §5.8, as Linux
// tcp_is_cwnd_limited). Pacing (Linux style): cwnd/srtt × 2 in slow start,
// × 1.2 afterwards.
//
// Parameters (CcParams): beta [0.5,0.9]=0.7, c [0.1,4]=0.4, hystart
// (bool)=true, fast_convergence (bool)=true, initial_cwnd_packets [2,1000]=10.
#pragma once

#include "congestion_controller.h"

namespace rowan::cc {

class Cubic final : public CongestionController {
 public:
  struct Config {
    double beta = 0.7;
    double c = 0.4;
    bool hystart = true;
    bool fast_convergence = true;
    uint32_t initial_cwnd_packets = 10;
  };
  static Config parse(const CcParams& params);

  Cubic(const Clock& clock, const PathHints& hints, const Config& config);

  std::string_view name() const override { return "cubic"; }
  void on_packet_sent(const SentEvent& ev) override;
  void on_ack(const AckEvent& ev) override;
  void on_rto(TimePoint now) override;
  void on_spurious_loss(TimePoint now) override;
  void on_idle(TimePoint now) override;
  Bytes cwnd() const override { return cwnd_; }
  BitsPerSec pacing_rate() const override;

  // Introspection for tests and metrics.
  Bytes ssthresh() const { return ssthresh_; }
  Bytes w_max() const { return w_max_; }
  Duration k() const { return k_; }
  bool in_slow_start() const { return cwnd_ < ssthresh_; }
  bool in_css() const { return css_rounds_ > 0; }
  /// W_cubic(t) in bytes for `t` since the epoch start (the RFC's formula).
  double w_cubic_bytes(Duration t) const;

 private:
  void on_congestion_event(TimePoint now);
  void hystart_on_ack(const AckEvent& ev);
  void congestion_avoidance(const AckEvent& ev);

  Config config_;
  Bytes mss_;
  Bytes min_cwnd_;
  Bytes cwnd_;
  Bytes ssthresh_;
  Bytes w_max_ = 0;           ///< window before the last reduction (after fast convergence)
  Bytes cwnd_prior_ = 0;      ///< cwnd when the last reduction started
  Bytes cwnd_epoch_ = 0;      ///< cwnd at the start of the current epoch
  double w_est_ = 0;          ///< Reno-friendly estimate, bytes
  Duration k_;                ///< time for W_cubic to reach w_max again
  TimePoint epoch_start_;     ///< zero: no epoch running
  TimePoint recovery_start_;  ///< when the last reduction happened; zero: none
  Duration srtt_;
  Duration min_rtt_;
  Bytes acked_accum_ = 0;  ///< bytes acked not yet turned into slow-start growth fractions

  // HyStart++ (RFC 9406).
  Duration last_round_min_rtt_ = Duration::infinite();
  Duration current_round_min_rtt_ = Duration::infinite();
  uint32_t rtt_sample_count_ = 0;
  Duration css_baseline_min_rtt_ = Duration::infinite();
  uint32_t css_rounds_ = 0;  ///< >0 while in conservative slow start
  bool hystart_done_ = false;

  // Undo state (RFC 9438 §4.9).
  struct Saved {
    Bytes cwnd, ssthresh, w_max, cwnd_prior, cwnd_epoch;
    double w_est;
    Duration k;
    TimePoint epoch_start;
  };
  Saved saved_{};
  bool can_undo_ = false;
};

}  // namespace rowan::cc
