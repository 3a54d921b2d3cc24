#include "fec/policy.h"

#include <algorithm>
#include <cmath>

namespace rowan::fec {
namespace {

// P(X >= c) for X ~ Binomial(n, q).
double binomial_tail(int n, double q, int c) {
  if (c <= 0) return 1.0;
  if (c > n) return 0.0;
  if (q <= 0) return 0.0;
  if (q >= 1) return 1.0;
  // Sum the head P(X < c) term by term (c is small).
  double term = std::pow(1.0 - q, n);  // P(X = 0)
  double head = 0;
  for (int i = 0; i < c; ++i) {
    head += term;
    term *= static_cast<double>(n - i) / (i + 1) * q / (1.0 - q);
  }
  return std::clamp(1.0 - head, 0.0, 1.0);
}

}  // namespace

double expected_cost(const PathSample& path, int k, int m, double delay_weight) noexcept {
  const double p = std::clamp(path.loss_rate, 0.0, 1.0);
  const double rtt = path.rtt.seconds() * delay_weight;
  if (m <= 0 || k <= 0) return p * rtt;
  const double t_pkt = path.packet_time.seconds();
  const double burst = std::max(1.0, path.mean_burst);
  const int erased = static_cast<int>(std::ceil(burst));
  const int survivable = m / erased;  // loss events a block survives
  // A source is lost for good when its own loss event leaves the block with
  // more than `survivable` events.
  const double residual = p * binomial_tail(k + m - 1, std::min(1.0, p / burst), survivable);
  return static_cast<double>(m) / k * t_pkt + p * (k / 2.0) * t_pkt + residual * rtt;
}

CodeRate choose_code_rate(const PathSample& path, const PolicyConfig& cfg) noexcept {
  if (!(path.loss_rate > 0) || path.rtt <= Duration::zero()) return {};
  const double uncoded = expected_cost(path, 1, 0, cfg.delay_weight);
  double best = uncoded;
  CodeRate rate;
  const int max_k = std::clamp(cfg.max_k, 1, 32);
  const int max_m = std::clamp(cfg.max_m, 1, 8);
  for (int k = 1; k <= max_k; ++k) {
    for (int m = 1; m <= max_m; ++m) {
      if (static_cast<double>(m) > cfg.max_overhead * k + 1e-9) break;
      const double c = expected_cost(path, k, m, cfg.delay_weight);
      if (c < best) {
        best = c;
        rate = CodeRate{k, m};
      }
    }
  }
  return rate;
}

void LossMeter::roll() noexcept {
  if (sent_[0] < window_) return;
  if (lost_[0] < kMinLosses && sent_[0] < kMaxWindows * window_) return;
  sent_[1] = sent_[0];
  lost_[1] = lost_[0];
  bursts_[1] = bursts_[0];
  sent_[0] = lost_[0] = bursts_[0] = 0;
}

void LossMeter::on_sent() noexcept {
  ++sent_[0];
  roll();
}

void LossMeter::on_lost(uint64_t pn) noexcept {
  ++lost_[0];
  if (!any_lost_ || pn > last_lost_pn_ + 2 || pn < last_lost_pn_) ++bursts_[0];
  any_lost_ = true;
  last_lost_pn_ = pn;
}

double LossMeter::loss_rate() const noexcept {
  const uint64_t s = sent_[0] + sent_[1];
  if (s == 0) return 0;
  return std::min(1.0, static_cast<double>(lost_[0] + lost_[1]) / static_cast<double>(s));
}

double LossMeter::planning_loss_rate() const noexcept {
  const uint64_t s = sent_[0] + sent_[1];
  const double lost = static_cast<double>(lost_[0] + lost_[1]);
  if (s == 0 || lost == 0) return 0;
  return std::min(1.0, (lost + 2 * std::sqrt(lost)) / static_cast<double>(s));
}

double LossMeter::mean_burst() const noexcept {
  const uint64_t b = bursts_[0] + bursts_[1];
  if (b == 0) return 1;
  return std::max(1.0, static_cast<double>(lost_[0] + lost_[1]) / static_cast<double>(b));
}

}  // namespace rowan::fec
