// rowan: the project's congestion control for long-haul links (the flagship;
// registered as "rowan", kDefaultAlgorithm). The algorithm, its reasons,
// parameters and measured behaviour are in docs/cc-rowan.md.
//
// The rate comes from a model; delay bounds the queue.
//  - The model is BBR's (Cardwell et al. 2016, Linux tcp_bbr.c): the
//    windowed-max delivery rate `bw` over 10 rounds, the windowed-min RTT
//    over 10 s, and the ACK-aggregation allowance (`extra_acked`). Startup,
//    drain, the pacing rate and its gain cycle come from it.
//  - Delay bounds only the inflight above the model's BDP (as BBR.Swift):
//    once per round, the round's least RTT minus the min RTT is the standing
//    queue `q`; above the flow's target (Swift's flow-scaled target) it takes
//    away the headroom, below it the headroom grows back (at most two
//    targets). cwnd = bw × (min_rtt + RTT spread + headroom) + extra_acked +
//    one quantum, where the spread (a round's mean RTT above its least)
//    keeps a BDP delivering through jitter and late hosts; the slack
//    (spread, aggregation, quantum) gives way to a standing queue that
//    answers the flow's own inflight (its 0.75 phase), not to a floor that
//    does not. A floor the tests find on average (over four or more, all
//    while the flow carries 90 % of the hinted link, in a queue that did
//    not grow) is covered by the flight and the targets are judged above
//    it (FIFO jitter, a late path). The hosts' part of the loop (the ACK
//    held at the receiver, this host's lateness: outside an RTT measured
//    from receive timestamps) is added on top, since those bytes wait in
//    the hosts.
//    Noise that looks like a queue can take the headroom but never the
//    rate, so it cannot starve the flow (Arun et al., "Starvation in
//    End-to-End Congestion Control", SIGCOMM 2022: a controller whose rate
//    follows delay starves when non-congestive delay varies more than its
//    delay range).
//  - A buffer-filling competitor squeezes the flow: the headroom is gone,
//    the queue stays above half the min RTT and the model falls by a
//    quarter. The flow then switches to the "model" mode (Copa's mode
//    switching; Nimbus's elasticity in its simplest form): BBR's cycle with
//    a cwnd that delivers bw through the queue as it is (at most 2 BDPs),
//    and back to delay mode once the queue is at target again, or on trial.
//  - Every half min-RTT window the flow holds half a BDP in flight for 200
//    ms (BBRv2's PROBE_RTT), so that flows find the empty queue together;
//    a flow that carries the link and sees its queue at target meanwhile
//    has seen the empty queue, and skips it.
//  - Random loss is not congestion; a round that loses more than
//    `heavy_loss` (a policer, a broken link) brings the model down.
//  - PathHints seed the startup rate and the first RTT only: a hint that is
//    wrong by ±50 % costs at most a slower start, never a capped rate.
//
// Units: rates BitsPerSec (uint64 bit/s), times Duration/TimePoint (int64
// ns), windows Bytes; products go through units.h's 128-bit helpers, so
// 400 Gbit/s × 200 ms is exact. Gains are doubles, used once per round and
// per ACK on a handful of multiplications (as bbr.cc).
#pragma once

#include <algorithm>
#include <cstdint>

#include "common/windowed_filter.h"
#include "congestion_controller.h"

namespace rowan::cc {

class Rowan final : public CongestionController {
 public:
  struct Config {
    Duration target_queue = Duration::from_us(250);  ///< delay-mode target of a flow alone
    Duration fs_range = Duration::from_us(500);      ///< extra target for a flow with ~0 share
    double gain_up = 0.5;             ///< headroom growth per round, × (target − queue)
    double gain_down = 0.5;           ///< headroom cut per round, × (queue − target)
    double heavy_loss = 0.1;          ///< per-round loss ratio treated as congestion
    double loss_cut = 0.85;           ///< factor on heavy loss
    double startup_fraction = 0.125;  ///< initial rate / hinted link rate
    double high_gain = 2.885;         ///< startup pacing and cwnd gain (2/ln 2)
    double cwnd_gain = 2.0;           ///< cwnd bound in model BDPs
    double probe_gain = 1.25;         ///< model-mode probing pacing gain
    uint32_t probe_rounds = 8;        ///< model-mode cycle length in rounds (one probes)
    uint32_t inelastic_rounds = 16;   ///< rounds squeezed by a standing queue → model mode
    uint32_t calm_rounds = 4;         ///< rounds at target in model mode → delay mode
    uint32_t bw_window_rounds = 10;   ///< delivery-rate max filter window
    Duration min_rtt_window = Duration::from_s(10);
    uint32_t initial_cwnd_packets = 10;
  };
  static Config parse(const CcParams& params);

