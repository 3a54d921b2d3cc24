#include "rowan/rowan.h"

#include <algorithm>
#include <cmath>

#include "registry.h"

namespace rowan::cc {
namespace {

constexpr double kFullBwThresh = 1.25;  // startup plateau: < 25 % growth ...
constexpr uint32_t kFullBwRounds = 3;   // ... for 3 rounds
constexpr uint32_t kMinCwndPackets = 4;
// A loss ratio needs a few losses to mean anything (one loss in a 10-packet
// first round is not a policer).
constexpr uint64_t kMinHeavyLossPackets = 4;
// Model mode's loss threshold per round (BBRv2's BBR_LOSS_THRESH, 2 %).
constexpr double kModelLoss = 0.02;
constexpr uint32_t kMaxVelocity = 8;
constexpr uint32_t kMaxHeadroomTargets = 2;  // headroom ≤ 2 targets (and ≤ 1 RTT)
constexpr uint32_t kTrialCycles = 8;         // model mode tries delay mode every 8 cycles ...
constexpr uint32_t kMaxTrialFactor = 8;      // ... backing off to every 64 against a buffer-filler
constexpr uint32_t kExtraAckedWinRounds = 5;
// A floor under the RTT is counted only by a flow that carries this share of
// the hinted link: a drain by one flow cannot tell a floor from other flows'
// queue, and nearly alone on the link no one else holds one.
constexpr double kCarriesLink = 0.9;
// ... over this many answer tests in a row (a windfall while other flows
// drain for their min RTT lasts a bw window, one or two tests).
constexpr uint8_t kFloorTests = 4;
constexpr Duration kExtraAckedMaxTime = Duration::from_ms(100);
constexpr double kPacingMargin = 0.99;                   // model mode paces 1 % under bw (BBR)
constexpr Duration kDrainTime = Duration::from_ms(200);  // min-RTT drain: 200 ms or a round
constexpr Duration kQuantumTime = Duration::from_us(25);
constexpr Duration kMaxQuantumTime = Duration::from_ms(1);
constexpr Duration kMaxLateTime = Duration::from_ms(2);  // the quantum may cover this much lateness
constexpr Bytes kMaxQuantum = 64 * 1024ULL;

ControllerPtr make_rowan(const Clock& clock, const PathHints& hints, const CcParams& params) {
  return std::make_unique<Rowan>(clock, hints, Rowan::parse(params));
}

uint32_t get_count(const CcParams& p, const std::string& key, uint32_t def, double lo, double hi) {
  return static_cast<uint32_t>(std::lround(p.get_double(key, def, lo, hi)));
}

}  // namespace

ROWAN_REGISTER_CC("rowan", &make_rowan);

Rowan::Config Rowan::parse(const CcParams& p) {
  Config c;
  c.target_queue = p.get_duration("target_queue", c.target_queue);
  c.fs_range = p.get_duration("fs_range", c.fs_range);
  if (c.target_queue < Duration::from_us(1) || c.target_queue > Duration::from_ms(100))
    throw CcParamError("target_queue: must be within [1us, 100ms]");
  if (c.fs_range > Duration::from_ms(100))
    throw CcParamError("fs_range: must be within [0, 100ms]");
  c.gain_up = p.get_double("gain_up", c.gain_up, 0.01, 4);
  c.gain_down = p.get_double("gain_down", c.gain_down, 0.01, 4);
  c.heavy_loss = p.get_double("heavy_loss", c.heavy_loss, 0.01, 1);
  c.loss_cut = p.get_double("loss_cut", c.loss_cut, 0.1, 1);
  c.startup_fraction = p.get_double("startup_fraction", c.startup_fraction, 0.001, 1);
  c.high_gain = p.get_double("high_gain", c.high_gain, 1.5, 4);
  c.cwnd_gain = p.get_double("cwnd_gain", c.cwnd_gain, 1, 8);
  c.probe_gain = p.get_double("probe_gain", c.probe_gain, 1.01, 2);
  c.probe_rounds = get_count(p, "probe_rounds", c.probe_rounds, 3, 1000);
  c.inelastic_rounds = get_count(p, "inelastic_rounds", c.inelastic_rounds, 1, 1000);
  c.calm_rounds = get_count(p, "calm_rounds", c.calm_rounds, 1, 1000);
  c.bw_window_rounds = get_count(p, "bw_window_rounds", c.bw_window_rounds, 4, 100);
  c.min_rtt_window = p.get_duration("min_rtt_window", c.min_rtt_window);
  if (c.min_rtt_window < Duration::from_ms(100) || c.min_rtt_window > Duration::from_s(600))
    throw CcParamError("min_rtt_window: must be within [100ms, 600s]");
  c.initial_cwnd_packets = get_count(p, "initial_cwnd_packets", c.initial_cwnd_packets, 4, 1000);
  return c;
}

Rowan::Rowan(const Clock& clock, const PathHints& hints, const Config& config)
    : CongestionController(clock, hints),
      config_(config),
      mss_(hints.mss == 0 ? 1400 : hints.mss),
      bw_max_(config.bw_window_rounds, BitsPerSec::zero(), 0),
      min_rtt_(config.min_rtt_window, Duration::infinite(), TimePoint::zero()),
      rng_(static_cast<uint32_t>(clock.now().ns()) * 2654435761U + 7) {
  const Duration rtt0 = rtt_or_hint();
  initial_rate_ = BitsPerSec::from_bytes_per(config_.initial_cwnd_packets * mss_, rtt0)
                      .scaled(config_.high_gain);
  if (!hints.link_rate.is_zero())
    initial_rate_ = std::max(initial_rate_, hints.link_rate.scaled(config_.startup_fraction));
  round_start_time_ = clock.now();
  set_outputs();
}

Duration Rowan::rtt_or_hint() const {
  const Duration m = min_rtt_.get();
  if (!m.is_infinite()) return m;
  return hints_.base_rtt.is_zero() ? Duration::from_ms(1) : hints_.base_rtt;
}

BitsPerSec Rowan::capacity() const { return std::max(hints_.link_rate, rate()); }

bool Rowan::carries_link() const {
  return !hints_.link_rate.is_zero() && bw_max_.get() >= hints_.link_rate.scaled(kCarriesLink);
}

BitsPerSec Rowan::floor_rate() const {
  return BitsPerSec::from_bytes_per(kMinCwndPackets * mss_, rtt_or_hint());
}

Duration Rowan::target() const {
  const BitsPerSec c = capacity();
  const Duration two_packets = c.is_zero() ? Duration::zero() : c.transfer_time(2 * mss_);
  const Duration base = std::max(config_.target_queue, two_packets);
  // Swift's flow scaling on the share: a flow with a smaller share tolerates
  // a longer queue, so every flow stops moving only at equal shares.
  const double share =
      c.is_zero() ? 1.0 : std::min(1.0, static_cast<double>(rate().bps()) / c.bps());
  return base + config_.fs_range.scaled(1.0 - std::sqrt(share));
}

Bytes Rowan::bdp(BitsPerSec rate, double gain) const {
  return static_cast<Bytes>(static_cast<double>(rate.bytes_in(rtt_or_hint())) * gain);
}

Bytes Rowan::send_quantum() const {
  // A burst of min(RTT/16, 1 ms) at the pacing rate, at least 25 µs of it
  // and at most 64 KB. The pacer gives a sender that woke late this much
  // credit, so where the hosts are late by more (twice the larger of the
  // RTT spread they cause and this host's own lateness in handling ACKs)
  // the quantum covers that, up to 2 ms and with no byte cap: otherwise late
  // wake-ups send below the pacing rate, the delivery rate follows, and the
  // model with it (64 KB is 52 µs at 10 Gbit/s).
  const Duration rtt_part = std::clamp(rtt_or_hint() / 16, kQuantumTime, kMaxQuantumTime);
  const Bytes q = std::clamp(pacing_.bytes_in(rtt_part), 2 * mss_, std::max(kMaxQuantum, 2 * mss_));
  const Bytes late = pacing_.bytes_in(std::min(std::max(spread_, late_) * 2, kMaxLateTime));
  return std::max(q, late);
}

void Rowan::on_packet_sent(const SentEvent& ev) {
  integrate_flight(ev.now, ev.in_flight);
  if (ev.in_flight <= ev.bytes && ev.app_limited) {
    // Restarting from idle: the gap is not ACK aggregation.
    ack_epoch_stamp_ = ev.now;
    ack_epoch_acked_ = 0;
  }
}

void Rowan::on_idle(TimePoint now) {
  ack_epoch_stamp_ = now;
  ack_epoch_acked_ = 0;
}

void Rowan::on_rto(TimePoint now) {
  (void)now;
  // Everything in flight is presumed lost: halve what the model believes.
  const BitsPerSec bw = BitsPerSec::from_bps(bw_max_.get().bps() / 2);
  bw_max_.reset(std::max(bw, floor_rate()), bw_rounds_);
  full_bw_ = BitsPerSec::zero();
  full_bw_count_ = 0;
  set_outputs();
}

void Rowan::on_ack(const AckEvent& ev) {
  integrate_flight(ev.now, ev.in_flight);  // the round's integral runs up to now
  if (ev.round_start) end_round(ev);
  update_model(ev);
  update_ack_aggregation(ev);
  round_acked_ += ev.acked_bytes + ev.lost_bytes;  // randomly lost bytes also took the link
  round_acked_pkts_ += ev.acked_packets;
  round_lost_pkts_ += ev.lost_packets;
  round_app_limited_ = round_app_limited_ || ev.rate.is_app_limited;

  if (phase_ == Phase::kDrain && ev.in_flight <= bdp(bw_max_.get(), 1.0)) enter_steady(ev.now);
  if (phase_ == Phase::kSteady) advance_cycle(ev);
  if (draining_ && ev.now >= drain_end_) end_drain(ev.now);
  set_outputs();
}

void Rowan::update_model(const AckEvent& ev) {
  if (!ev.rtt.is_zero()) {
    update_endpoint_delay(ev);
    answer_test_sample(ev);
    min_rtt_.update(ev.rtt, ev.now);
    round_min_rtt_ = std::min(round_min_rtt_, ev.rtt);
    round_rtt_sum_ += ev.rtt;
    ++round_rtt_n_;
  }
  if (ev.rate.valid() && ev.rate.delivered > 0) {
    const BitsPerSec bw = ev.rate.rate();
    // App-limited samples count only when they raise the estimate (BBR).
    // The same for the drain's samples, and the filter's round clock stops
    // while the flow drains (200 ms spans the whole window at a 20 ms RTT).
    if ((!ev.rate.is_app_limited && !draining_) || bw >= bw_max_.get())
      bw_max_.update(bw, bw_rounds_);
  }
}

void Rowan::update_endpoint_delay(const AckEvent& ev) {
  // This host's own lateness in handling an ACK: the newest acked packet's
  // loop less its RTT sample (the path's, measured from receive times with
  // the receiver's hold removed) and the hold the receiver reported. It
  // sizes the send quantum.
  if (ev.largest_acked_sent_time.is_zero() || ev.now <= ev.largest_acked_sent_time) return;
  const Duration loop = ev.now - ev.largest_acked_sent_time;
  const Duration endpoint = loop > ev.rtt ? loop - ev.rtt : Duration::zero();
  const Duration local = endpoint > ev.ack_delay ? endpoint - ev.ack_delay : Duration::zero();
  late_ = late_ + (local - late_) / 8;
}

void Rowan::integrate_flight(TimePoint now, Bytes next) {
  if (!flight_stamp_.is_zero() && now > flight_stamp_)
    round_flight_ += static_cast<double>(flight_) * static_cast<double>((now - flight_stamp_).ns());
  flight_stamp_ = now;
  flight_ = next;
}

void Rowan::update_hosts() {
  // The hosts' part of the loop, by Little's law over the round: the
  // integral of bytes in flight over time, divided by the bytes the round
  // delivered, is the mean time a byte spent in flight; less the round's
  // mean RTT (the path's, queue included) it is the time outside the path:
  // ACKs held at the receiver and handled late here. Measured per ACK from
  // its newest packet alone, it missed the wait of every older packet the
  // ACK covers: a receiver that wakes late by D acknowledges D of data at
  // once, and those bytes waited D/2 on average. Those bytes sit in the
  // hosts, not in the bottleneck's queue.
  if (round_acked_ > 0 && round_rtt_n_ > 0 && round_flight_ > 0) {
    const Duration loop =
        Duration::from_ns(static_cast<int64_t>(round_flight_ / static_cast<double>(round_acked_)));
    const Duration mean = round_rtt_sum_ / static_cast<int64_t>(round_rtt_n_);
    const Duration outside = loop > mean ? loop - mean : Duration::zero();
    host_ = host_ + (outside - host_) / 4;
  }
  round_flight_ = 0;
}

void Rowan::update_ack_aggregation(const AckEvent& ev) {
  if (ev.acked_bytes == 0 || !ev.rate.valid()) return;
  if (ev.round_start && ++extra_acked_rounds_ >= kExtraAckedWinRounds) {
    extra_acked_rounds_ = 0;
    extra_acked_idx_ ^= 1;
    extra_acked_[extra_acked_idx_] = 0;
  }
  const Bytes expected = bw_max_.get().bytes_in(ev.now - ack_epoch_stamp_);
  if (ack_epoch_stamp_.is_zero() || ack_epoch_acked_ <= expected) {
    ack_epoch_acked_ = ev.acked_bytes;
    ack_epoch_stamp_ = ev.now;
    return;
  }
  ack_epoch_acked_ += ev.acked_bytes;
  const Bytes extra = std::min(ack_epoch_acked_ - expected, cwnd_);
  extra_acked_[extra_acked_idx_] = std::max(extra_acked_[extra_acked_idx_], extra);
}

void Rowan::end_round(const AckEvent& ev) {
  ++rounds_;
  update_hosts();
  if (!draining_) ++bw_rounds_;
  const Duration dur = ev.now - round_start_time_;
  const BitsPerSec delivered =
      dur.ns() > 0 ? BitsPerSec::from_bytes_per(round_acked_, dur) : BitsPerSec::zero();
  const Duration m = min_rtt_.get();
  queue_valid_ = !round_min_rtt_.is_infinite() && !m.is_infinite();
  if (queue_valid_) queue_ = round_min_rtt_ > m ? round_min_rtt_ - m : Duration::zero();
  // A floor lies under every sample: a round that saw less had none.
  if (queue_valid_) floor_ = std::min(floor_, queue_);
  if (!carries_link()) {
    floor_ = Duration::zero();
    answer_tests_ = 0;  // the means start over once the flow carries the link again
  }
  const uint64_t pkts = round_acked_pkts_ + round_lost_pkts_;
  const bool heavy = round_lost_pkts_ >= kMinHeavyLossPackets &&
                     static_cast<double>(round_lost_pkts_) > config_.heavy_loss * pkts;
  const bool lossy = round_lost_pkts_ >= kMinHeavyLossPackets &&
                     static_cast<double>(round_lost_pkts_) > kModelLoss * pkts;

  switch (phase_) {
    case Phase::kStartup: {
      const BitsPerSec bw = bw_max_.get();
      if (!round_app_limited_) {
        if (bw >= full_bw_.scaled(kFullBwThresh)) {
          full_bw_ = bw;
          full_bw_count_ = 0;
        } else {
          ++full_bw_count_;
        }
      }
      // The round's least RTT saw the queue the previous round left behind:
      // a queue of max(4 targets, RTT/8) means the pipe is full.
      const bool queued =
          queue_valid_ && queue_ > std::max(target() * 4, rtt_or_hint() / 8) && !bw.is_zero();
      // A queue ends startup only with the delivery rate stalled too: late
      // wake-ups and jitter lift the RTT of a startup's few packets per round.
      if (full_bw_count_ >= kFullBwRounds || heavy || (queued && full_bw_count_ >= 1)) {
        phase_ = Phase::kDrain;
      }
      break;
    }
    case Phase::kDrain:
      break;
    case Phase::kSteady:
      update_noise();
      update_spread();
      // A standing queue (this flow's, or a latecomer's whose min RTT
      // already held the others' queue) would become the min RTT when the
      // window expires: every half window the flow holds a half BDP in
      // flight for 200 ms or a round (BBRv2's PROBE_RTT). Flows that see
      // the lower RTT refresh their min and drain at the same time next
      // time, so together they find the empty queue. The drain counts as
      // a refresh even when it finds the same min RTT: otherwise a path
      // whose RTT never goes below its min would drain every round.
      // A flow that carries the link sees the empty queue without draining:
      // nobody else holds one, so a round whose queue above the floor is at
      // target confirms its min RTT, and counts as a refresh too. The drain
      // (200 ms at half a BDP every 5 s) cost such a flow 2 % of the link.
      if (!draining_ && carries_link() && queue_valid_ && queue_above_floor() <= target()) {
        last_drain_ = ev.now;
      }
      if (!draining_ && std::max(min_rtt_.best_time(), last_drain_) + config_.min_rtt_window / 2 <
                            round_start_time_) {
        draining_ = true;
        drain_end_ = ev.now + std::max(kDrainTime, rtt_or_hint());
        last_drain_ = ev.now;
      }
      if (draining_) break;
      if (mode_ == Mode::kDelay) {
        delay_round(delivered, heavy);
      } else {
        model_round(delivered, lossy);
      }
      break;
  }
  round_start_time_ = ev.now;
  round_acked_ = 0;
  round_acked_pkts_ = 0;
  round_lost_pkts_ = 0;
  round_min_rtt_ = Duration::infinite();
  round_rtt_sum_ = Duration::zero();
  round_rtt_n_ = 0;
  round_app_limited_ = false;
}

void Rowan::update_spread() {
  // How far the round's mean RTT sits above its least one: the delay that
  // jitter, late hosts and ACK compression add to the average packet, but
  // not to all of them, so the standing queue does not contain it. By
  // Little's law the flow needs bw × (min RTT + this) in flight to deliver
  // bw. Rounds the flow shapes itself (probes, drains) are left out.
  const bool own = cycle_idx_ < 2 || draining_ || skip_ > 0;
  if (own || round_rtt_n_ < 4 || round_min_rtt_.is_infinite()) return;
  const Duration mean = round_rtt_sum_ / static_cast<int64_t>(round_rtt_n_);
  const Duration d = mean > round_min_rtt_ ? mean - round_min_rtt_ : Duration::zero();
  spread_ = spread_ + (d - spread_) / 4;
}

void Rowan::update_noise() {
  // How much the round's standing queue moves from one round to the next
  // (EWMA 1/8 of half the second difference of q), over rounds this flow did not shape itself
  // (probes, their drains, min-RTT drains). A queue moves smoothly; jitter, late wake-ups and ACK
  // compression make the round minimum jump.
  const bool own = (mode_ == Mode::kModel && cycle_idx_ < 3) ||
                   (mode_ == Mode::kDelay && (draining_ || skip_ > 0));
  if (!queue_valid_ || own) {
    prev_queue_valid_ = false;
    prev_delta_valid_ = false;
    return;
  }
  if (prev_queue_valid_) {
    // The second difference: a queue that fills or drains at a steady rate
    // moves the same amount every round, which is no noise.
    const Duration delta = queue_ - prev_queue_;
    if (prev_delta_valid_) {
      const Duration dd = delta - prev_delta_;
      const Duration d = Duration::from_ns((dd.ns() < 0 ? -dd.ns() : dd.ns()) / 2);
      noise_ = noise_ + (d - noise_) / 8;
    }
    prev_delta_ = delta;
    prev_delta_valid_ = true;
  }
  prev_queue_ = queue_;
  prev_queue_valid_ = true;
}

void Rowan::delay_round(BitsPerSec delivered, bool heavy) {
  // The round after a min-RTT drain is not judged: its queue is the
  // drain's, not the path's.
  if (skip_ > 0) {
    --skip_;
    return;
  }
  if (heavy) {
    // A policer or a broken link: the model itself comes down.
    const BitsPerSec bw = std::min(bw_max_.get(), delivered).scaled(config_.loss_cut);
    bw_max_.reset(std::max(bw, floor_rate()), bw_rounds_);
    headroom_ = Duration::zero();
    pressure_ = 0;
    return;
  }
  if (!queue_valid_) return;
  const Duration t = target();
  const Duration q = queue_above_floor();
  // Delay moves only the headroom: the inflight this flow keeps above the
  // model's BDP. Noise that looks like a queue can take the headroom to
  // zero, never the rate below the model (cwnd ≥ BDP + the ACK-aggregation
  // allowance): it cannot starve the flow. A queue above target that does
  // not shrink once the headroom is gone is not this flow's to control.
  if (q > t) {
    if (pressure_ == 0) pressure_bw0_ = bw_max_.get();
    ++pressure_;
    low_rounds_ = 0;
    velocity_ = 1;
    headroom_ = headroom_ > (q - t).scaled(config_.gain_down)
                    ? headroom_ - (q - t).scaled(config_.gain_down)
                    : Duration::zero();
    // Counted only while the queue is far above what rowan flows keep
    // (half the min RTT): a rowan flow with a smaller share holds the queue
    // above this flow's target on purpose (that is how shares converge),
    // and several flows' noise allowances add up to a few milliseconds; a
    // loss-based competitor fills the buffer, which is a BDP or more.
    // A newcomer's startup overshoots for a few rounds and drains; the
    // count starts over whenever the queue comes down.
    if (headroom_.is_zero() &&
        q > std::max((config_.target_queue + config_.fs_range) * 2, rtt_or_hint() / 2)) {
      ++pressure_at_zero_;
    } else {
      pressure_at_zero_ = 0;
      pressure_bw0_ = bw_max_.get();
    }
    // Squeezed: with no headroom left, the queue stayed above target while
    // the model fell by a quarter. Someone else takes what this flow gives
    // up without answering to the queue: a buffer-filling competitor. A
    // queue that is only noise (a delay floor that jitter or a late host
    // lays under every sample) leaves the delivery rate alone: the flow
    // stays here, paced at the model with a BDP in flight.
    if (pressure_at_zero_ >= config_.inelastic_rounds &&
        bw_max_.get() <= pressure_bw0_.scaled(0.75)) {
      const uint32_t first = config_.probe_rounds * kTrialCycles;
      trial_interval_ = trial_ ? std::min(trial_interval_ * 2, first * kMaxTrialFactor) : first;
      trial_ = false;
      enter_mode(Mode::kModel);
      return;
    }
  } else {
    pressure_ = 0;
    pressure_at_zero_ = 0;
    if (trial_) {
      trial_ = false;  // the queue answered: delay mode holds
      trial_interval_ = config_.probe_rounds * kTrialCycles;
    }
    if (q < t / 2) {
      if (++low_rounds_ >= 2) velocity_ = std::min(velocity_ * 2, kMaxVelocity);
    } else {
      low_rounds_ = 0;
      velocity_ = 1;
    }
    headroom_ = std::min(headroom_ + (t - q).scaled(config_.gain_up * velocity_), max_headroom());
  }
}

Bytes Rowan::excess_bytes(Duration extra) const {
  // Delay mode's inflight above the BDP (the headroom, a probe's excess) is
  // time at the link's capacity, not at the flow's own rate: every flow on
  // a bottleneck adds the same bytes per round. An increase proportional to
  // the flow's own rate is multiplicative, and multiplicative increase with
  // a common decrease leaves shares where they are; an equal additive
  // increase converges them (Chiu and Jain, 1989; Swift's additive
  // increase). For a flow alone the two are the same.
  return capacity().bytes_in(extra);
}

Duration Rowan::max_headroom() const {
  // Enough for the flow's probes to find a faster path, never more than
  // the model mode's 2 BDPs.
  return std::min(target() * kMaxHeadroomTargets, rtt_or_hint());
}

void Rowan::model_round(BitsPerSec delivered, bool lossy) {
  // A buffer-filler at a shallow buffer drops this flow's packets too: a
  // round that loses more than BBRv2's 2 % brings the model down, as heavy
  // loss does in delay mode. A flow that ignored those losses held 70 % of
  // a 1-BDP buffer against one CUBIC flow, and CUBIC took every cut.
  if (lossy) {
    const BitsPerSec bw = std::min(bw_max_.get(), delivered).scaled(config_.loss_cut);
    bw_max_.reset(std::max(bw, floor_rate()), bw_rounds_);
  }
  // Random loss (under 2 % a round) and a deep competitor's buffer are
  // not ours to cut for.
  // The way back: the queue at target again in cruising rounds (probing
  // rounds and the drain after them make their own queue) ...
  if (cycle_idx_ >= 2 && queue_valid_ && queue_ <= target() && noise_ * 2 <= target()) {
    if (++calm_ >= config_.calm_rounds) {
      trial_interval_ = config_.probe_rounds * kTrialCycles;
      enter_mode(Mode::kDelay);
      return;
    }
  } else if (cycle_idx_ >= 2) {
    calm_ = 0;
  }
  // ... or a trial: other rowan flows in model mode keep the queue up as a
  // competitor would, so now and then the flow tries delay mode again. A
  // buffer-filler keeps the queue and the flow is squeezed back here,
  // trying again half as often (at most every kMaxTrialFactor × the first
  // interval).
  if (++model_rounds_ >= trial_interval_ && noise_ * 2 <= target()) {
    trial_ = true;
    enter_mode(Mode::kDelay);
  }
}

void Rowan::end_drain(TimePoint now) {
  draining_ = false;
  last_drain_ = now;
  skip_ = 1;  // the next round's samples are the drain's
}

void Rowan::enter_steady(TimePoint now) {
  phase_ = Phase::kSteady;
  cycle_stamp_ = now;
  enter_mode(Mode::kDelay, /*is_switch=*/false);  // leaving startup is not a switch
}

void Rowan::enter_mode(Mode m, bool is_switch) {
  mode_ = m;
  if (is_switch) ++mode_switches_;
  pressure_ = 0;
  calm_ = 0;
  model_rounds_ = 0;
  low_rounds_ = 0;
  velocity_ = 1;
  pressure_at_zero_ = 0;
  if (m == Mode::kDelay) {
    headroom_ = target();
    skip_ = 1;
  }
  // Start cruising at a random phase of the cycle (BBR), not probing.
  rng_ ^= rng_ << 13;
  rng_ ^= rng_ >> 17;
  rng_ ^= rng_ << 5;
  cycle_idx_ = 2 + rng_ % std::max<uint32_t>(config_.probe_rounds - 2, 1);
  probe_extra_ = target();
  probe_bw0_ = bw_max_.get();
}

void Rowan::advance_cycle(const AckEvent& ev) {
  const Duration rtt = rtt_or_hint();
  const bool full_length = ev.now - cycle_stamp_ > rtt;
  const BitsPerSec bw = bw_max_.get();
  bool next = false;
  if (cycle_idx_ == 0) {
    // Probe until in-flight reaches the probe's bound or there is loss, for
    // two round trips at most (an app-limited flow never reaches it).
    // A floor is part of the pipe: the probe's excess is above it.
    const Bytes bound = mode_ == Mode::kDelay
                            ? bdp(bw, 1.0) + bw.bytes_in(floor_) + excess_bytes(probe_extra_)
                            : bdp(bw, config_.probe_gain);
    next = ev.now - cycle_stamp_ > rtt * 2 ||
           (full_length && (ev.lost_bytes > 0 || ev.prior_in_flight >= bound));
  } else if (cycle_idx_ == 1) {
    next = full_length || ev.prior_in_flight <= bdp(bw, 1.0);
  } else {
    next = full_length;
    // In delay mode a probe bounds its queue by a small inflight excess, so
    // it can raise the model by only that much: a probe that found the path
    // faster probes again at once, with twice the excess (a path that grew,
    // or a competitor that left, is found in a few rounds, as in startup).
    // Only with the queue at target: above it, the growth was taken from the
    // other flows' share of the queue (a FIFO serves flows in proportion to
    // their inflight), not found on the path, and probing again at once with
    // twice the excess takes more of it each time. One flow among 16 ran
    // away that way to 70 of 200 Mbit/s and squeezed the rest into model
    // mode.
    if (mode_ == Mode::kDelay && !probe_bw0_.is_zero() && queue_valid_ && queue_ <= target()) {
      // The excess is bytes at the link's capacity, so a flow with a small
      // share expects to grow by proportionally more.
      const double grown = static_cast<double>(excess_bytes(probe_extra_)) /
                           (2.0 * static_cast<double>(std::max(bw.bytes_in(rtt), mss_)));
      if (bw > probe_bw0_.scaled(1.0 + grown)) {
        probe_extra_ = std::min(probe_extra_ * 2, rtt / 4);
        cycle_idx_ = config_.probe_rounds - 1;
        next = true;
      }
    }
  }
  if (next) {
    cycle_idx_ = (cycle_idx_ + 1) % config_.probe_rounds;
    cycle_stamp_ = ev.now;
    if (cycle_idx_ == 0) {
      if (probe_bw0_.is_zero() || bw <= probe_bw0_) probe_extra_ = std::max(target(), headroom_);
      probe_bw0_ = bw;
    }
    answer_test_phase(ev.now);
  }
}

Bytes Rowan::hosts_allowance(Bytes aggr) const {
  // Little's law over the whole loop: to deliver bw the flight must cover
  // bw × (min RTT + path spread + the hosts' part of the loop). The hosts'
  // part is outside the slack's cap, which is there because N flows' slack
  // adds up to a queue at the bottleneck; bytes held in the hosts do not.
  // The ACK-aggregation allowance already covers the part that arrives in
  // bunches.
  const Bytes h = bw_max_.get().bytes_in(host_);
  return h > aggr ? h - aggr : 0;
}

void Rowan::answer_test_phase(TimePoint now) {
  // Does the standing queue answer this flow's own inflight? The cycle's
  // 0.75 phase takes the flow's flight down to the BDP, removing its
  // excess (slack and headroom) from the bottleneck. If the queue is made
  // of flows' excess, the packets sent at the end of that phase see it
  // shorter by this flow's share of it; a delay floor that jitter or a late
  // path lays under every sample does not move. Judged in delay mode on
  // cruising rounds that had a queue above target.
  if (mode_ != Mode::kDelay) {
    answer_state_ = AnswerTest::kIdle;
    return;
  }
  if (cycle_idx_ == 0) {
    const Bytes bdp1 = bdp(bw_max_.get(), 1.0);
    answer_state_ = AnswerTest::kIdle;
    if (!queue_valid_ || queue_ <= target() || cwnd_ <= bdp1) return;
    answer_q0_ = queue_;
    answer_excess_ = capacity().transfer_time(cwnd_ - bdp1);
    answer_state_ = AnswerTest::kProbing;
  } else if (cycle_idx_ == 1 && answer_state_ == AnswerTest::kProbing) {
    answer_from_ = now;
    answer_min_ = Duration::infinite();
    answer_out_ = flight_;
    answer_state_ = AnswerTest::kDraining;
  } else if (cycle_idx_ == 2 && answer_state_ == AnswerTest::kDraining) {
    answer_to_ = now;
    answer_out_ = answer_out_ > flight_ ? answer_out_ - flight_ : 0;
    answer_state_ = AnswerTest::kWaiting;
  }
}

void Rowan::answer_test_sample(const AckEvent& ev) {
  if (answer_state_ != AnswerTest::kDraining && answer_state_ != AnswerTest::kWaiting) return;
  const TimePoint sent = ev.largest_acked_sent_time;
  if (sent < answer_from_) return;
  if (answer_state_ == AnswerTest::kDraining || sent <= answer_to_) {
    answer_min_ = std::min(answer_min_, ev.rtt);
    return;
  }
  // Every packet the phase sent is in: judge.
  answer_state_ = AnswerTest::kIdle;
  const Duration m = min_rtt_.get();
  if (answer_min_.is_infinite() || m.is_infinite()) return;
  const Duration qd = answer_min_ > m ? answer_min_ - m : Duration::zero();
  const Duration drop = answer_q0_ > qd ? answer_q0_ - qd : Duration::zero();
  // A queue the flow built shrinks by what the phase took out of its
  // flight: its excess, or less where the excess (a floor counted in the
  // flight) is more than a phase at 0.75 for one min RTT takes out, or
  // where the model's rate is above the link's and 0.75 of it drains less.
  const Duration drained = std::min(answer_excess_, capacity().transfer_time(answer_out_));
  queue_answers_ = drop * 2 >= drained;
  // What did not move is a floor (jitter kept in FIFO order, a late path):
  // the flight covers it and the targets are judged above it. One test
  // cannot tell: jitter in both directions moves each of its two round
  // minima by about as much as the phase takes out, so single tests (or two
  // in a row) say "floor" or "answers" at random. The floor is judged on the
  // tests' running means, where that noise averages out and a queue that
  // answers still falls by what the phase took out. It counts only where
  // nothing else can explain it, since a drain by one flow cannot tell a
  // floor from other flows' queue (their probes, a buffer-filler's sawtooth,
  // fill what it took out): the queue answered on average (flows' excess);
  // it grew on average across the tests (a newcomer's startup, a
  // buffer-filler); or the flow carries less than kCarriesLink of the
  // hinted link (someone else may hold the queue).
  const Duration fall = answer_q0_ - qd;
  if (!carries_link()) {
    answer_tests_ = 0;
  } else {
    const bool first = answer_tests_ == 0;
    mean_drop_ = first ? fall : mean_drop_ + (fall - mean_drop_) / 4;
    mean_drained_ = first ? drained : mean_drained_ + (drained - mean_drained_) / 4;
    mean_left_ = first ? qd : mean_left_ + (qd - mean_left_) / 4;
    if (answer_tests_ < 255) ++answer_tests_;
  }
  const Duration half = mean_drained_ / 2;
  // Once counted, the floor's own allowance builds queue that the next
  // phase drains (it leaves the floor out), so it stays until the queue
  // answers by all the phase took out, not half.
  const Duration answers_at = floor_.is_zero() ? half : mean_drained_;
  const bool still = answer_tests_ >= kFloorTests && mean_drop_ < answers_at &&
                     mean_drop_ > Duration::zero() - half;
  floor_ = still ? std::min(mean_left_, rtt_or_hint()) : Duration::zero();
}

void Rowan::set_outputs() {
  const BitsPerSec bw = bw_max_.get();
  const Bytes quanta = 3 * send_quantum();
  const Bytes aggr = std::min(extra_acked(), bw.bytes_in(kExtraAckedMaxTime));
  Bytes cwnd = 0;
  switch (phase_) {
    case Phase::kStartup: {
      pacing_ = std::max(bw.scaled(config_.high_gain), initial_rate_);
      // The hosts' part of the loop holds a startup's flight too.
      const BitsPerSec r = std::max(bw, initial_rate_);
      cwnd = bdp(r, config_.high_gain) + quanta +
             static_cast<Bytes>(static_cast<double>(r.bytes_in(host_)) * config_.high_gain);
      cwnd = std::max<Bytes>(cwnd, config_.initial_cwnd_packets * mss_);
      break;
    }
    case Phase::kDrain:
      pacing_ = std::max(bw.scaled(1.0 / config_.high_gain), floor_rate());
      cwnd = bdp(bw, config_.high_gain) + quanta;
      break;
    case Phase::kSteady:
      if (mode_ == Mode::kDelay) {
        // The model's rate and BDP; delay bounds only the headroom above it.
        const double gain = cycle_idx_ == 0   ? config_.probe_gain
                            : cycle_idx_ == 1 ? 2.0 - config_.probe_gain
                                              : 1.0;
        pacing_ = std::max(bw.scaled(gain), floor_rate());
        const Duration extra = cycle_idx_ == 0 ? probe_extra_ : headroom_;
        // One quantum of slack, not three: the slack is queue when the
        // flow probes into a full pipe.
        // The slack (spread, aggregation, a quantum) is at most a quarter
        // of the BDP: a small flow among many sees its ACKs bunched by the
        // others' packets, and N flows' slack would add up to a standing
        // queue that no single flow's headroom can take away.
        const Bytes bdp1 = bdp(bw, 1.0);
        Bytes slack = bw.bytes_in(spread_) + aggr + send_quantum();
        // A standing queue above target that answered the flow's own
        // inflight means the bottleneck never idled: the slack only adds
        // queue there, and N flows' slack (or a long-RTT flow's) would hold
        // it against every flow's target. A floor that did not answer
        // (jitter, a late path) keeps the slack that delivers through it.
        const Duration q = queue_above_floor();
        if (queue_answers_ && queue_valid_ && q > target()) {
          const Bytes cut = bw.bytes_in(q - target());
          slack = slack > cut ? slack - cut : 0;
        }
        const Bytes up = excess_bytes(extra);
        // A floor is time every byte spends on the path outside any queue:
        // the cap, there for queue, stands above it. The aggregation
        // allowance overlaps it (ACKs bunched behind the same jitter). The
        // 0.75 phase leaves it out, so that a queue the allowance itself
        // built drains and the next test finds the floor alone.
        const Bytes fl = cycle_idx_ == 1 ? 0 : bw.bytes_in(floor_);
        const Bytes kept =
            std::min(slack + fl - std::min(aggr, fl), std::max(bdp1 / 4, 2 * mss_) + fl);
        // Only the aggregation allowance the cap kept overlaps the hosts'
        // part: where the BDP is small beside the hosts' lateness (short
        // paths, late hosts) the cap cuts most of it away.
        cwnd = bdp1 + kept + up + hosts_allowance(std::min(aggr, kept));
      } else {
        const double gain = cycle_idx_ == 0   ? config_.probe_gain
                            : cycle_idx_ == 1 ? 2.0 - config_.probe_gain
                                              : 1.0;
        pacing_ = std::max(bw.scaled(gain * kPacingMargin), floor_rate());
        // Enough in flight to deliver bw through the queue as it is now
        // (plus BBR's probing excess), at most cwnd_gain BDPs: the flow
        // holds its share against a buffer-filler, and among rowan flows it
        // stops yielding without taking more than its probes find.
        const Bytes hold =
            bw.bytes_in(rtt_or_hint() + queue_ + spread_) + bdp(bw, config_.probe_gain - 1.0);
        cwnd = std::min(hold, bdp(bw, config_.cwnd_gain)) + aggr + quanta + hosts_allowance(aggr);
      }
      break;
  }
  if (phase_ == Phase::kSteady && draining_) {
    pacing_ = std::max(bw, floor_rate());
    cwnd = bdp(bw, 0.5);
  }
  cwnd_ = std::max<Bytes>(cwnd, kMinCwndPackets * mss_);
}

}  // namespace rowan::cc
