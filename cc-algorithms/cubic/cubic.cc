#include "cubic/cubic.h"

#include <algorithm>
#include <cmath>

#include "registry.h"

namespace rowan::cc {
namespace {

constexpr uint32_t kHystartMinRttSamples = 8;  // RFC 9406 N_RTT_SAMPLE
constexpr Duration kHystartMinThresh = Duration::from_ms(4);
constexpr Duration kHystartMaxThresh = Duration::from_ms(16);
constexpr uint32_t kCssGrowthDivisor = 4;
constexpr uint32_t kCssRounds = 5;

ControllerPtr make_cubic(const Clock& clock, const PathHints& hints, const CcParams& params) {
  return std::make_unique<Cubic>(clock, hints, Cubic::parse(params));
}

}  // namespace

ROWAN_REGISTER_CC("cubic", &make_cubic);

Cubic::Config Cubic::parse(const CcParams& params) {
  Config c;
  c.beta = params.get_double("beta", c.beta, 0.5, 0.9);
  c.c = params.get_double("c", c.c, 0.1, 4.0);
  c.hystart = params.get_bool("hystart", c.hystart);
  c.fast_convergence = params.get_bool("fast_convergence", c.fast_convergence);
  c.initial_cwnd_packets = static_cast<uint32_t>(
      params.get_double("initial_cwnd_packets", c.initial_cwnd_packets, 2, 1000));
  return c;
}

Cubic::Cubic(const Clock& clock, const PathHints& hints, const Config& config)
    : CongestionController(clock, hints),
      config_(config),
      mss_(hints.mss == 0 ? 1400 : hints.mss),
      min_cwnd_(2 * mss_),
      cwnd_(config.initial_cwnd_packets * mss_),
      ssthresh_(UINT64_MAX) {}

double Cubic::w_cubic_bytes(Duration t) const {
  const double d = (t - k_).seconds();
  return config_.c * d * d * d * static_cast<double>(mss_) + static_cast<double>(w_max_);
}

void Cubic::on_packet_sent(const SentEvent& ev) { (void)ev; }

void Cubic::on_ack(const AckEvent& ev) {
  if (!ev.rtt.is_zero()) {
    srtt_ = srtt_.is_zero() ? ev.rtt : srtt_ + (ev.rtt - srtt_) / 8;
    if (min_rtt_.is_zero() || ev.rtt < min_rtt_) min_rtt_ = ev.rtt;
  }
  const bool in_recovery =
      !recovery_start_.is_zero() && ev.largest_acked_sent_time <= recovery_start_;
  if (ev.lost_bytes > 0 && !in_recovery) on_congestion_event(ev.now);
  if (ev.acked_bytes == 0) return;
  if (!recovery_start_.is_zero() && ev.largest_acked_sent_time > recovery_start_) {
    can_undo_ = can_undo_ && ev.lost_bytes == 0;  // recovery over: keep undo only if clean
  }
  if (in_recovery || ev.lost_bytes > 0) return;  // no growth during recovery

  // Only grow when the window is actually used (RFC 9438 §5.8).
  const bool cwnd_limited =
      in_slow_start() ? ev.prior_in_flight * 2 >= cwnd_ : ev.prior_in_flight + 3 * mss_ >= cwnd_;
  if (!cwnd_limited) {
    // Time spent app-limited must not count as cubic growth time.
    if (!epoch_start_.is_zero()) epoch_start_ = TimePoint::zero();
    return;
  }

  if (in_slow_start()) {
    if (config_.hystart && !hystart_done_) hystart_on_ack(ev);
    if (!in_slow_start()) return;  // HyStart++ just ended slow start
    Bytes inc = ev.acked_bytes;
    if (css_rounds_ > 0) {
      acked_accum_ += ev.acked_bytes;
      inc = acked_accum_ / kCssGrowthDivisor;
      acked_accum_ -= inc * kCssGrowthDivisor;
    }
    cwnd_ += inc;
    if (cwnd_ > ssthresh_) cwnd_ = ssthresh_;
    return;
  }
  congestion_avoidance(ev);
}

void Cubic::hystart_on_ack(const AckEvent& ev) {
  if (ev.round_start) {
    last_round_min_rtt_ = current_round_min_rtt_;
    current_round_min_rtt_ = Duration::infinite();
    rtt_sample_count_ = 0;
    if (css_rounds_ > 0 && ++css_rounds_ > kCssRounds) {
      // RFC 9406: after CSS_ROUNDS in CSS, enter congestion avoidance.
      ssthresh_ = cwnd_;
      css_rounds_ = 0;
      hystart_done_ = true;
      return;
    }
  }
  if (!ev.rtt.is_zero()) {
    current_round_min_rtt_ = std::min(current_round_min_rtt_, ev.rtt);
    ++rtt_sample_count_;
  }
  if (rtt_sample_count_ < kHystartMinRttSamples || last_round_min_rtt_.is_infinite()) return;
  if (css_rounds_ == 0) {
    const Duration thresh =
        std::clamp(last_round_min_rtt_ / 8, kHystartMinThresh, kHystartMaxThresh);
    if (current_round_min_rtt_ >= last_round_min_rtt_ + thresh) {
      css_baseline_min_rtt_ = current_round_min_rtt_;
      css_rounds_ = 1;
    }
  } else if (current_round_min_rtt_ < css_baseline_min_rtt_) {
    css_rounds_ = 0;  // the RTT rise was spurious: back to slow start
    css_baseline_min_rtt_ = Duration::infinite();
  }
}

void Cubic::congestion_avoidance(const AckEvent& ev) {
  const double mss = static_cast<double>(mss_);
  const double cwnd = static_cast<double>(cwnd_);
  if (epoch_start_.is_zero()) {
    epoch_start_ = ev.now;
    cwnd_epoch_ = cwnd_;
    if (w_max_ <= cwnd_) {
      // No reduction to recover from (e.g. after slow start): grow from here.
      w_max_ = cwnd_;
      k_ = Duration::zero();
    } else {
      k_ = Duration::from_seconds(std::cbrt(static_cast<double>(w_max_ - cwnd_) / mss / config_.c));
    }
    w_est_ = cwnd;
    if (cwnd_prior_ == 0) cwnd_prior_ = cwnd_;
  }
  const Duration rtt = srtt_.is_zero() ? Duration::from_ms(1) : srtt_;
  const Duration t = ev.now - epoch_start_;
  // Reno-friendly estimate (RFC 9438 §4.3).
  const double beta = config_.beta;
  const double alpha =
      w_est_ >= static_cast<double>(cwnd_prior_) ? 1.0 : 3.0 * (1.0 - beta) / (1.0 + beta);
  w_est_ += alpha * static_cast<double>(ev.acked_bytes) / cwnd * mss;
  const double w_cubic_now = w_cubic_bytes(t);
  if (w_cubic_now < w_est_) {
    cwnd_ = std::max(cwnd_, static_cast<Bytes>(w_est_));  // Reno-friendly region
    return;
  }
  // Concave / convex region (§4.4, §4.5): aim at W_cubic one RTT ahead.
  double target = w_cubic_bytes(t + rtt);
  target = std::clamp(target, cwnd, 1.5 * cwnd);
  const double inc = (target - cwnd) / cwnd * static_cast<double>(ev.acked_bytes);
  acked_accum_ += static_cast<Bytes>(inc);  // integer bytes; fractions below 1 B are dropped
  cwnd_ += acked_accum_;
  acked_accum_ = 0;
}

void Cubic::on_congestion_event(TimePoint now) {
  saved_ = {cwnd_, ssthresh_, w_max_, cwnd_prior_, cwnd_epoch_, w_est_, k_, epoch_start_};
  can_undo_ = true;
  recovery_start_ = now;
  // Fast convergence (§4.7).
  if (config_.fast_convergence && cwnd_ < w_max_) {
    w_max_ = static_cast<Bytes>(static_cast<double>(cwnd_) * (1.0 + config_.beta) / 2.0);
  } else {
    w_max_ = cwnd_;
  }
  cwnd_prior_ = cwnd_;
  ssthresh_ = std::max(static_cast<Bytes>(static_cast<double>(cwnd_) * config_.beta), min_cwnd_);
  cwnd_ = ssthresh_;
  epoch_start_ = TimePoint::zero();
  css_rounds_ = 0;
  hystart_done_ = true;
  acked_accum_ = 0;
}

void Cubic::on_rto(TimePoint now) {
  if (recovery_start_.is_zero() || now > recovery_start_) {
    w_max_ = std::max(w_max_, cwnd_);
    cwnd_prior_ = cwnd_;
    ssthresh_ = std::max(static_cast<Bytes>(static_cast<double>(cwnd_) * config_.beta), min_cwnd_);
  }
  cwnd_ = min_cwnd_;
  epoch_start_ = TimePoint::zero();
  recovery_start_ = now;
  can_undo_ = false;
  css_rounds_ = 0;
  hystart_done_ = true;
}

void Cubic::on_spurious_loss(TimePoint now) {
  (void)now;
  if (!can_undo_) return;
  cwnd_ = std::max(cwnd_, saved_.cwnd);
  ssthresh_ = saved_.ssthresh;
  w_max_ = saved_.w_max;
  cwnd_prior_ = saved_.cwnd_prior;
  cwnd_epoch_ = saved_.cwnd_epoch;
  w_est_ = saved_.w_est;
  k_ = saved_.k;
  epoch_start_ = saved_.epoch_start;
  recovery_start_ = TimePoint::zero();
  can_undo_ = false;
}

void Cubic::on_idle(TimePoint now) {
  (void)now;
  epoch_start_ = TimePoint::zero();  // idle time is not growth time (RFC 9438 §5.8)
}

BitsPerSec Cubic::pacing_rate() const {
  Duration rtt = srtt_;
  if (rtt.is_zero()) rtt = hints_.base_rtt.is_zero() ? Duration::from_ms(1) : hints_.base_rtt;
  return BitsPerSec::from_bytes_per(cwnd_, rtt).scaled(in_slow_start() ? 2.0 : 1.2);
}

}  // namespace rowan::cc