  enum class Phase : uint8_t { kStartup, kDrain, kSteady };
  enum class Mode : uint8_t { kDelay, kModel };

  Rowan(const Clock& clock, const PathHints& hints, const Config& config);

  std::string_view name() const override { return "rowan"; }
  void on_packet_sent(const SentEvent& ev) override;
  void on_ack(const AckEvent& ev) override;
  void on_rto(TimePoint now) override;
  void on_idle(TimePoint now) override;
  Bytes cwnd() const override { return cwnd_; }
  BitsPerSec pacing_rate() const override { return pacing_; }
  Bytes send_quantum() const override;

  // Introspection for tests and metrics.
  Phase phase() const { return phase_; }
  Mode mode() const { return mode_; }
  /// The model's rate: what the flow paces at when it neither probes nor
  /// drains (the windowed-max delivery rate, at least the floor).
  BitsPerSec rate() const {
    return std::max(bw_max_.get(), phase_ == Phase::kStartup ? initial_rate_ : floor_rate());
  }
  /// Delay mode's inflight allowance above the model's BDP, as time at bw.
  Duration headroom() const { return headroom_; }
  /// The model: windowed-max delivery rate and windowed-min RTT.
  BitsPerSec bw() const { return bw_max_.get(); }
  Duration min_rtt() const { return min_rtt_.get(); }
  /// The last round's standing queue (its least RTT − the min RTT).
  Duration queue_delay() const { return queue_; }
  /// This flow's current target queueing delay (target_queue + flow scaling).
  Duration target() const;
  /// The capacity the flow scales its target and increase against: the
  /// larger of the hinted link rate and the model's bw.
  BitsPerSec capacity() const;
  Bytes extra_acked() const { return std::max(extra_acked_[0], extra_acked_[1]); }
  /// Mode switches so far (delay → model and back).
  uint64_t mode_switches() const { return mode_switches_; }
  /// How much the standing queue jumps between rounds (EWMA of |Δ²q|/2).
  Duration delay_noise() const { return noise_; }
  /// How far the mean RTT of a round sits above its least one (EWMA).
  Duration rtt_spread() const { return spread_; }

 private:
  void update_model(const AckEvent& ev);
  void update_ack_aggregation(const AckEvent& ev);
  void update_endpoint_delay(const AckEvent& ev);
  void integrate_flight(TimePoint now, Bytes next);
  void update_hosts();
  void answer_test_phase(TimePoint now);
  void answer_test_sample(const AckEvent& ev);
  Bytes hosts_allowance(Bytes aggr) const;
  void end_round(const AckEvent& ev);
  void update_noise();
  void update_spread();
  void delay_round(BitsPerSec delivered, bool heavy);
  void model_round(BitsPerSec delivered, bool lossy);
  void enter_steady(TimePoint now);
  void end_drain(TimePoint now);
  void enter_mode(Mode m, bool is_switch = true);
  void advance_cycle(const AckEvent& ev);
  void set_outputs();
  Bytes bdp(BitsPerSec rate, double gain) const;
  Duration rtt_or_hint() const;
  Duration max_headroom() const;
  Bytes excess_bytes(Duration extra) const;
  BitsPerSec floor_rate() const;
  /// The flow carries nearly all of the hinted link (kCarriesLink of it).
  bool carries_link() const;
  /// The last round's standing queue above the delay floor.
  Duration queue_above_floor() const { return queue_ - std::min(floor_, queue_); }

