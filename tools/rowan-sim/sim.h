// rowan-sim: a deterministic discrete-event simulator that drives the real
// transport (transport::Connection) and the real congestion controllers over
// a simulated bottleneck.
//
// Topology per flow i: sender S_i ──▶ shared bottleneck (rate, FIFO buffer in
// bytes, tail drop; random loss on the wire: Bernoulli and/or Gilbert–Elliott)
// ──▶ one-way delay rtt_i/2 ──▶ receiver R_i; R_i's ACKs return over an
// uncongested path of delay rtt_i/2. With several paths (Scenario::paths)
// each path is such a bottleneck of its own (rate, RTT, loss, buffer), every
// flow's connection runs over all of them (path i over bottleneck i), and a
// path can be cut for a while (Scenario::outages: both directions drop
// everything, including what was on the wire).
//
// Cheapness: each path is a FIFO (departures are monotonic and delays constant
// per flow), so the event heap only holds one entry per path head plus one
// timer per endpoint; the bottleneck's queue is computed from the time its
// backlog drains instead of being simulated packet by packet. Payload bytes
// are elided by default (the transport's ELIDED mode: same frames, packet
// numbers, ACKs, loss recovery, flow control and CC; STREAM bytes counted,
// not copied); `verify` carries and checks real bytes.
//
// Threading: one Simulation per thread; it owns everything it touches.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/units.h"
#include "cc_params.h"
#include "transport/fec_coder.h"

