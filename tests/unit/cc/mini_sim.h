// A small, deterministic packet-level model of N bulk flows through one
// FIFO bottleneck, driving real CongestionController instances. It exists so
// the CC unit tests can check closed-loop behaviour (BBR's state machine, the
// flagship's steady state, fairness) without the full transport; the
// transport's own simulator (tools/rowan-sim) is the reference for benches.
//
// Model: a sender paces packets of `mss` bytes at the CC's pacing rate while
// in-flight + mss ≤ cwnd; the bottleneck is a drop-tail FIFO of `buffer` bytes
// serving `rate`; every packet is dropped at random with probability `loss`
// after the queue; the forward path has no delay and the return path the
// flow's propagation RTT, so an ACK reaches the sender at departure + RTT.
// The receiver ACKs every `ack_every` packets (ACK aggregation). The delivery
// rate sample follows Linux tcp_rate.c; round trips are packet-timed. A loss
// is reported with the next ACK of the flow (as RACK would after reordering
// settles), or by an RTO when no ACK arrives for 2×RTT + 10 ms.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <queue>
#include <random>
#include <vector>

#include "base/units.h"
#include "congestion_controller.h"

namespace rowan::cc::test {

struct SimFlowSpec {
  Duration rtt = Duration::from_ms(10);
  TimePoint start = TimePoint::zero();
  TimePoint stop = TimePoint::infinite();
};

struct SimConfig {
  BitsPerSec rate = BitsPerSec::from_gbps(1);
  Bytes buffer = 1 << 20;
  double loss = 0;
  Bytes mss = 1400;
  uint32_t ack_every = 1;
  uint64_t seed = 1;
  /// RTT measurement noise: each RTT sample the sender sees is late by a
  /// uniform [0, rtt_noise] (timestamps of a busy or sleeping host, a software
  /// path); the packets themselves are not delayed. A new lateness is drawn
  /// every rtt_noise_period (0: every sample), so the noise can be correlated
  /// in time like a host that sleeps or is busy for a while.
  Duration rtt_noise = Duration::zero();
  Duration rtt_noise_period = Duration::zero();
  Duration sample_interval = Duration::from_ms(100);  ///< throughput series bucket
};

struct SimFlowStats {
  Bytes delivered = 0;
  Bytes lost = 0;
  uint64_t rtos = 0;
  std::vector<Bytes> series;  ///< bytes delivered per sample_interval bucket
};

class MiniSim {
 public:
  MiniSim(const SimConfig& cfg, std::vector<SimFlowSpec> specs) : cfg_(cfg), rng_(cfg.seed) {
    flows_.resize(specs.size());
    for (size_t i = 0; i < specs.size(); ++i) flows_[i].spec = specs[i];
  }

  /// Attaches the controller of flow `i` (owned by the caller or moved in).
  void set_cc(size_t i, std::unique_ptr<CongestionController> cc) {
    flows_[i].owned = std::move(cc);
    flows_[i].cc = flows_[i].owned.get();
  }
  CongestionController& cc(size_t i) { return *flows_[i].cc; }

  /// Runs until `end` (may be called again to continue). Statistics are
  /// collected from the first call's `measure_from` on.
  void run(TimePoint end, TimePoint measure_from = TimePoint::zero()) {
    if (!started_) {
      // Statistics start at the first run's measure_from; later runs continue.
      measure_from_ = measure_from;
      started_ = true;
      for (size_t i = 0; i < flows_.size(); ++i) push({flows_[i].spec.start, kSend, i, 0});
    }
    while (!events_.empty()) {
      Event ev = events_.top();
      if (ev.at > end) break;
      events_.pop();
      now_ = ev.at;
      Flow& f = flows_[ev.flow];
      switch (ev.type) {
        case kSend:
          f.send_pending = false;
          try_send(ev.flow);
          break;
        case kAck:
          on_ack(ev.flow, ev.pn);
          break;
        case kRtoCheck:
          f.rto_pending = false;
          check_rto(ev.flow);
          break;
      }
    }
    end_ = end;
  }

  const SimFlowStats& stats(size_t i) const { return flows_[i].stats; }
  /// Fraction of capacity used by all flows over [measure_from, end].
  double utilization() const {
    Bytes total = 0;
    for (const Flow& f : flows_) total += f.stats.delivered;
    const double cap = static_cast<double>(cfg_.rate.bytes_in(end_ - measure_from_));
    return static_cast<double>(total) / cap;
  }
  double throughput_gbps(size_t i) const {
    return static_cast<double>(flows_[i].stats.delivered) * 8 / (end_ - measure_from_).seconds() /
           1e9;
  }
  /// Queueing delay percentile over every packet that entered the queue while measuring.
  Duration queue_delay_percentile(double p) {
    if (qdelays_.empty()) return Duration::zero();
    const size_t k = std::min(qdelays_.size() - 1, static_cast<size_t>(p * qdelays_.size()));
    std::nth_element(qdelays_.begin(), qdelays_.begin() + static_cast<ptrdiff_t>(k),
                     qdelays_.end());
    return Duration::from_ns(qdelays_[k]);
  }
  Bytes max_queue() const { return max_queue_; }
  /// Jain's fairness index of the flows' throughput over the measured interval.
  double jain() const {
    double s = 0, s2 = 0;
    for (const Flow& f : flows_) {
      const double x = static_cast<double>(f.stats.delivered);
      s += x;
      s2 += x * x;
    }
    return s2 == 0 ? 0 : s * s / (static_cast<double>(flows_.size()) * s2);
  }

