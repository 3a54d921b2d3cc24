// BBR v1 congestion control, following Linux net/ipv4/tcp_bbr.c (Cardwell et
// al., "BBR: Congestion-Based Congestion Control", ACM Queue 2016).
//
// Follows tcp_bbr.c: the model is the windowed-max delivery rate (BtlBw, 10
// round trips) and the windowed-min RTT (10 s). States STARTUP (pacing and
// cwnd gain 2/ln2 = 2.885, left when the BtlBw estimate has grown < 25% for 3
// rounds), DRAIN (pacing gain 1/2.885 until in-flight ≤ BDP), PROBE_BW (pacing
// gain cycle 1.25, 0.75, 1 ×6, one phase per min RTT, random start phase; cwnd
// gain 2), PROBE_RTT (every 10 s without a new min RTT: cwnd 4 packets for
// max(200 ms, one round)). cwnd = cwnd_gain × BDP + the ACK-aggregation
// allowance (`extra_acked`, windowed max over 5–10 rounds, capped at 100 ms ×
// BtlBw) + 3 quanta, grown by at most the bytes acked per ACK once the pipe
// is full. Packet conservation during the first round of loss recovery, and
// the pre-recovery cwnd is restored when recovery ends. Pacing rate =
// pacing_gain × BtlBw × 99%.
//
// Units of state: rates in BitsPerSec (uint64 bit/s), times in Duration /
// TimePoint (int64 ns), windows in Bytes; products go through units.h's
// 128-bit helpers, so 400 Gbit/s × 200 ms is exact. Gains are doubles (Linux
// uses 8-bit fixed point).
//
// Deviations: round trips come from the transport (AckEvent::round_start)
// instead of BBR's own delivered-count bookkeeping; loss recovery is inferred
// from AckEvent::lost_bytes because the interface has no TCP CA state: one
// round of packet conservation (until a packet sent after the loss is acked),
// one round of normal growth, then the old cwnd is restored; after an RTO cwnd drops
// to 1 packet and regrows by packet conservation (Linux: tcp_enter_loss plus
// bbr's restore on exit); the long-term policer detector (lt_bw) is not
// implemented; the BtlBw filter's round clock stops during PROBE_RTT (its
// 200 ms are the whole 10-round window at 20 ms: Linux v1 forgets BtlBw
// there; BBRv2 keeps bw_hi); the PROBE_BW start phase comes from a deterministic
// pseudo-random generator seeded by the construction time (simulations repeat
// exactly); the "TSO" quantum is min(1 ms at the pacing rate, 64 KB).
//
// Parameters (CcParams): high_gain [1.5,4]=2.885, cwnd_gain [1,4]=2,
// probe_rtt_interval (duration)=10s, probe_rtt_duration=200ms,
// bw_window_rounds [4,100]=10, extra_acked_gain [0,2]=1,
// initial_cwnd_packets [4,1000]=10.
#pragma once

#include <cstdint>

#include "common/windowed_filter.h"
#include "congestion_controller.h"

namespace rowan::cc {

class Bbr final : public CongestionController {
 public:
  enum class Mode : uint8_t { kStartup, kDrain, kProbeBw, kProbeRtt };

  struct Config {
    double high_gain = 2.885;
    double cwnd_gain = 2.0;
    Duration probe_rtt_interval = Duration::from_s(10);
    Duration probe_rtt_duration = Duration::from_ms(200);
    uint64_t bw_window_rounds = 10;
    double extra_acked_gain = 1.0;
    uint32_t initial_cwnd_packets = 10;
  };
  static Config parse(const CcParams& params);

  Bbr(const Clock& clock, const PathHints& hints, const Config& config);

  std::string_view name() const override { return "bbr"; }
  void on_packet_sent(const SentEvent& ev) override;
  void on_ack(const AckEvent& ev) override;
  void on_rto(TimePoint now) override;
  void on_idle(TimePoint now) override;
  Bytes cwnd() const override { return cwnd_; }
  BitsPerSec pacing_rate() const override { return pacing_rate_; }
  Bytes send_quantum() const override;

  // Introspection for tests and metrics.
  Mode mode() const { return mode_; }
  BitsPerSec btl_bw() const { return bw_filter_.get(); }
  Duration min_rtt() const { return min_rtt_; }
  double pacing_gain() const { return pacing_gain_; }
  double cwnd_gain() const { return cwnd_gain_; }
  bool full_bw_reached() const { return full_bw_reached_; }
  int cycle_index() const { return cycle_idx_; }
  Bytes extra_acked() const;
  /// gain × BtlBw × min RTT (the initial window before any RTT sample).
  Bytes bdp(double gain) const;

 private:
  void update_bw(const AckEvent& ev);
  void update_ack_aggregation(const AckEvent& ev);
  void update_cycle_phase(const AckEvent& ev);
  void check_full_bw_reached(const AckEvent& ev);
  void check_drain(const AckEvent& ev);
  void update_min_rtt(const AckEvent& ev);
  void update_gains();
  void set_pacing_rate(BitsPerSec bw, double gain);
  void set_cwnd(const AckEvent& ev);
  void reset_mode();
  void enter_probe_bw(TimePoint now);
  Bytes quantization_budget(Bytes cwnd) const;
  uint32_t next_random();

  Config config_;
  Bytes mss_;
  Bytes min_cwnd_;
  Mode mode_ = Mode::kStartup;
  RoundMaxFilter<BitsPerSec> bw_filter_;
  Duration min_rtt_ = Duration::infinite();
  TimePoint min_rtt_stamp_;
  TimePoint probe_rtt_done_stamp_;  ///< zero until in-flight dropped to 4 packets
  bool probe_rtt_round_done_ = false;
  bool idle_restart_ = false;
  double pacing_gain_;
  double cwnd_gain_;
  int cycle_idx_ = 0;
  TimePoint cycle_stamp_;
  BitsPerSec full_bw_;
  uint32_t full_bw_count_ = 0;
  bool full_bw_reached_ = false;
  Bytes cwnd_;
  Bytes prior_cwnd_ = 0;
  BitsPerSec pacing_rate_;
  bool has_seen_rtt_ = false;
  Bytes delivered_ = 0;
  uint64_t round_count_ = 0;
  uint64_t bw_round_count_ = 0;  ///< rounds outside PROBE_RTT (the BtlBw filter's clock)
  // Loss recovery (packet conservation).
  TimePoint recovery_start_;    ///< zero: not in recovery
  TimePoint conservation_end_;  ///< when the packet-conservation round ended
  bool packet_conservation_ = false;
  // ACK aggregation (Linux bbr_update_ack_aggregation).
  TimePoint ack_epoch_stamp_;
  Bytes ack_epoch_acked_ = 0;
  Bytes extra_acked_[2] = {0, 0};
  uint32_t extra_acked_win_rounds_ = 0;
  int extra_acked_idx_ = 0;
  uint32_t rng_;
};

}  // namespace rowan::cc
