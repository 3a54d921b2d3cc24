#include "rowan/rowan.h"

#include <algorithm>
#include <cmath>

#include "registry.h"

namespace rowan::cc {
namespace {

constexpr uint32_t kOne = Rowan::kOne;
constexpr uint32_t kStartupGrowth = 2;            // rate × 2 per round in startup
constexpr uint32_t kFullBwThresh = kOne * 5 / 4;  // startup plateau: < 25% growth ...
constexpr uint32_t kFullBwRounds = 3;             // ... for 3 rounds
constexpr uint32_t kMaxVelocityShift = 16;
// Velocity counts steps with the queue below 3/4 of this flow's target.
constexpr int64_t kVelNum = 3;
constexpr int64_t kVelDen = 4;
constexpr uint64_t kMaxVelocityRatio = kOne / 8;  // velocity: at most gain·√(r·C)/8 per step
constexpr uint32_t kMinCwndPackets = 4;
constexpr uint64_t kMaxBwRounds = 10;
// A loss ratio needs a few losses to mean anything (one loss in a 10-packet
// first round is not a policer).
constexpr uint64_t kMinHeavyLossPackets = 4;
// Noise floor of the target: kNoiseGain × the noise of the RTT signal, at
// most min(base RTT / kNoiseRttDiv + kNoiseFixed, base RTT / 4) (within the
// queueing budget of 0.05 × base RTT + 1 ms).
constexpr int64_t kNoiseGain = 4;
constexpr int64_t kNoiseRttDiv = 40;
constexpr Duration kNoiseFixed = Duration::from_us(750);
constexpr Duration kQuantumTime = Duration::from_us(25);
constexpr Duration kMaxQuantumTime = Duration::from_ms(1);
constexpr Bytes kMaxQuantum = 64 * 1024ULL;

// r × f / kOne, in 128 bits, saturating.
BitsPerSec mul_frac(BitsPerSec r, uint64_t f) {
  const u128 v = static_cast<u128>(r.bps()) * f / kOne;
  return BitsPerSec::from_bps(v > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(v));
}

// a / b as a kOne fixed-point fraction, saturating at `max`; a, b ≥ 0.
uint64_t ratio(Duration a, Duration b, uint64_t max) {
  if (a.ns() <= 0) return 0;
  if (b.ns() <= 0) return max;
  const u128 v = (static_cast<u128>(a.ns()) << 16) / static_cast<u128>(b.ns());
  return v > max ? max : static_cast<uint64_t>(v);
}

// Integer square root of a 128-bit value (floor).
uint64_t isqrt(u128 x) {
  u128 r = 0;
  u128 bit = static_cast<u128>(1) << 126;
  while (bit > x) bit >>= 2;
  while (bit != 0) {
    if (x >= r + bit) {
      x -= r + bit;
      r = (r >> 1) + bit;
    } else {
      r >>= 1;
    }
    bit >>= 2;
  }
  return static_cast<uint64_t>(r);
}

uint32_t get_frac(const CcParams& p, const std::string& key, uint32_t def, double lo, double hi) {
  const double v = p.get_double(key, static_cast<double>(def) / kOne, lo, hi);
  return static_cast<uint32_t>(std::lround(v * kOne));
}

ControllerPtr make_rowan(const Clock& clock, const PathHints& hints, const CcParams& params) {
  return std::make_unique<Rowan>(clock, hints, Rowan::parse(params));
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
  c.gain_up = get_frac(p, "gain_up", c.gain_up, 0.01, 4);
  c.gain_down = get_frac(p, "gain_down", c.gain_down, 0.01, 4);
  c.max_decrease = get_frac(p, "max_decrease", c.max_decrease, 0.01, 0.9);
  c.heavy_loss = get_frac(p, "heavy_loss", c.heavy_loss, 0.01, 1);
  c.loss_cut = get_frac(p, "loss_cut", c.loss_cut, 0.1, 1);
  c.startup_fraction = get_frac(p, "startup_fraction", c.startup_fraction, 0.001, 1);
  c.cwnd_gain = get_frac(p, "cwnd_gain", c.cwnd_gain, 1, 8);
  c.max_rate_factor = get_frac(p, "max_rate_factor", c.max_rate_factor, 0.1, 16);
  c.min_rtt_window = p.get_duration("min_rtt_window", c.min_rtt_window);
  if (c.min_rtt_window < Duration::from_ms(100) || c.min_rtt_window > Duration::from_s(600))
    throw CcParamError("min_rtt_window: must be within [100ms, 600s]");
  c.rebase_rounds = static_cast<uint32_t>(p.get_double("rebase_rounds", c.rebase_rounds, 2, 1000));
  c.initial_cwnd_packets =
      static_cast<uint32_t>(p.get_double("initial_cwnd_packets", c.initial_cwnd_packets, 4, 1000));
  return c;
}

Rowan::Rowan(const Clock& clock, const PathHints& hints, const Config& config)
    : CongestionController(clock, hints),
      config_(config),
      mss_(hints.mss == 0 ? 1400 : hints.mss),
      min_rtt_(config.min_rtt_window, Duration::infinite(), TimePoint::zero()),
      standing_rtt_(Duration::from_ms(1), Duration::infinite(), TimePoint::zero()),
      max_bw_(kMaxBwRounds, BitsPerSec::zero(), 0) {
  const Duration rtt0 = hints.base_rtt.is_zero() ? Duration::from_ms(1) : hints.base_rtt;
  const BitsPerSec from_window =
      BitsPerSec::from_bytes_per(config_.initial_cwnd_packets * mss_, rtt0);
  rate_ = hints.link_rate.is_zero()
              ? from_window
              : std::max(from_window, mul_frac(hints.link_rate, config_.startup_fraction));
  rate_ = cap(rate_);
  base_rtt_ = hints.base_rtt;
  set_cwnd();
}

BitsPerSec Rowan::capacity() const {
  if (!hints_.link_rate.is_zero()) return hints_.link_rate;
  return std::max(max_bw_.get(), rate_);
}

BitsPerSec Rowan::cap(BitsPerSec r) const {
  if (!hints_.link_rate.is_zero())
    r = std::min(r, mul_frac(hints_.link_rate, config_.max_rate_factor));
  // Floor: a few packets per round trip (never above the hinted link rate).
  const Duration rtt = base_rtt_.is_zero() ? Duration::from_ms(1) : base_rtt_;
  BitsPerSec floor = BitsPerSec::from_bytes_per(kMinCwndPackets * mss_, rtt);
  if (!hints_.link_rate.is_zero()) floor = std::min(floor, hints_.link_rate);
  return std::max(r, floor);
}

Duration Rowan::target() const {
  // Flow scaling: target_queue + fs_range × (1 − √share), share = rate / capacity.
  const BitsPerSec c = capacity();
  uint64_t share = c.is_zero() ? kOne
                               : static_cast<uint64_t>(std::min<u128>(
                                     static_cast<u128>(rate_.bps()) * kOne / c.bps(), kOne));
  const uint64_t sqrt_share = isqrt(static_cast<u128>(share) << 16);  // kOne fixed point
  const Duration fs =
      Duration::from_ns(static_cast<int64_t>(static_cast<u128>(config_.fs_range.ns()) *
                                             (kOne - std::min<uint64_t>(sqrt_share, kOne)) / kOne));
  // On very short paths the target shrinks with the RTT (a 100 us target would
  // be a whole buffer at 0.1 ms), but never below two packets' serialization
  // at the capacity (packet granularity).
  Duration tq = config_.target_queue;
  Duration fr = fs;
  if (!base_rtt_.is_zero()) {
    tq = std::min(tq, base_rtt_ / 4);
    fr = std::min(fr, base_rtt_ / 2);
  }
  const Duration floor = c.is_zero() ? Duration::zero() : c.transfer_time(2 * mss_);
  // The noise floor scales with √share: many flows that each hold a small
  // share move the queue within a round (that is not noise), and a small flow
  // already has the flow-scaling term.
  const Duration nf = Duration::from_ns(static_cast<int64_t>(
      static_cast<u128>(noise_floor().ns()) * std::min<uint64_t>(sqrt_share, kOne) / kOne));
  return std::max({tq, floor, nf}) + fr;
}

Duration Rowan::noise_floor() const {
  // RTT samples that are late by up to `rtt_noise_` put the standing-RTT
  // estimate that far above the true minimum with no queue at all: a target
  // below that reads measurement noise as standing queue and keeps cutting.
  // Bounded by the queueing budget (a share of the base RTT plus a fixed part
  // for the scheduling noise of end hosts), so a noiseless path keeps its
  // small target and a noisy one can never justify a large queue.
  return std::min(rtt_noise_ * kNoiseGain, noise_ceiling(base_rtt_));
}

Duration Rowan::noise_ceiling(Duration base) {
  return std::min(base / kNoiseRttDiv + kNoiseFixed, base / 4);
}

Bytes Rowan::send_quantum() const {
  // A burst of up to base RTT / 16 at the pacing rate, at most 1 ms (Linux's
  // TSO autosizing and BBR use ~1 ms): a software host whose event loop wakes
  // late by a few hundred microseconds can release only one quantum per
  // wake-up, so a 25 us quantum (2 packets) capped a 100 Mbit/s flow at a
  // fraction of its pacing rate, and the rate then followed the delivered
  // rate down. Short paths keep short bursts (their queue budget is small).
  const Duration t = base_rtt_.is_zero()
                         ? kQuantumTime
                         : std::clamp(base_rtt_ / 16, kQuantumTime, kMaxQuantumTime);
  return std::clamp(rate_.bytes_in(t), 2 * mss_, std::max(kMaxQuantum, 2 * mss_));
}

void Rowan::set_cwnd() {
  Duration rtt = base_rtt_;
  if (rtt.is_zero()) rtt = srtt_;
  if (rtt.is_zero()) {
    cwnd_ = config_.initial_cwnd_packets * mss_;
    return;
  }
  const Duration t = config_.target_queue + config_.fs_range;
  const Bytes bdp = rate_.bytes_in(rtt + t);
  const Bytes w = static_cast<Bytes>(static_cast<u128>(bdp) * config_.cwnd_gain / kOne);
  cwnd_ = std::max<Bytes>(w + 3 * send_quantum(), kMinCwndPackets * mss_);
}

void Rowan::on_packet_sent(const SentEvent& ev) {
  if (ev.app_limited) round_app_limited_ = true;
}

void Rowan::update_rtt(const AckEvent& ev) {
  if (ev.rtt.is_zero()) return;
  srtt_ = srtt_.is_zero() ? ev.rtt : srtt_ + (ev.rtt - srtt_) / 8;
  // The base RTT filter takes the median of the last three samples: a host
  // that timestamps an ACK late or early (a busy event loop, a preempted
  // thread) produces single samples far below the path's real minimum, and a
  // windowed minimum would keep such an outlier for its whole window — every
  // later sample would then read as standing queue.
  const Duration a = recent_rtt_[1].is_zero() ? ev.rtt : recent_rtt_[1];
  const Duration b = recent_rtt_[2].is_zero() ? ev.rtt : recent_rtt_[2];
  const Duration med = std::max(std::min(a, b), std::min(std::max(a, b), ev.rtt));
  // The least of the last four samples (infinite until there are four).
  recent_min_rtt_ = recent_rtt_[0].is_zero()
                        ? Duration::infinite()
                        : std::min({recent_rtt_[0], recent_rtt_[1], recent_rtt_[2], ev.rtt});
  recent_rtt_[0] = recent_rtt_[1];
  recent_rtt_[1] = recent_rtt_[2];
  recent_rtt_[2] = ev.rtt;
  min_rtt_.update(med, ev.now);
  const Duration measured = min_rtt_.get();
  // The configured base RTT is a floor the path cannot beat: use it while the
  // measurements agree (a flow starting into a standing queue would otherwise
  // take that queue for propagation delay), the measurement otherwise. A
  // startup that proved the path had no queue raises that floor to what the
  // path really takes (hosts' stacks and processing, see exit_startup).
  // A measurement below that floor replaces it only when it is below by
  // more than 1/8: on the testbed samples stamped early by the gateway's
  // event loop put the transport's minimum 1.2 ms under the wire path
  // (18.90 vs 20.07 ms on a 20 ms path), several at once (the median of
  // three passes them), and every normal sample then read as queue. A
  // configured base RTT that is really too high by less than 1/8 costs at
  // most that much queue.
  const Duration hint = std::max(hints_.base_rtt, proven_base_);
  base_rtt_ = (!hint_off_ && !hint.is_zero() && hint <= measured + hint / 8) ? hint : measured;
  standing_rtt_.set_window(std::max(srtt_ / 4, Duration::from_us(10)));
  standing_rtt_.update(ev.rtt, ev.now);
  const Duration standing = standing_rtt_.get();
  queue_ = standing > base_rtt_ ? standing - base_rtt_ : Duration::zero();
  round_min_rtt_ = std::min(round_min_rtt_, ev.rtt);
  // Samples of packets sent after the last rate change show its effect.
  if (ev.largest_acked_sent_time >= last_change_) fresh_ = true;
}

void Rowan::on_ack(const AckEvent& ev) {
  update_rtt(ev);
  const bool long_round =
      !round_start_time_.is_zero() && !srtt_.is_zero() && ev.now - round_start_time_ > srtt_ * 4;
  if (ev.round_start || long_round || round_start_time_.is_zero()) end_round(ev);
  round_acked_ += ev.acked_bytes;
  round_acked_pkts_ += ev.acked_packets;
  round_lost_pkts_ += ev.lost_packets;
  round_lost_ += ev.lost_bytes;
  if (ev.rate.is_app_limited) round_app_limited_ = true;

  if (phase_ == Phase::kStartup && !base_rtt_.is_zero()) {
    // Overshoot: a queue well above target in the standing RTT and in each
    // of the last four samples. A queue we build by sending faster than the
    // link stays; a late host, a delayed ACK or a jittery path lifts single
    // samples, and in the first rounds the standing RTT (srtt/4) holds only
    // one or two of them: on the testbed one such sample ended startup at
    // 5-15 Mbit/s of 200, and the low share then kept the flow there. Leave
    // at what the bottleneck delivered over the last full round; an
    // app-limited flow's delivery says nothing about the link, so it keeps
    // its rate.
    const Duration persisted = std::min(standing_rtt_.get(), recent_min_rtt_);
    if (persisted > base_rtt_ + std::max(target() * 4, base_rtt_ / 16)) {
      startup_min_rtt_ = Duration::infinite();  // a queue was there: nothing proven
      const bool app_limited = round_app_limited_ || ev.rate.is_app_limited;
      exit_startup(app_limited || last_delivery_rate_.is_zero()
                       ? rate_
                       : std::min(last_delivery_rate_, rate_));
    }
  }
  set_cwnd();
}

void Rowan::end_round(const AckEvent& ev) {
  const bool first = round_start_time_.is_zero();
  const Duration dur = ev.now - round_start_time_;
  const Bytes acked = round_acked_;
  const Bytes lost = round_lost_;
  const uint64_t acked_pkts = round_acked_pkts_;
  const uint64_t lost_pkts = round_lost_pkts_;
  const bool app_limited = round_app_limited_;
  round_start_time_ = ev.now;
  round_acked_ = 0;
  round_lost_ = 0;
  round_acked_pkts_ = 0;
  round_lost_pkts_ = 0;
  round_app_limited_ = false;
  const Duration round_min = round_min_rtt_;
  round_min_rtt_ = Duration::infinite();
  if (first || dur.ns() <= 0 || acked == 0) return;
  ++rounds_;
  // Noise of the delay signal: how far the standing RTT (min over srtt/4)
  // sits above the round's minimum. A queue that stands still, or moves by a
  // few packets per round, keeps the two together; a host that is late in
  // bursts (busy cores, sleeping event loops, a software path) lifts the
  // short-window minimum and not the round's.
  if (!round_min.is_infinite() && !srtt_.is_zero()) {
    const Duration standing = standing_rtt_.get();
    const Duration spread = standing > round_min ? standing - round_min : Duration::zero();
    rtt_noise_ = rtt_noise_ + (spread - rtt_noise_) / 8;
  }
  const BitsPerSec d = BitsPerSec::from_bytes_per(acked, dur);
  last_delivery_rate_ = d;
  if (!app_limited || d > max_bw_.get()) max_bw_.update(d, rounds_);
  const uint64_t total = acked_pkts + lost_pkts;
  const bool heavy_loss =
      lost_pkts >= kMinHeavyLossPackets && lost_pkts * kOne >= config_.heavy_loss * total;

  if (phase_ == Phase::kStartup) {
    startup_min_rtt_ = std::min(startup_min_rtt_, round_min);
    // At the hinted link rate (within 3%: the delivered rate is measured).
    const bool at_cap = !hints_.link_rate.is_zero() &&
                        mul_frac(rate_, kOne + kOne / 32) >= cap(BitsPerSec::infinite());
    if (!app_limited) {
      if (d >= mul_frac(full_bw_, kFullBwThresh)) {
        full_bw_ = d;
        full_bw_count_ = 0;
      } else {
        ++full_bw_count_;
      }
    }
    if (heavy_loss || full_bw_count_ >= kFullBwRounds || at_cap) {
      // Heavy loss, or an RTT that rose during startup, means a queue: the
      // path's base RTT is then not proven (40 flows that start together
      // overflow the buffer and leave on heavy loss with a queue in every
      // round's minimum).
      if (heavy_loss || round_min > startup_min_rtt_ + std::max(config_.target_queue,
                                                                capacity().transfer_time(2 * mss_)))
        startup_min_rtt_ = Duration::infinite();
      // Leave at the best rate the path delivered (a round that overflowed
      // the buffer delivers less than the link).
      exit_startup(at_cap ? cap(BitsPerSec::infinite()) : std::max(d, max_bw_.get()));
      return;
    }
    // Double per round, but stay within 4× of what the path delivered (the
    // delivered rate lags the pacing rate by a round; a cwnd-limited first
    // round must not run the pacing rate away from the link).
    const BitsPerSec bw = max_bw_.get();
    BitsPerSec next = mul_frac(rate_, uint64_t{kStartupGrowth} * kOne);
    if (!bw.is_zero()) {
      next = std::max(std::min(next, mul_frac(bw, uint64_t{4} * kOne)),
                      mul_frac(bw, uint64_t{2} * kOne));
    }
    rate_ = cap(next);
    return;
  }
  // One decision per feedback loop: the previous change must have shown up in
  // the RTT samples (packets sent after it acked) before the next one.
  if (!fresh_ && !heavy_loss) {
    pending_lost_ += lost_pkts;
    pending_acked_ += acked_pkts;
    return;
  }
  // Random loss is noise: bytes lost while the queue is near target took
  // their place on the link, so they count toward the rate the path accepted.
  const BitsPerSec accepted =
      queue_ <= target() * 2 ? BitsPerSec::from_bytes_per(acked + lost, dur) : d;
  steady_update(accepted, d, app_limited, lost_pkts + pending_lost_, acked_pkts + pending_acked_);
  pending_lost_ = 0;
  pending_acked_ = 0;
  fresh_ = false;
  last_change_ = ev.now;
}

void Rowan::exit_startup(BitsPerSec delivered) {
  phase_ = Phase::kSteady;
  // A startup that ended without a standing queue (at the link rate, on a
  // delivery plateau or on heavy loss, not by overshooting) proved the path
  // had no queue while it ramped up: a flow that starts into other flows'
  // queue at 1/8 of the link and doubles sees that queue grow by RTT/8 per
  // round and leaves by overshoot instead. The least RTT it saw is then the
  // path's own (the wire plus both gateways' stacks and event loops: 0.3 ms
  // above the configured 20 ms on the two-site testbed, which a 0.1-0.6 ms
  // target read as standing queue forever). Only an offset beyond what the
  // smallest target already absorbs (target_queue, two packets at the link
  // rate: a packet's own serialization) is taken: fairness is sensitive to
  // base RTTs that differ between flows, and a flow that started into a
  // queue proves nothing (measured: taking even the 72 us of one 9000-byte
  // packet at 1 Gbit/s moved two staggered flows from 521:470 to 617:374
  // Mbit/s). Bounded by the noise ceiling above the hint, so a wrong proof
  // costs at most that much queue.
  const Duration absorbed = std::max(
      std::min(config_.target_queue, hints_.base_rtt / 4),
      hints_.link_rate.is_zero() ? Duration::zero() : hints_.link_rate.transfer_time(2 * mss_));
  if (!hints_.base_rtt.is_zero() && !startup_min_rtt_.is_infinite() &&
      startup_min_rtt_ > hints_.base_rtt + absorbed) {
    proven_base_ = std::min(startup_min_rtt_, hints_.base_rtt + noise_ceiling(hints_.base_rtt));
  }
  rate_ = cap(delivered.is_zero() ? rate_ : delivered);
  empty_rounds_ = 0;
}

void Rowan::steady_update(BitsPerSec d, BitsPerSec delivered, bool app_limited, uint64_t lost,
                          uint64_t acked) {
  const Duration t = target();
  const Duration q = queue_;
  const Duration rtt = base_rtt_ + q;  // the total delay corrections are normalized by
  // Anchor on what the bottleneck delivered to us last round (damping): while
  // a queue exists that is our share of a busy link, so a rate cut made to
  // drain the queue is undone as soon as the queue is back at target. Bounded
  // by 5/4 of our rate (ACK bursts).
  const BitsPerSec anchor = app_limited ? rate_ : std::min(d, mul_frac(rate_, kOne * 5 / 4));
  const BitsPerSec c = capacity();

  // Velocity: consecutive rounds with an (almost) empty queue double the
  // increase, so capacity freed by a departing flow or a rate step is refilled
  // in a few rounds instead of target/RTT-sized steps.
  if (q * kVelDen < t * kVelNum && !app_limited) {
    empty_rounds_ = std::min(empty_rounds_ + 1, kMaxVelocityShift);
  } else if (q >= t) {
    empty_rounds_ = 0;
  }

  BitsPerSec next;
  if (q <= t) {
    // Below target: increase ∝ √(anchor × capacity) × (t − q)/rtt.
    uint64_t r = ratio(t - q, rtt, kOne);
    if (empty_rounds_ > 1) {
      r = std::min<uint64_t>(std::max<uint64_t>(r, kOne / 64) << (empty_rounds_ - 2),
                             kMaxVelocityRatio);
    }
    const uint64_t geo = isqrt(static_cast<u128>(anchor.bps()) * c.bps());
    const u128 inc = static_cast<u128>(geo) * config_.gain_up / kOne * r / kOne;
    next = BitsPerSec::from_bps(anchor.bps() +
                                static_cast<uint64_t>(std::min<u128>(inc, UINT64_MAX / 2)));
  } else {
    // Above target: decrease ∝ anchor × (q − t)/rtt, bounded per round.
    uint64_t r = ratio(q - t, rtt, kOne) * config_.gain_down / kOne;
    r = std::min<uint64_t>(r, config_.max_decrease);
    next = mul_frac(anchor, kOne - r);
    // An app-limited flow sends less than its pacing rate, so cutting the
    // pacing rate toward what it sends drains nothing: keep a margin above
    // the delivered rate, so the flow can grow as soon as it is cwnd-limited.
    if (app_limited) next = std::max(next, std::min(rate_, mul_frac(delivered, kOne * 5 / 4)));
  }

  // Loss: noise unless it comes with a queue well above target, or is heavy.
  const uint64_t total = acked + lost;
  const bool heavy = lost >= kMinHeavyLossPackets && lost * kOne >= config_.heavy_loss * total;
  if (lost > 0 && (heavy || q > std::max(t * 8, base_rtt_ / 8))) {
    rate_before_loss_cut_ = std::max(rate_, next);
    can_undo_ = !heavy;
    // Heavy loss (a policer): no faster than what actually arrived.
    next = mul_frac(heavy ? std::min(next, delivered) : next, config_.loss_cut);
  }

  // A "queue" that does not move while we cut is path delay (route change).
  // Only a queue far beyond any flow's target counts: competing rowan flows
  // settle at most at target_queue + fs_range, and must never be re-based.
  const Duration stuck_floor =
      std::max((config_.target_queue + config_.fs_range) * 4, base_rtt_ / 16);
  if (q > stuck_floor && !app_limited) {
    if (stuck_rounds_ == 0 || q + t / 4 < stuck_queue_) {
      stuck_rounds_ = 1;
      stuck_queue_ = q;
    } else if (++stuck_rounds_ >= config_.rebase_rounds) {
      hint_off_ = true;
      min_rtt_.reset(base_rtt_ + q, round_start_time_);
      base_rtt_ = base_rtt_ + q;
      queue_ = Duration::zero();
      stuck_rounds_ = 0;
    }
  } else {
    stuck_rounds_ = 0;
  }
  rate_ = cap(next);
}

void Rowan::on_rto(TimePoint now) {
  (void)now;
  rate_ = cap(mul_frac(rate_, kOne / 2));
  can_undo_ = false;
  empty_rounds_ = 0;
  round_start_time_ = TimePoint::zero();
  set_cwnd();
}

void Rowan::on_spurious_loss(TimePoint now) {
  (void)now;
  if (!can_undo_) return;
  rate_ = cap(std::max(rate_, rate_before_loss_cut_));
  can_undo_ = false;
  set_cwnd();
}

void Rowan::on_idle(TimePoint now) {
  (void)now;
  round_start_time_ = TimePoint::zero();
  round_acked_ = 0;
  round_lost_ = 0;
  round_acked_pkts_ = 0;
  round_lost_pkts_ = 0;
  empty_rounds_ = 0;
}

}  // namespace rowan::cc
