// Swift congestion control (Kumar et al., "Swift: Delay is Simple and
// Effective for Congestion Control in the Datacenter", SIGCOMM 2020, Alg. 1).
//
// Follows the paper: one delay signal (the RTT sample) against a target;
// below target additive increase (ai/cwnd per packet acked when cwnd ≥ 1,
// ai per packet when cwnd < 1); at or above target a multiplicative decrease
// by max(1 − β·(delay − target)/delay, 1 − max_mdf), at most once per RTT;
// flow-based target scaling fs = clamp(α/√cwnd + β_fs, 0, fs_range) with α,
// β_fs chosen so fs = fs_range at fs_min_cwnd and 0 at fs_max_cwnd; a loss
// (fast recovery) cuts by (1 − max_mdf) at most once per RTT; an RTO cuts the
// same way and, after `retx_reset_threshold` consecutive RTOs, sets cwnd to
// min_cwnd. Below one packet the window becomes a pacing delay: the pacer
// sends one packet every RTT/cwnd.
//
// Units of state: cwnd in packets as a double (Swift's window is fractional,
// min 0.001 packet); times in Duration/TimePoint ns; cwnd() reports
// max(cwnd, 1) × mss bytes, pacing_rate() the rate the paper's pacing delay
// implies.
//
// Deviations: the target is the propagation RTT (PathHints::base_rtt when the
// gateway knows it — the analogue of the paper's topology-derived target —
// else the measured min RTT, which a flow that starts into a standing queue
// overestimates, the classic delay-based latecomer advantage) plus
// `base_target` plus `target_per_rtt` × min RTT, instead of a fabric
// topology's per-hop term, so the same code runs over a WAN; no NIC/host
// delay split (one RTT signal). The initial window is `initial_cwnd_packets`,
// or the BDP when the gateway's PathHints give both link rate and base RTT.
// When cwnd ≥ 1 packet the pacer still runs at 1.25 × cwnd/srtt (rowan always
// paces).
//
// Parameters (CcParams): ai [0.01,1000] packets/RTT = 1, beta [0.1,1] = 0.8,
// max_mdf [0.1,0.9] = 0.5, base_target (duration) = 100us,
// target_per_rtt [0,1] = 0.05, fs_range (duration) = 200us,
// fs_min_cwnd [0.001,10] = 0.1, fs_max_cwnd [10,1e6] = 100,
// min_cwnd [0.001,10] = 0.001, max_cwnd [10,1e9] = 1e8 packets,
// initial_cwnd_packets [1,1e6] = 10, retx_reset_threshold [1,100] = 5.
#pragma once

#include <cstdint>

#include "congestion_controller.h"

namespace rowan::cc {

class Swift final : public CongestionController {
 public:
  struct Config {
    double ai = 1.0;
    double beta = 0.8;
    double max_mdf = 0.5;
    Duration base_target = Duration::from_us(100);
    double target_per_rtt = 0.05;
    Duration fs_range = Duration::from_us(200);
    double fs_min_cwnd = 0.1;
    double fs_max_cwnd = 100;
    double min_cwnd = 0.001;
    double max_cwnd = 1e8;
    double initial_cwnd_packets = 10;
    uint32_t retx_reset_threshold = 5;
  };
  static Config parse(const CcParams& params);

  Swift(const Clock& clock, const PathHints& hints, const Config& config);

  std::string_view name() const override { return "swift"; }
  void on_ack(const AckEvent& ev) override;
  void on_rto(TimePoint now) override;
  Bytes cwnd() const override;
  BitsPerSec pacing_rate() const override;

  // Introspection for tests.
  double cwnd_packets() const { return cwnd_; }
  /// The target delay for the current window and min RTT.
  Duration target_delay() const;

 private:
  /// At most one decrease per `rtt` (Alg. 1: now − t_last_decrease ≥ rtt).
  bool can_decrease(TimePoint now, Duration rtt) const;
  void clamp_cwnd();

  Config config_;
  Bytes mss_;
  double fs_alpha_;  ///< seconds·√packets
  double fs_beta_;   ///< seconds
  double cwnd_;      ///< packets
  Duration min_rtt_;
  Duration srtt_;
  TimePoint last_decrease_;
  uint32_t retransmit_count_ = 0;
};

}  // namespace rowan::cc
