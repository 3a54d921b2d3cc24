// The adaptive code rate: whether and how strongly a path's packets are coded.
//
// Model (per source packet, in seconds of delivery delay). A packet lost and
// not recovered is repaired by retransmission: its data arrives about one
// retransmission round trip late (RFC 9002 loss detection, then the resend),
// so without coding the expected cost is
//     C0 = p × rtt
// for a loss rate p. A (k, m) block code costs m/k extra packet times of the
// path (the repair symbols' serialization, which is also their bandwidth
// share) plus, for a packet it recovers, the wait for the end of its block
// (k/2 packet times on average); what it cannot recover still costs a round
// trip:
//     C(k, m) = (m/k) × t_pkt + p × (k/2) × t_pkt + r(k, m) × rtt
// where r is the residual loss: a source is lost for good when it is lost and
// at least m of the other k + m − 1 symbols of its block are lost too. Losses
// come in bursts of mean length b (Gilbert–Elliott-like paths): loss events
// happen at rate p/b per packet and each erases ⌈b⌉ consecutive packets, so a
// block survives ⌊m/⌈b⌉⌋ events; with b = 1 this is the binomial of
// independent losses.
//
// The policy codes only when the best (k, m) under the overhead cap beats
// C0, i.e. when the expected cost of a retransmission round trip exceeds the
// coding overhead. A path with no measured loss is never coded (C0 = 0).
// The delay weight scales the round-trip cost (how much a late delivery
// costs relative to bandwidth); 1 weighs them alike.
//
// Pure computation; any thread.
#pragma once

#include <cstdint>

#include "base/units.h"

namespace rowan::fec {

struct CodeRate {
  int k = 0;  ///< source packets per block; 0: no coding
  int m = 0;  ///< repair packets per block
  bool enabled() const noexcept { return k > 0 && m > 0; }
  double overhead() const noexcept { return enabled() ? static_cast<double>(m) / k : 0.0; }
  bool operator==(const CodeRate&) const = default;
};

struct PolicyConfig {
  /// Repair packets per source packet, at most: 0.14 keeps repair bytes (each a
  /// full-sized packet) within 15 % of everything else sent.
  double max_overhead = 0.14;
  double delay_weight = 1.0;  ///< cost of a second of late delivery vs a second of link time
  int max_k = 32;             ///< at most kMaxSources
  int max_m = 8;              ///< at most kMaxRepair
};

struct PathSample {
  double loss_rate = 0;   ///< lost ÷ sent packets, recent window
  double mean_burst = 1;  ///< lost packets per loss burst (>= 1)
  Duration rtt;           ///< smoothed RTT
  Duration packet_time;   ///< one full packet at the path's sending rate
};

/// The cost model above for one (k, m) (k >= 1, m >= 0; m = 0 is C0).
double expected_cost(const PathSample& path, int k, int m, double delay_weight) noexcept;

/// The code rate for `path`: the (k, m) of least expected_cost under the
/// caps, or no coding when none beats not coding.
CodeRate choose_code_rate(const PathSample& path, const PolicyConfig& cfg) noexcept;

/// Measures a path's loss rate and burstiness from the sender's view over a
/// sliding window of two halves; the older is dropped when the newer is full:
/// `window` packets holding at least kMinLosses losses, or 32 × `window`
/// packets. A rare loss (0.1 %) is thus measured over enough packets to see
/// several, instead of reading as zero between two losses and switching the
/// code off and on.
class LossMeter {
 public:
  static constexpr uint64_t kMinLosses = 8;
  static constexpr uint64_t kMaxWindows = 32;
  explicit LossMeter(uint32_t window = 1024) : window_(window ? window : 1) {}
  /// A packet (data or repair) left on the path.
  void on_sent() noexcept;
  /// A packet the path lost (declared lost, or recovered by the code). `pn`
  /// is its packet number: a loss right after the previous one (pn at most
  /// 2 above it) continues a burst.
  void on_lost(uint64_t pn) noexcept;
  double loss_rate() const noexcept;
  /// What the policy plans for: the loss rate plus two standard deviations
  /// of its count (lost + 2√lost, over sent), so that a window that happened
  /// to see few losses does not pick a code too weak for the path; zero
  /// while nothing was lost.
  double planning_loss_rate() const noexcept;
  double mean_burst() const noexcept;
  uint64_t sent() const noexcept { return sent_[0] + sent_[1]; }

 private:
  void roll() noexcept;
  uint32_t window_;
  uint64_t sent_[2] = {0, 0};  // [0] current half
  uint64_t lost_[2] = {0, 0};
  uint64_t bursts_[2] = {0, 0};
  uint64_t last_lost_pn_ = 0;
  bool any_lost_ = false;
};

}  // namespace rowan::fec
