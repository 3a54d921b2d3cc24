#include "bbr/bbr.h"

#include <algorithm>

#include "registry.h"

namespace rowan::cc {
namespace {

constexpr int kCycleLen = 8;
constexpr double kPacingGain[kCycleLen] = {1.25, 0.75, 1, 1, 1, 1, 1, 1};
constexpr double kFullBwThresh = 1.25;
constexpr uint32_t kFullBwCount = 3;
constexpr double kPacingMargin = 0.99;
constexpr uint32_t kMinCwndPackets = 4;
constexpr uint32_t kExtraAckedWinRounds = 5;
constexpr Duration kExtraAckedMaxTime = Duration::from_ms(100);
constexpr Bytes kMaxQuantum = 64 * 1024ULL;

ControllerPtr make_bbr(const Clock& clock, const PathHints& hints, const CcParams& params) {
  return std::make_unique<Bbr>(clock, hints, Bbr::parse(params));
}

}  // namespace

ROWAN_REGISTER_CC("bbr", &make_bbr);

Bbr::Config Bbr::parse(const CcParams& params) {
  Config c;
  c.high_gain = params.get_double("high_gain", c.high_gain, 1.5, 4.0);
  c.cwnd_gain = params.get_double("cwnd_gain", c.cwnd_gain, 1.0, 4.0);
  c.probe_rtt_interval = params.get_duration("probe_rtt_interval", c.probe_rtt_interval);
  c.probe_rtt_duration = params.get_duration("probe_rtt_duration", c.probe_rtt_duration);
  if (c.probe_rtt_interval < Duration::from_ms(100) || c.probe_rtt_interval > Duration::from_s(600))
    throw CcParamError("probe_rtt_interval: must be within [100ms, 600s]");
  if (c.probe_rtt_duration > c.probe_rtt_interval)
    throw CcParamError("probe_rtt_duration: must not exceed probe_rtt_interval");
  c.bw_window_rounds = static_cast<uint64_t>(params.get_double("bw_window_rounds", 10, 4, 100));
  c.extra_acked_gain = params.get_double("extra_acked_gain", c.extra_acked_gain, 0.0, 2.0);
  c.initial_cwnd_packets = static_cast<uint32_t>(
      params.get_double("initial_cwnd_packets", c.initial_cwnd_packets, 4, 1000));
  return c;
}

Bbr::Bbr(const Clock& clock, const PathHints& hints, const Config& config)
    : CongestionController(clock, hints),
      config_(config),
      mss_(hints.mss == 0 ? 1400 : hints.mss),
      min_cwnd_(kMinCwndPackets * mss_),
      bw_filter_(config.bw_window_rounds, BitsPerSec::zero(), 0),
      pacing_gain_(config.high_gain),
      cwnd_gain_(config.high_gain),
      cwnd_(config.initial_cwnd_packets * mss_),
      rng_(static_cast<uint32_t>(clock.now().ns()) * 2654435761U + 1) {
  min_rtt_stamp_ = clock.now();
  // Initial pacing: high_gain × initial cwnd / RTT (Linux bbr_init_pacing_rate,
  // with the configured base RTT when known, 1 ms otherwise).
  const Duration rtt = hints.base_rtt.is_zero() ? Duration::from_ms(1) : hints.base_rtt;
  pacing_rate_ = BitsPerSec::from_bytes_per(cwnd_, rtt).scaled(config_.high_gain);
}

uint32_t Bbr::next_random() {
  rng_ ^= rng_ << 13;
  rng_ ^= rng_ >> 17;
  rng_ ^= rng_ << 5;
  return rng_;
}

Bytes Bbr::bdp(double gain) const {
  if (min_rtt_.is_infinite()) return config_.initial_cwnd_packets * mss_;  // no sample yet
  const Bytes bdp = btl_bw().bytes_in(min_rtt_);
  // Round up like Linux (w * gain + BBR_UNIT - 1) / BBR_UNIT, in bytes.
  return static_cast<Bytes>(static_cast<double>(bdp) * gain + 0.999999);
}

Bytes Bbr::send_quantum() const {
  const Bytes q = pacing_rate_.bytes_in(Duration::from_ms(1));
  return std::clamp(q, 2 * mss_, std::max(kMaxQuantum, 2 * mss_));
}

Bytes Bbr::quantization_budget(Bytes cwnd) const {
  cwnd += 3 * send_quantum();  // room for quanta in flight at the sender and receiver
  if (mode_ == Mode::kProbeBw && cycle_idx_ == 0) cwnd += 2 * mss_;  // probe a bit more
  return cwnd;
}

Bytes Bbr::extra_acked() const { return std::max(extra_acked_[0], extra_acked_[1]); }

void Bbr::on_packet_sent(const SentEvent& ev) {
  if (ev.in_flight <= ev.bytes && ev.app_limited) {
    // Restarting from idle (Linux CA_EVENT_TX_START): pace at BtlBw, do not
    // treat the app-limited gap as a reason to probe RTT.
    idle_restart_ = true;
    ack_epoch_stamp_ = ev.now;
    ack_epoch_acked_ = 0;
    if (mode_ == Mode::kProbeBw) set_pacing_rate(btl_bw(), 1.0);
  }
}

void Bbr::on_idle(TimePoint now) {
  idle_restart_ = true;
  ack_epoch_stamp_ = now;
  ack_epoch_acked_ = 0;
}

void Bbr::on_ack(const AckEvent& ev) {
  delivered_ += ev.acked_bytes;
  if (ev.round_start) ++round_count_;
  // The bandwidth filter's window counts rounds outside PROBE_RTT only: at a
  // 20 ms RTT the 200 ms PROBE_RTT alone is 10 rounds, the whole window, and a
  // filter that kept counting would forget BtlBw and restart from the 4-packet
  // rate (BBRv2 keeps its bw_hi across PROBE_RTT for the same reason).
  if (ev.round_start && mode_ != Mode::kProbeRtt) ++bw_round_count_;
  if (ev.rate.delivered > 0) idle_restart_ = false;

  update_bw(ev);
  update_ack_aggregation(ev);
  update_cycle_phase(ev);
  check_full_bw_reached(ev);
  check_drain(ev);
  update_min_rtt(ev);
  update_gains();

  set_pacing_rate(btl_bw(), pacing_gain_);
  set_cwnd(ev);
}

void Bbr::update_bw(const AckEvent& ev) {
  if (!ev.rate.valid() || ev.rate.delivered == 0) return;
  const BitsPerSec bw = ev.rate.rate();
  // Only app-limited samples that raise the estimate are taken, and in
  // PROBE_RTT (a window of 4 packets) only those too.
  const bool limited = ev.rate.is_app_limited || mode_ == Mode::kProbeRtt;
  if (!limited || bw >= btl_bw()) bw_filter_.update(bw, bw_round_count_);
}

void Bbr::update_ack_aggregation(const AckEvent& ev) {
  if (config_.extra_acked_gain <= 0 || ev.acked_bytes == 0 || !ev.rate.valid()) return;
  if (ev.round_start) {
    if (++extra_acked_win_rounds_ >= kExtraAckedWinRounds) {
      extra_acked_win_rounds_ = 0;
      extra_acked_idx_ ^= 1;
      extra_acked_[extra_acked_idx_] = 0;
    }
  }
  // Data expected to be acked since the epoch at the estimated bandwidth.
  const Bytes expected = btl_bw().bytes_in(ev.now - ack_epoch_stamp_);
  // Reset the epoch when ACKs are behind the estimate (no aggregation now).
  if (ack_epoch_stamp_.is_zero() || ack_epoch_acked_ <= expected) {
    ack_epoch_acked_ = 0;
    ack_epoch_stamp_ = ev.now;
    ack_epoch_acked_ += ev.acked_bytes;
    return;
  }
  ack_epoch_acked_ += ev.acked_bytes;
  const Bytes extra = std::min(ack_epoch_acked_ - expected, cwnd_);
  extra_acked_[extra_acked_idx_] = std::max(extra_acked_[extra_acked_idx_], extra);
}

void Bbr::update_cycle_phase(const AckEvent& ev) {
  if (mode_ != Mode::kProbeBw) return;
  const bool full_length = ev.now - cycle_stamp_ > min_rtt_;
  const double gain = pacing_gain_;
  bool next = false;
  if (gain == 1.0) {
    next = full_length;
  } else if (gain > 1.0) {
    // Probe until in-flight reaches gain × BDP or there is loss.
    next = full_length && (ev.lost_bytes > 0 || ev.prior_in_flight >= bdp(gain));
  } else {
    // Drain until in-flight falls to the BDP, or a round passed.
    next = full_length || ev.prior_in_flight <= bdp(1.0);
  }
  if (next) {
    cycle_idx_ = (cycle_idx_ + 1) % kCycleLen;
    cycle_stamp_ = ev.now;
  }
}

void Bbr::check_full_bw_reached(const AckEvent& ev) {
  if (full_bw_reached_ || !ev.round_start || ev.rate.is_app_limited) return;
  const BitsPerSec bw = btl_bw();
  if (bw >= full_bw_.scaled(kFullBwThresh)) {
    full_bw_ = bw;
    full_bw_count_ = 0;
    return;
  }
  full_bw_reached_ = ++full_bw_count_ >= kFullBwCount;
}

void Bbr::check_drain(const AckEvent& ev) {
  if (mode_ == Mode::kStartup && full_bw_reached_) mode_ = Mode::kDrain;
  if (mode_ == Mode::kDrain && ev.in_flight <= bdp(1.0)) enter_probe_bw(ev.now);
}

void Bbr::enter_probe_bw(TimePoint now) {
  mode_ = Mode::kProbeBw;
  // Random start phase, never the 0.75 drain phase first (Linux: cycle_idx =
  // CYCLE_LEN - 1 - rand(CYCLE_RAND), then advance).
  cycle_idx_ = (kCycleLen - 1 - static_cast<int>(next_random() % (kCycleLen - 1)) + 1) % kCycleLen;
  cycle_stamp_ = now;
}

void Bbr::reset_mode() {
  if (!full_bw_reached_) {
    mode_ = Mode::kStartup;
  } else {
    enter_probe_bw(min_rtt_stamp_);
  }
}

void Bbr::update_min_rtt(const AckEvent& ev) {
  const bool expired = ev.now > min_rtt_stamp_ + config_.probe_rtt_interval;
  if (!ev.rtt.is_zero() && (ev.rtt < min_rtt_ || expired)) {
    min_rtt_ = ev.rtt;
    min_rtt_stamp_ = ev.now;
  }
  if (!config_.probe_rtt_duration.is_zero() && expired && !idle_restart_ &&
      mode_ != Mode::kProbeRtt) {
    mode_ = Mode::kProbeRtt;
    prior_cwnd_ = std::max(prior_cwnd_, cwnd_);  // save cwnd (bbr_save_cwnd)
    probe_rtt_done_stamp_ = TimePoint::zero();
  }
  if (mode_ == Mode::kProbeRtt) {
    if (probe_rtt_done_stamp_.is_zero() && ev.in_flight <= min_cwnd_) {
      probe_rtt_done_stamp_ = ev.now + config_.probe_rtt_duration;
      probe_rtt_round_done_ = false;
    } else if (!probe_rtt_done_stamp_.is_zero()) {
      if (ev.round_start) probe_rtt_round_done_ = true;
      if (probe_rtt_round_done_ && ev.now > probe_rtt_done_stamp_) {
        min_rtt_stamp_ = ev.now;
        cwnd_ = std::max(cwnd_, prior_cwnd_);
        prior_cwnd_ = 0;
        reset_mode();
        cycle_stamp_ = ev.now;
      }
    }
  }
}

void Bbr::update_gains() {
  switch (mode_) {
    case Mode::kStartup:
      pacing_gain_ = config_.high_gain;
      cwnd_gain_ = config_.high_gain;
      break;
    case Mode::kDrain:
      pacing_gain_ = 1.0 / config_.high_gain;
      cwnd_gain_ = config_.high_gain;
      break;
    case Mode::kProbeBw:
      pacing_gain_ = kPacingGain[cycle_idx_];
      cwnd_gain_ = config_.cwnd_gain;
      break;
    case Mode::kProbeRtt:
      pacing_gain_ = 1.0;
      cwnd_gain_ = 1.0;
      break;
  }
}

void Bbr::set_pacing_rate(BitsPerSec bw, double gain) {
  if (!has_seen_rtt_ && !min_rtt_.is_infinite()) {
    has_seen_rtt_ = true;
    // Re-derive the initial rate from the first real RTT (bbr_init_pacing_rate).
    pacing_rate_ = BitsPerSec::from_bytes_per(cwnd_, min_rtt_).scaled(config_.high_gain);
  }
  if (bw.is_zero()) return;
  const BitsPerSec rate = bw.scaled(gain * kPacingMargin);
  if (full_bw_reached_ || rate > pacing_rate_) pacing_rate_ = rate;
}

void Bbr::set_cwnd(const AckEvent& ev) {
  const Bytes acked = ev.acked_bytes;
  // Loss recovery: packet conservation for the first round trip after the
  // loss, normal growth for a second one (Linux stays in recovery until the
  // retransmissions are acked, about two rounds), then the pre-recovery cwnd
  // is restored. Losses during recovery do not restart it.
  if (ev.lost_bytes > 0 && recovery_start_.is_zero()) {
    prior_cwnd_ = std::max(prior_cwnd_, cwnd_);
    recovery_start_ = ev.now;
    conservation_end_ = TimePoint::zero();
    packet_conservation_ = true;
    cwnd_ = std::max(ev.in_flight + acked, mss_);
  } else if (!recovery_start_.is_zero()) {
    if (packet_conservation_ && ev.largest_acked_sent_time > recovery_start_) {
      packet_conservation_ = false;
      conservation_end_ = ev.now;
    } else if (!packet_conservation_ && !conservation_end_.is_zero() &&
               ev.largest_acked_sent_time > conservation_end_) {
      recovery_start_ = TimePoint::zero();
      cwnd_ = std::max(cwnd_, prior_cwnd_);
      prior_cwnd_ = 0;
    }
  }
  if (acked == 0) return;
  if (!recovery_start_.is_zero()) {
    if (ev.lost_bytes > 0) cwnd_ = cwnd_ > ev.lost_bytes + mss_ ? cwnd_ - ev.lost_bytes : mss_;
    if (packet_conservation_) {
      cwnd_ = std::max(cwnd_, ev.in_flight + acked);
      return;
    }
  }
  Bytes target = bdp(cwnd_gain_);
  if (full_bw_reached_ && config_.extra_acked_gain > 0) {
    // ACK-aggregation allowance (bbr_ack_aggregation_cwnd).
    Bytes aggr = static_cast<Bytes>(static_cast<double>(extra_acked()) * config_.extra_acked_gain);
    aggr = std::min(aggr, btl_bw().bytes_in(kExtraAckedMaxTime));
    target += aggr;
  }
  target = quantization_budget(target);
  if (full_bw_reached_) {
    cwnd_ = std::min(cwnd_ + acked, target);
  } else if (cwnd_ < target || delivered_ < config_.initial_cwnd_packets * mss_) {
    cwnd_ += acked;
  }
  cwnd_ = std::max(cwnd_, min_cwnd_);
  if (mode_ == Mode::kProbeRtt) cwnd_ = std::min(cwnd_, min_cwnd_);
}

void Bbr::on_rto(TimePoint now) {
  prior_cwnd_ = std::max(prior_cwnd_, cwnd_);
  recovery_start_ = now;
  conservation_end_ = TimePoint::zero();
  packet_conservation_ = true;
  cwnd_ = mss_;
  full_bw_ = BitsPerSec::zero();  // Linux resets full_bw on CA_Loss
  full_bw_count_ = 0;
}

}  // namespace rowan::cc