 private:
  enum Type : uint8_t { kSend, kAck, kRtoCheck };
  struct Event {
    TimePoint at;
    Type type;
    size_t flow;
    uint64_t pn;
    uint64_t seq = 0;
    bool operator>(const Event& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };
  struct Packet {
    TimePoint sent;
    TimePoint delivered_time;
    TimePoint first_sent_time;
    Bytes delivered = 0;
    bool lost = false;
  };
  struct Flow {
    SimFlowSpec spec;
    std::unique_ptr<CongestionController> owned;
    CongestionController* cc = nullptr;
    std::vector<Packet> pkts;  ///< indexed by packet number
    uint64_t next_pn = 0;
    uint64_t acked_upto = 0;  ///< packets below this are acked or lost
    Bytes in_flight = 0;
    Bytes delivered = 0;
    TimePoint delivered_time;
    TimePoint first_sent_time;
    Bytes next_round_delivered = 0;
    uint64_t round = 0;
    TimePoint next_send_time;
    bool send_pending = false;
    bool rto_pending = false;
    TimePoint last_ack;
    Bytes pending_lost = 0;
    uint32_t pending_lost_pkts = 0;
    uint32_t unacked_in_batch = 0;
    Bytes acked_bytes_batch = 0;
    bool round_start_pending = false;
    Duration min_rtt;
    SimFlowStats stats;
  };

  void push(Event e) {
    e.seq = seq_++;
    events_.push(e);
  }

  bool active(const Flow& f) const { return now_ >= f.spec.start && now_ < f.spec.stop; }

  void try_send(size_t i) {
    Flow& f = flows_[i];
    if (!active(f)) return;
    while (true) {
      if (f.in_flight + cfg_.mss > std::max(f.cc->cwnd(), cfg_.mss)) return;  // ACK wakes us
      if (f.next_send_time > now_) {
        if (!f.send_pending) {
          f.send_pending = true;
          push({f.next_send_time, kSend, i, 0});
        }
        return;
      }
      send_one(i);
      const BitsPerSec pr = f.cc->pacing_rate();
      const Duration gap = pr.is_zero() ? Duration::from_ms(1) : pr.transfer_time(cfg_.mss);
      // A pacer with a burst allowance of one quantum: never fall behind by more.
      const Duration slack =
          pr.is_zero() ? Duration::zero() : pr.transfer_time(f.cc->send_quantum());
      f.next_send_time = std::max(f.next_send_time + gap, now_ + gap - slack);
    }
  }

  void send_one(size_t i) {
    Flow& f = flows_[i];
    if (f.in_flight == 0) {
      f.first_sent_time = now_;
      f.delivered_time = now_;
    }
    const uint64_t pn = f.next_pn++;
    f.pkts.push_back({now_, f.delivered_time, f.first_sent_time, f.delivered, false});
    f.in_flight += cfg_.mss;
    SentEvent se;
    se.now = now_;
    se.packet_number = pn;
    se.bytes = cfg_.mss;
    se.in_flight = f.in_flight;
    f.cc->on_packet_sent(se);
    // Bottleneck.
    const Bytes queued = link_free_at_ > now_ ? cfg_.rate.bytes_in(link_free_at_ - now_) : 0;
    if (queued + cfg_.mss > cfg_.buffer) {
      f.pkts[pn].lost = true;
    } else {
      const TimePoint start = std::max(now_, link_free_at_);
      if (now_ >= measure_from_) {
        qdelays_.push_back((start - now_).ns());
        max_queue_ = std::max(max_queue_, queued);
      }
      link_free_at_ = start + cfg_.rate.transfer_time(cfg_.mss);
      if (cfg_.loss > 0 && uni_(rng_) < cfg_.loss) f.pkts[pn].lost = true;
    }
    // Every packet produces an event at the time its ACK (or the ACK after
    // its loss) would reach the sender; lost packets are reported with it.
    const TimePoint depart = f.pkts[pn].lost ? std::max(now_, link_free_at_) : link_free_at_;
    push({depart + f.spec.rtt, kAck, i, pn});
    if (!f.rto_pending) {
      f.rto_pending = true;
      push({now_ + f.spec.rtt * 2 + Duration::from_ms(10), kRtoCheck, i, 0});
    }
  }