namespace rowan::sim {

/// One path of a multipath scenario.
struct PathSpec {
  BitsPerSec rate;
  Duration rtt;
  double loss = 0.0;
};

/// Path `path` is cut at `at` for `duration` (zero: until the end).
struct Outage {
  int path = 0;
  Duration at;
  Duration duration;
};

struct Scenario {
  BitsPerSec rate = BitsPerSec::from_gbps(1);
  Duration rtt = Duration::from_ms(20);  ///< base RTT (buffer sizing; flows without their own)
  double loss = 0.0;                     ///< Bernoulli loss on the bottleneck's wire
  // Gilbert–Elliott burst loss (0 = off): per packet, good→bad with p_gb,
  // bad→good with p_bg; loss probability loss_bad in bad, loss_good in good.
  double ge_p_gb = 0.0, ge_p_bg = 0.0, ge_loss_bad = 1.0, ge_loss_good = 0.0;
  // Real-path noise (what a software host or an emulated WAN adds; a clean
  // simulator has none of it, which is how the flagship once met every
  // simulated target and collapsed on the testbed):
  Duration jitter;       ///< extra one-way delay after the bottleneck, uniform in [0, jitter],
                         ///< never reordering (as rowan-wanem and netem with a rate)
  Duration ack_jitter;   ///< the same on the reverse path (ACKs), uniform in [0, ack_jitter];
                         ///< rowan-wanem jitters both directions
  Duration host_delay;   ///< each wake-up of an endpoint (a timer, an arrival) is late by
                         ///< uniform [0, host_delay]; arrivals meanwhile are handled in one batch
  Duration host_offset;  ///< constant extra round-trip delay the hinted base RTT does not
                         ///< include (a real gateway's stack and processing: ~0.25 ms on the
                         ///< two-site testbed), added to the forward path
  /// Endpoints get each datagram's arrival time, as the io_uring backend's
  /// kernel receive timestamps give it: a late host's RTT samples and ACK
  /// delays are measured from the arrival, not from when it woke up.
  bool rx_stamps = false;
  /// What the endpoints are told of the path, as factors of the truth (a
  /// rowand config's `rate` and `rtt`): 0.5 and 1.5 are a hint wrong by
  /// 50 % either way. The hints seed the CC (its start, its first RTT,
  /// the capacity its flow scaling uses) and the first PTO, and the
  /// windows with `window_bdp`.
  double hint_rate = 1.0;
  double hint_rtt = 1.0;
  /// Non-zero: the send buffer and receive window are this many hinted
  /// BDPs, as rowand sizes them (its default is 2.0); zero: sized from the
  /// true path so that they never limit the CC.
  double window_bdp = 0.0;
  /// The sender's application is a host TCP seen through a passthrough
  /// gateway instead of a bulk source: it keeps at most a window of bytes
  /// outstanding end to end (written and not yet read by the receiving
  /// application), starting at 10 segments and growing by what is read (slow
  /// start, no host loss) up to `tcp_window_max` (0: 2 × rate × rtt). The
  /// transport is app-limited and bursty until the window exceeds its rate.
  bool tcp_source = false;
  Bytes tcp_window_max = 0;
  double buffer_bdp = 1.0;  ///< bottleneck buffer as a multiple of rate × rtt ...
  Bytes buffer_bytes = 0;   ///< ... or in bytes when non-zero
  int flows = 1;
  Duration stagger;                 ///< flow i starts at i × stagger
  std::vector<Duration> flow_rtts;  ///< per-flow RTTs, cycled; empty: all `rtt`
  std::string cc = "rowan";
  std::vector<std::string> flow_ccs;  ///< per-flow algorithms, cycled; empty: all `cc`
  cc::CcParams cc_params;
  Duration duration = Duration::from_s(30);
  Duration warmup;  ///< excluded from utilization, goodput, delay, Jain
  std::vector<std::pair<Duration, BitsPerSec>> rate_steps;  ///< (at, new rate)
  uint64_t seed = 1;
  uint32_t mss = 0;  ///< datagram bytes; 0: 9000 at >= 1 Gbit/s, else 1500
  uint32_t ack_every = 2;
  bool verify = false;       ///< carry and check real payload bytes
  Duration sample_interval;  ///< 0: max(rtt, 1 ms)
  std::string series_path;   ///< CSV of per-flow throughput and queue delay
  /// Request-response instead of bulk: each sender writes one request of
  /// this many bytes, the receiving application answers with rr_response
  /// bytes once it has read all of it, and the next request starts when the
  /// answer is read; each message's completion time (request written to
  /// answer read) is measured. 0: bulk.
  Bytes rr_request = 0;
  Bytes rr_response = 64;
  transport::FecMode fec = transport::FecMode::kAdaptive;  ///< the transport's default
  /// Several paths per flow (empty: one path of `rate`, `rtt`/`flow_rtts`
  /// and `loss`). Bursty loss, rate steps and per-flow RTTs are single-path only.
  std::vector<PathSpec> paths;
  std::vector<Outage> outages;
  /// After `duration`, stop writing and run until every written byte is read
  /// (or a drain limit): Result::lost_bytes then says what never arrived.
  /// On with outages.
  bool drain = false;
};

struct PathResult {
  int id = 0;
  double rate_bps = 0, rtt_s = 0, loss = 0;
  double utilization = 0;     ///< wire bytes across this path's bottleneck ÷ its capacity
  double throughput_bps = 0;  ///< those wire bytes over the measured window
  uint64_t tail_drops = 0, random_drops = 0, outage_drops = 0;
  // Senders' view, summed over flows.
  uint64_t bytes_acked = 0, lost_packets = 0, downs = 0, ups = 0;
  double srtt_s = 0;  ///< flow 0's sender
};

struct OutageResult {
  int path = 0;
  double at_s = 0, duration_s = 0;
  double detect_s = -1;    ///< until flow 0's sender declared the path down (−1: never)
  double recovery_s = -1;  ///< until goodput over 100 ms reached 0.85 × the surviving capacity
  double rejoin_s = -1;    ///< from its return until it carried ≥ 10 % of its rate again
};

struct FlowResult {
  int id = 0;
  std::string cc;
  double start_s = 0;
  double rtt_s = 0;
  double goodput_bps = 0;  ///< in-order stream bytes over the flow's measured window
  double retransmit_ratio = 0;
  double srtt_s = 0, min_rtt_s = 0;
  uint64_t lost_packets = 0, rtos = 0, spurious = 0;
  uint64_t send_window_growths = 0;  ///< the sender's send buffer doubled (window_growth)
  uint64_t recv_window_growths = 0;  ///< the receiver's window doubled
  double converge_s = -1;            ///< time from start to ≥ 90% of fair share (−1: never)
  uint64_t verify_errors = 0;
  // Forward error correction (sender's view) and request-response.
  uint64_t repair_packets = 0, repair_bytes = 0, wire_bytes = 0, recovered = 0, retx_packets = 0;
  uint64_t unrecoverable = 0, ptos = 0;
  uint32_t fec_k = 0, fec_m = 0;  ///< the sender's code rate at the end
  uint64_t messages = 0;
};

struct Result {
  double capacity_bps = 0;
  double utilization = 0;  ///< wire bytes delivered across the bottleneck / capacity
  double goodput_bps = 0;
  double queue_delay_p50_s = 0, queue_delay_p95_s = 0, queue_delay_p99_s = 0;
  double jain_index = 1;  ///< over [max(warmup, last start), end]
  double retransmit_ratio = 0;
  uint64_t tail_drops = 0, random_drops = 0, packets = 0, events = 0;
  double wall_s = 0;
  // FEC over all flows: repair wire bytes ÷ all wire bytes the senders sent,
  // packets the receivers rebuilt, packets the senders retransmitted.
  uint64_t repair_packets = 0, repair_bytes = 0, wire_bytes = 0, recovered = 0, retx_packets = 0;
  uint64_t unrecoverable = 0;  ///< blocks the receivers gave up
  // Request-response: completion time of every message after the warm-up.
  uint64_t messages = 0;
  double rr_mean_s = 0, rr_p50_s = 0, rr_p99_s = 0, rr_p999_s = 0, rr_max_s = 0;
  double simulated_s = 0;          ///< simulated time run (duration, plus the drain)
  uint64_t max_rss_bytes = 0;      ///< the process's peak RSS (filled by the CLI, not by run())
  uint64_t path_memory_bytes = 0;  ///< sent-packet rings of flow 0's sender, all paths
  uint64_t configured_buffer_bytes = 0;  ///< flow 0 sender's send + receive pools as configured
  bool drained = false;                  ///< drain ran and everything written arrived
  uint64_t lost_bytes = 0;               ///< with drain: written but never read
  uint64_t corrupted_bytes = 0;          ///< with verify: bytes read that differ
  std::vector<FlowResult> flows;
  std::vector<PathResult> paths;  ///< one per path (one for a single-path run)
  std::vector<OutageResult> outages;
};

/// Runs `s`; throws std::invalid_argument / cc::CcParamError on a bad scenario.
Result run(const Scenario& s);

/// The result as the one JSON object of the rowan-sim contract (docs/rowan-sim.md).
std::string to_json(const Scenario& s, const Result& r);

}  // namespace rowan::sim