  Config config_;
  Bytes mss_;
  Phase phase_ = Phase::kStartup;
  Mode mode_ = Mode::kDelay;
  BitsPerSec pacing_;  ///< output
  Bytes cwnd_;         ///< output
  BitsPerSec initial_rate_;
  // The model.
  RoundMaxFilter<BitsPerSec> bw_max_;
  TimeMinFilter<Duration, TimePoint, Duration> min_rtt_;
  uint64_t rounds_ = 0;
  // Per-round accumulation.
  TimePoint round_start_time_;
  Bytes round_acked_ = 0;
  uint64_t round_acked_pkts_ = 0;
  uint64_t round_lost_pkts_ = 0;
  Duration round_min_rtt_ = Duration::infinite();
  Duration round_rtt_sum_;
  uint64_t round_rtt_n_ = 0;
  Duration spread_;  ///< EWMA of the round's mean RTT above its least one
  Duration host_;    ///< EWMA of the loop's part outside the path (Little's law per round)
  Duration late_;    ///< EWMA of this host's lateness in handling an ACK
  // Little's law over the loop: the round's integral of bytes in flight
  // over time, divided by the bytes it delivered, is the mean time a byte
  // spent in flight.
  TimePoint flight_stamp_;
  Bytes flight_ = 0;
  double round_flight_ = 0;  ///< byte·ns this round
  // Does the standing queue answer this flow's own inflight (its cycle's
  // 0.75 phase)? kProbing: the probe before it; kDraining: the phase;
  // kWaiting: the phase's packets still to be acked.
  enum class AnswerTest : uint8_t { kIdle, kProbing, kDraining, kWaiting };
  AnswerTest answer_state_ = AnswerTest::kIdle;
  bool queue_answers_ = false;
  uint8_t answer_tests_ = 0;  ///< tests in the means below (saturates)
  bool round_app_limited_ = false;
  bool queue_valid_ = false;
  bool prev_queue_valid_ = false;
  bool prev_delta_valid_ = false;
  Duration answer_q0_;      ///< the cruising queue before the probe
  Duration answer_excess_;  ///< the flow's flight above the BDP then, as time at C
  Duration answer_min_;     ///< least RTT of the packets the phase sent
  Bytes answer_out_ = 0;    ///< the flight when the phase began, then what it took out
  // The delay floor: the part of the standing queue that did not answer the
  // flow's own drain (jitter kept in FIFO order, a late path). It is not a
  // queue: the flight covers it and the targets are judged above it.
  Duration floor_;
  // The tests' running means (EWMA 1/4): the queue's fall across the
  // phase (signed), what the phase took out, and the queue it left.
  Duration mean_drop_;
  Duration mean_drained_;
  Duration mean_left_;
  TimePoint answer_from_;
  TimePoint answer_to_;
  Duration queue_;
  Duration prev_queue_;
  Duration prev_delta_;
  Duration noise_;  ///< EWMA of the standing queue's round-to-round jumps
  // Startup plateau detection (BBR full_bw).
  BitsPerSec full_bw_;
  uint32_t full_bw_count_ = 0;
  // Delay mode: velocity, and the elasticity test.
  uint32_t low_rounds_ = 0;        ///< consecutive rounds with the queue well below target
  uint32_t velocity_ = 1;          ///< increase multiplier (doubles while the queue stays low)
  Duration headroom_;              ///< inflight allowed above the model's BDP (time at bw)
  uint32_t pressure_ = 0;          ///< rounds above target since the queue was last at it
  uint32_t pressure_at_zero_ = 0;  ///< ... of them with no headroom left
  BitsPerSec pressure_bw0_;        ///< the model when that run began
  Duration probe_extra_;           ///< the delay-mode probe's inflight excess (time at bw)
  BitsPerSec probe_bw0_;           ///< the model when the last probe began
  bool draining_ = false;
  TimePoint last_drain_;  ///< when the last min-RTT drain began (or ended)
  TimePoint drain_end_;
  uint64_t bw_rounds_ = 0;  ///< the bw filter's round clock (stops while draining)
  uint32_t skip_ = 0;  ///< delay-mode rounds not judged (their samples are a drain's or a switch's)
  // Model mode: the probing cycle and the way back.
  uint32_t cycle_idx_ = 0;
  TimePoint cycle_stamp_;
  uint32_t calm_ = 0;
  uint32_t model_rounds_ = 0;     ///< rounds since model mode began
  uint32_t trial_interval_ = 64;  ///< model-mode rounds before a delay-mode trial
  bool trial_ = false;            ///< delay mode is on trial (entered from model mode)
  uint32_t rng_;
  uint64_t mode_switches_ = 0;
  // ACK aggregation (Linux bbr_update_ack_aggregation).
  TimePoint ack_epoch_stamp_;
  Bytes ack_epoch_acked_ = 0;
  Bytes extra_acked_[2] = {0, 0};
  uint32_t extra_acked_rounds_ = 0;
  int extra_acked_idx_ = 0;
};

// Per-flow state is fixed-size and small (no allocation per flow).
static_assert(sizeof(Rowan) <= 768, "rowan per-flow state grew");

}  // namespace rowan::cc