  void on_ack(size_t i, uint64_t pn) {
    Flow& f = flows_[i];
    if (pn < f.acked_upto) return;  // declared lost by an RTO already
    Packet& p = f.pkts[pn];
    f.acked_upto = pn + 1;
    f.in_flight -= cfg_.mss;
    if (p.lost) {
      f.pending_lost += cfg_.mss;
      ++f.pending_lost_pkts;
      if (now_ >= measure_from_) f.stats.lost += cfg_.mss;
      if (f.acked_upto == f.next_pn) {
        // Nothing left in flight to carry the loss report: report it now
        // (RACK's timer would), so the sender is never left waiting.
        AckEvent ev;
        ev.now = now_;
        ev.lost_bytes = f.pending_lost;
        ev.lost_packets = f.pending_lost_pkts;
        ev.prior_in_flight = f.in_flight + ev.lost_bytes;
        ev.in_flight = f.in_flight;
        ev.largest_acked_sent_time = p.sent;
        f.pending_lost = 0;
        f.pending_lost_pkts = 0;
        f.cc->on_ack(ev);
      }
      try_send(i);
      return;
    }
    f.last_ack = now_;
    f.delivered += cfg_.mss;
    f.delivered_time = now_;
    if (now_ >= measure_from_) {
      f.stats.delivered += cfg_.mss;
      const size_t b = static_cast<size_t>((now_ - measure_from_).ns() / cfg_.sample_interval.ns());
      if (f.stats.series.size() <= b) f.stats.series.resize(b + 1, 0);
      f.stats.series[b] += cfg_.mss;
    }
    ++f.unacked_in_batch;
    f.acked_bytes_batch += cfg_.mss;
    if (p.delivered >= f.next_round_delivered) {
      f.next_round_delivered = f.delivered;
      ++f.round;
      f.round_start_pending = true;
    }
    if (f.unacked_in_batch < cfg_.ack_every && pn + 1 < f.next_pn) return;
    Duration rtt = now_ - p.sent;
    if (!cfg_.rtt_noise.is_zero()) {
      if (now_ >= noise_until_) {
        noise_ = Duration::from_ns(
            static_cast<int64_t>(uni_(rng_) * static_cast<double>(cfg_.rtt_noise.ns())));
        noise_until_ = now_ + cfg_.rtt_noise_period;
      }
      rtt = rtt + noise_;
    }
    f.min_rtt = f.min_rtt.is_zero() ? rtt : std::min(f.min_rtt, rtt);
    AckEvent ev;
    ev.now = now_;
    ev.rtt = rtt;
    ev.min_rtt = f.min_rtt;
    ev.acked_bytes = f.acked_bytes_batch;
    ev.acked_packets = f.unacked_in_batch;
    ev.lost_bytes = f.pending_lost;
    ev.lost_packets = f.pending_lost_pkts;
    ev.in_flight = f.in_flight;
    ev.prior_in_flight = f.in_flight + ev.acked_bytes + ev.lost_bytes;
    ev.round_start = f.round_start_pending;
    ev.round_count = f.round;
    ev.largest_acked_sent_time = p.sent;
    const Duration send_elapsed = p.sent - p.first_sent_time;
    const Duration ack_elapsed = now_ - p.delivered_time;
    ev.rate.delivered = f.delivered - p.delivered;
    ev.rate.interval = std::max(send_elapsed, ack_elapsed);
    ev.rate.prior_delivered = p.delivered;
    if (ev.rate.interval < f.min_rtt) ev.rate.interval = Duration::zero();  // too short: invalid
    f.first_sent_time = p.sent;
    f.pending_lost = 0;
    f.pending_lost_pkts = 0;
    f.unacked_in_batch = 0;
    f.acked_bytes_batch = 0;
    f.round_start_pending = false;
    f.cc->on_ack(ev);
    try_send(i);
  }

  void check_rto(size_t i) {
    Flow& f = flows_[i];
    if (f.in_flight == 0 || !active(f)) return;
    const Duration rto = f.spec.rtt * 2 + Duration::from_ms(10);
    if (now_ - std::max(f.last_ack, f.pkts[f.acked_upto].sent) >= rto) {
      // Everything in flight is presumed lost.
      ++f.stats.rtos;
      f.acked_upto = f.next_pn;
      f.in_flight = 0;
      f.pending_lost = 0;
      f.pending_lost_pkts = 0;
      f.cc->on_rto(now_);
      f.last_ack = now_;
      try_send(i);
    }
    if (!f.rto_pending) {
      f.rto_pending = true;
      push({now_ + rto / 2, kRtoCheck, i, 0});
    }
  }

  SimConfig cfg_;
  std::mt19937_64 rng_;
  std::uniform_real_distribution<double> uni_{0.0, 1.0};
  Duration noise_;  ///< current RTT-sample lateness (rtt_noise)
  TimePoint noise_until_;
  std::vector<Flow> flows_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  uint64_t seq_ = 0;
  TimePoint now_;
  TimePoint end_;
  TimePoint measure_from_;
  TimePoint link_free_at_;
  std::vector<int64_t> qdelays_;
  Bytes max_queue_ = 0;
  bool started_ = false;

 public:
  /// Current queue at the bottleneck, in time.
  Duration queue_now() const {
    return link_free_at_ > now_ ? link_free_at_ - now_ : Duration::zero();
  }
};

}  // namespace rowan::cc::test
