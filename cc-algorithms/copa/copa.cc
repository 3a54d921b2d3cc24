#include "copa/copa.h"

#include <algorithm>

#include "registry.h"

namespace rowan::cc {
namespace {

constexpr uint64_t kMaxVelocity = 1ULL << 20;

ControllerPtr make_copa(const Clock& clock, const PathHints& hints, const CcParams& params) {
  return std::make_unique<Copa>(clock, hints, Copa::parse(params));
}

}  // namespace

ROWAN_REGISTER_CC("copa", &make_copa);

Copa::Config Copa::parse(const CcParams& params) {
  Config c;
  c.delta = params.get_double("delta", c.delta, 0.001, 10);
  c.initial_cwnd_packets = static_cast<uint32_t>(
      params.get_double("initial_cwnd_packets", c.initial_cwnd_packets, 2, 1000));
  c.min_rtt_window = params.get_duration("min_rtt_window", c.min_rtt_window);
  if (c.min_rtt_window < Duration::from_ms(100))
    throw CcParamError("min_rtt_window: must be at least 100ms");
  return c;
}

Copa::Copa(const Clock& clock, const PathHints& hints, const Config& config)
    : CongestionController(clock, hints),
      config_(config),
      mss_(hints.mss == 0 ? 1400 : hints.mss),
      min_cwnd_(2 * mss_),
      cwnd_(config.initial_cwnd_packets * mss_),
      min_rtt_(config.min_rtt_window, Duration::infinite(), TimePoint::zero()),
      standing_rtt_(Duration::from_ms(1), Duration::infinite(), TimePoint::zero()) {}

void Copa::change_direction(Direction d, TimePoint now) {
  direction_ = d;
  velocity_ = 1;
  same_direction_rounds_ = 0;
  last_record_time_ = now;
  last_recorded_cwnd_ = cwnd_;
}

void Copa::update_direction(TimePoint now) {
  if (last_record_time_.is_zero()) {
    last_record_time_ = now;
    last_recorded_cwnd_ = cwnd_;
    return;
  }
  if (now - last_record_time_ < srtt_) return;  // once per RTT
  const Direction d = cwnd_ > last_recorded_cwnd_ ? Direction::kUp : Direction::kDown;
  if (d != direction_) {
    change_direction(d, now);
    return;
  }
  if (++same_direction_rounds_ >= 3) velocity_ = std::min(velocity_ * 2, kMaxVelocity);
  last_record_time_ = now;
  last_recorded_cwnd_ = cwnd_;
}

void Copa::on_ack(const AckEvent& ev) {
  if (ev.rtt.is_zero()) return;
  srtt_ = srtt_.is_zero() ? ev.rtt : srtt_ + (ev.rtt - srtt_) / 8;
  min_rtt_.update(ev.rtt, ev.now);
  standing_rtt_.set_window(std::max(srtt_ / 2, Duration::from_us(1)));
  standing_rtt_.update(ev.rtt, ev.now);
  if (ev.acked_bytes == 0) return;
  const Duration standing = standing_rtt_.get();
  const Duration min_rtt = min_rtt_.get();
  // d_q = 0 → infinite target: increase.
  bool increase = true;
  const Duration dq = standing - min_rtt;
  if (dq.ns() > 0) {
    // current rate cwnd/standing ≤ target mss/(δ·d_q)
    //   ⇔ cwnd·δ·d_q ≤ mss·standing
    const double lhs = static_cast<double>(cwnd_) * config_.delta * dq.seconds();
    const double rhs = static_cast<double>(mss_) * standing.seconds();
    increase = lhs <= rhs;
  }
  if (!(increase && slow_start_)) update_direction(ev.now);
  // change = v · acked · mss / (δ · cwnd) bytes
  const double change_d = static_cast<double>(velocity_) * static_cast<double>(ev.acked_bytes) *
                          static_cast<double>(mss_) / (config_.delta * static_cast<double>(cwnd_));
  const Bytes change = static_cast<Bytes>(std::min(change_d, static_cast<double>(cwnd_)));
  if (increase) {
    if (slow_start_) {
      if (last_double_.is_zero() || ev.now - last_double_ > srtt_) {
        cwnd_ += cwnd_;
        last_double_ = ev.now;
      }
    } else {
      if (direction_ != Direction::kUp && velocity_ > 1) change_direction(Direction::kUp, ev.now);
      cwnd_ += change;
    }
  } else {
    if (direction_ != Direction::kDown && velocity_ > 1) {
      change_direction(Direction::kDown, ev.now);
    }
    cwnd_ = cwnd_ > change + min_cwnd_ ? cwnd_ - change : min_cwnd_;
    slow_start_ = false;
  }
}

void Copa::on_rto(TimePoint now) {
  cwnd_ = min_cwnd_;
  slow_start_ = true;
  last_double_ = TimePoint::zero();
  change_direction(Direction::kNone, now);
}

BitsPerSec Copa::pacing_rate() const {
  Duration rtt = standing_rtt_.empty() ? Duration::zero() : standing_rtt_.get();
  if (rtt.is_zero()) rtt = hints_.base_rtt.is_zero() ? Duration::from_ms(1) : hints_.base_rtt;
  return BitsPerSec::from_bytes_per(cwnd_, rtt).scaled(2.0);
}

}  // namespace rowan::cc
