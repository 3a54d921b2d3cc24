#include "swift/swift.h"

#include <algorithm>
#include <cmath>

#include "registry.h"

namespace rowan::cc {
namespace {

ControllerPtr make_swift(const Clock& clock, const PathHints& hints, const CcParams& params) {
  return std::make_unique<Swift>(clock, hints, Swift::parse(params));
}

}  // namespace

ROWAN_REGISTER_CC("swift", &make_swift);

Swift::Config Swift::parse(const CcParams& params) {
  Config c;
  c.ai = params.get_double("ai", c.ai, 0.01, 1000);
  c.beta = params.get_double("beta", c.beta, 0.1, 1.0);
  c.max_mdf = params.get_double("max_mdf", c.max_mdf, 0.1, 0.9);
  c.base_target = params.get_duration("base_target", c.base_target);
  c.target_per_rtt = params.get_double("target_per_rtt", c.target_per_rtt, 0, 1);
  c.fs_range = params.get_duration("fs_range", c.fs_range);
  c.fs_min_cwnd = params.get_double("fs_min_cwnd", c.fs_min_cwnd, 0.001, 10);
  c.fs_max_cwnd = params.get_double("fs_max_cwnd", c.fs_max_cwnd, 10, 1e6);
  c.min_cwnd = params.get_double("min_cwnd", c.min_cwnd, 0.001, 10);
  c.max_cwnd = params.get_double("max_cwnd", c.max_cwnd, 10, 1e9);
  c.initial_cwnd_packets =
      params.get_double("initial_cwnd_packets", c.initial_cwnd_packets, 1, 1e6);
  c.retx_reset_threshold = static_cast<uint32_t>(
      params.get_double("retx_reset_threshold", c.retx_reset_threshold, 1, 100));
  if (c.base_target > Duration::from_s(1)) throw CcParamError("base_target: above 1s");
  if (c.fs_range > Duration::from_s(1)) throw CcParamError("fs_range: above 1s");
  return c;
}

Swift::Swift(const Clock& clock, const PathHints& hints, const Config& config)
    : CongestionController(clock, hints),
      config_(config),
      mss_(hints.mss == 0 ? 1400 : hints.mss),
      cwnd_(config.initial_cwnd_packets) {
  // fs = α/√cwnd + β: fs_range at fs_min_cwnd, 0 at fs_max_cwnd.
  fs_alpha_ = config_.fs_range.seconds() /
              (1.0 / std::sqrt(config_.fs_min_cwnd) - 1.0 / std::sqrt(config_.fs_max_cwnd));
  fs_beta_ = -fs_alpha_ / std::sqrt(config_.fs_max_cwnd);
  if (!hints.link_rate.is_zero() && !hints.base_rtt.is_zero()) {
    cwnd_ =
        static_cast<double>(hints.link_rate.bytes_in(hints.base_rtt)) / static_cast<double>(mss_);
  }
  clamp_cwnd();
}

Duration Swift::target_delay() const {
  const double fs =
      std::clamp(fs_alpha_ / std::sqrt(cwnd_) + fs_beta_, 0.0, config_.fs_range.seconds());
  // The paper's target is absolute (from the topology): use the gateway's
  // configured base RTT when it has one, the measured min RTT otherwise.
  const Duration base = hints_.base_rtt.is_zero() ? min_rtt_ : hints_.base_rtt;
  return base + config_.base_target + base.scaled(config_.target_per_rtt) +
         Duration::from_seconds(fs);
}

bool Swift::can_decrease(TimePoint now, Duration rtt) const {
  return last_decrease_.is_zero() || now - last_decrease_ >= rtt;
}

void Swift::clamp_cwnd() { cwnd_ = std::clamp(cwnd_, config_.min_cwnd, config_.max_cwnd); }

void Swift::on_ack(const AckEvent& ev) {
  if (!ev.rtt.is_zero()) {
    srtt_ = srtt_.is_zero() ? ev.rtt : srtt_ + (ev.rtt - srtt_) / 8;
    if (min_rtt_.is_zero() || ev.rtt < min_rtt_) min_rtt_ = ev.rtt;
  }
  if (!ev.min_rtt.is_zero() && ev.min_rtt < min_rtt_) min_rtt_ = ev.min_rtt;
  if (ev.lost_packets > 0) {
    // Fast recovery (Alg. 1, "On fast recovery").
    retransmit_count_ = 0;
    if (can_decrease(ev.now, srtt_)) {
      cwnd_ *= 1.0 - config_.max_mdf;
      last_decrease_ = ev.now;
    }
    clamp_cwnd();
    return;
  }
  if (ev.acked_packets == 0 || ev.rtt.is_zero()) return;
  retransmit_count_ = 0;
  const Duration delay = ev.rtt;
  const Duration target = target_delay();
  const double acked = static_cast<double>(ev.acked_packets);
  if (delay < target) {
    if (cwnd_ >= 1.0) {
      cwnd_ += config_.ai / cwnd_ * acked;
    } else {
      cwnd_ += config_.ai * acked;
    }
  } else if (can_decrease(ev.now, ev.rtt)) {
    const double over = (delay - target).seconds() / delay.seconds();
    cwnd_ *= std::max(1.0 - config_.beta * over, 1.0 - config_.max_mdf);
    last_decrease_ = ev.now;
  }
  clamp_cwnd();
}

void Swift::on_rto(TimePoint now) {
  ++retransmit_count_;
  if (retransmit_count_ >= config_.retx_reset_threshold) {
    cwnd_ = config_.min_cwnd;
  } else if (can_decrease(now, srtt_)) {
    cwnd_ *= 1.0 - config_.max_mdf;
    last_decrease_ = now;
  }
  clamp_cwnd();
}

Bytes Swift::cwnd() const {
  return static_cast<Bytes>(std::max(cwnd_, 1.0) * static_cast<double>(mss_));
}

BitsPerSec Swift::pacing_rate() const {
  Duration rtt = srtt_;
  if (rtt.is_zero()) rtt = hints_.base_rtt.is_zero() ? Duration::from_ms(1) : hints_.base_rtt;
  // Below one packet: one packet every rtt/cwnd (the paper's pacing delay).
  const BitsPerSec r = BitsPerSec::from_bytes_per(mss_, rtt).scaled(cwnd_);
  return cwnd_ < 1.0 ? r : r.scaled(1.25);
}

}  // namespace rowan::cc
