#include "sim.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>
#include <cstring>
#include <memory>
#include <queue>
#include <random>
#include <stdexcept>

#include "base/clock.h"
#include "sim_parts.h"
#include "transport/connection.h"

namespace rowan::sim {
namespace {

constexpr uint32_t kBurst = 16;
constexpr uint64_t kStream = 0;

class SimClock final : public Clock {
 public:
  TimePoint now() const override { return t; }
  TimePoint t;
};

/// Deterministic payload for verify mode.
inline uint8_t pattern(uint64_t off) { return static_cast<uint8_t>((off * 2654435761U) >> 13); }

using detail::Histogram;
using detail::Pipe;

/// One path's bottleneck.
struct Link {
  BitsPerSec rate;
  Duration rtt;
  double loss = 0;
  Bytes buffer = 0;
  TimePoint free_at;
  bool ge_bad = false;
  bool down = false;
  uint64_t wire_delivered = 0;  // after warmup, not dropped
  uint64_t sample_wire = 0;     // forward wire bytes delivered since the last sample
  uint64_t tail_drops = 0, random_drops = 0, outage_drops = 0;
};

struct Flow;

struct Endpoint {
  std::unique_ptr<transport::Connection> conn;
  Flow* flow = nullptr;
  bool sender = false;
  uint64_t gen = 0;
  TimePoint scheduled = TimePoint::infinite();
};

struct Flow {
  int id = 0;
  std::string cc;
  Duration rtt;
  TimePoint start;
  bool started = false;
  Endpoint snd, rcv;
  // Per path: to the receiver, to the sender.
  std::vector<std::unique_ptr<Pipe>> fwd, rev;
  uint64_t rx_bytes = 0, rx_after_warmup = 0, rx_after_all = 0, rx_at_sample = 0;
  uint64_t tx_written = 0;
  uint64_t app_window = 0;          ///< tcp_source: end-to-end window of the host TCP
  std::vector<TimePoint> fwd_last;  // per path: latest forward delivery (jitter never reorders)
  std::vector<TimePoint> rev_last;  // per path: latest reverse delivery (ACK jitter, the same)
  uint64_t verify_errors = 0;
  bool drained = false;
  std::vector<double> recent;  // throughput of the last samples (bit/s)
  double converge_s = -1;
  // Request-response.
  uint64_t rr_request_end = 0;  // stream offset where the current request ends
  uint64_t rr_answered = 0;     // responses the receiver wrote
  uint64_t rr_resp_read = 0;    // response bytes the sender read
  TimePoint rr_started;
  uint64_t messages = 0;
};

class Simulation {
 public:
  explicit Simulation(const Scenario& s) : s_(s), rng_(s.seed) {
    if (s.rate.is_zero()) throw std::invalid_argument("rate must be > 0");
    if (s.rtt.ns() <= 0) throw std::invalid_argument("rtt must be > 0");
    if (s.flows < 1 || s.flows > 10000) throw std::invalid_argument("flows must be 1..10000");
    if (s.duration.ns() <= 0) throw std::invalid_argument("duration must be > 0");
    if (s.rr_request > 0 && (s.rr_response < 1 || s.rr_response > 65536))
      throw std::invalid_argument("rr response must be 1..65536 bytes");
    if (s.loss < 0 || s.loss >= 1) throw std::invalid_argument("loss must be in [0, 1)");
    multipath_ = !s.paths.empty();
    if (multipath_) {
      if (s.paths.size() > transport::kMaxPaths) throw std::invalid_argument("too many paths");
      if (!s.flow_rtts.empty() || !s.rate_steps.empty() || s.ge_p_gb > 0 || s.tcp_source)
        throw std::invalid_argument(
            "--rtts, --rate-step, --burst-loss and --tcp-source are single-path only");
    }
    for (const Outage& o : s.outages) {
      if (o.path < 0 || static_cast<size_t>(o.path) >= std::max<size_t>(s.paths.size(), 1))
        throw std::invalid_argument("--path-down: no path " + std::to_string(o.path));
      if (o.at.ns() < 0 || o.duration.ns() < 0)
        throw std::invalid_argument("--path-down: negative time");
    }
    std::vector<PathSpec> specs = s.paths;
    if (specs.empty()) specs.push_back(PathSpec{s.rate, s.rtt, s.loss});
    BitsPerSec fastest;
    Duration longest;
    for (const PathSpec& ps : specs) {
      if (ps.rate.is_zero()) throw std::invalid_argument("rate must be > 0");
      if (ps.rtt.ns() <= 0) throw std::invalid_argument("rtt must be > 0");
      if (ps.loss < 0 || ps.loss >= 1) throw std::invalid_argument("loss must be in [0, 1)");
      fastest = std::max(fastest, ps.rate);
      longest = std::max(longest, ps.rtt);
    }
    mss_ = s.mss != 0 ? s.mss : (fastest >= BitsPerSec::from_gbps(1) ? 9000 : 1500);
    if (mss_ < 600 || mss_ > 65000) throw std::invalid_argument("mss must be 600..65000");
    for (const PathSpec& ps : specs) {
      Link l;
      l.rate = ps.rate;
      l.rtt = ps.rtt;
      l.loss = ps.loss;
      l.buffer =
          s.buffer_bytes != 0
              ? s.buffer_bytes
              : static_cast<Bytes>(static_cast<double>(ps.rate.bytes_in(ps.rtt)) * s.buffer_bdp);
      l.buffer = std::max<Bytes>(l.buffer, mss_);
      links_.push_back(l);
    }
    tcp_window_max_ = s.tcp_window_max != 0 ? s.tcp_window_max : 2 * s.rate.bytes_in(s.rtt);
    end_ = TimePoint::zero() + s.duration;
    warmup_ = TimePoint::zero() + std::min(s.warmup, s.duration - Duration::from_ns(1));
    drain_ = s.drain || !s.outages.empty();
    stop_at_ = drain_ ? end_ + std::max(Duration::from_s(5), longest * 20) : end_;
    interval_ = s.sample_interval.ns() > 0 ? s.sample_interval
                : multipath_ ? std::clamp(longest, Duration::from_ms(1), Duration::from_ms(50))
                             : std::max(s.rtt, Duration::from_ms(1));
    slot_ = s.verify ? mss_ : transport::kMinElidedBuffer;
    flows_.resize(static_cast<size_t>(s.flows));
    for (int i = 0; i < s.flows; ++i) {
      Flow& f = flows_[static_cast<size_t>(i)];
      f.id = i;
      f.cc = s.flow_ccs.empty() ? s.cc : s.flow_ccs[static_cast<size_t>(i) % s.flow_ccs.size()];
      f.rtt =
          s.flow_rtts.empty() ? s.rtt : s.flow_rtts[static_cast<size_t>(i) % s.flow_rtts.size()];
      if (f.rtt.ns() <= 0) throw std::invalid_argument("flow RTTs must be > 0");
      f.start = TimePoint::zero() + s.stagger * i;
      for (size_t k = 0; k < links_.size(); ++k) {
        f.fwd.push_back(std::make_unique<Pipe>(slot_));
        f.rev.push_back(std::make_unique<Pipe>(slot_));
      }
      f.fwd_last.resize(links_.size());
      f.rev_last.resize(links_.size());
      f.snd.flow = &f;
      f.snd.sender = true;
      f.rcv.flow = &f;
      last_start_ = std::max(last_start_, f.start);
    }
    all_from_ = std::max(warmup_, last_start_);
    if (!s.series_path.empty()) {
      series_ = std::fopen(s.series_path.c_str(), "w");
      if (series_ == nullptr) throw std::invalid_argument("cannot write " + s.series_path);
      fmt::print(series_, "time_s,flow,goodput_bps,cwnd_bytes,srtt_s,queue_delay_s,capacity_bps\n");
    }
    if (s.verify || s.rr_request > 0) scratch_.resize(1 << 16);
    if (multipath_) tx_mem_.resize(size_t{kBurst} * slot_);
    for (size_t i = 0; i < s.outages.size(); ++i) {
      // An outage that starts before the end and ends before the drain limit.
      push(TimePoint::zero() + s.outages[i].at, kOutage, static_cast<uint32_t>(i), 1);
      if (s.outages[i].duration.ns() > 0)
        push(TimePoint::zero() + s.outages[i].at + s.outages[i].duration, kOutage,
             static_cast<uint32_t>(i), 0);
    }
  }
  ~Simulation() {
    if (series_ != nullptr) std::fclose(series_);
  }
  Simulation(const Simulation&) = delete;
  Simulation& operator=(const Simulation&) = delete;

  Result run();

 private:
  enum Kind : uint8_t { kTimer, kPipe, kSample, kRateStep, kStart, kOutage, kEnd };
  struct Event {
    TimePoint at;
    uint64_t seq;
    uint32_t idx;
    uint32_t aux;  // timer generation (low bits) / pipe: path << 2 | late << 1 | forward
    Kind kind;
    bool operator>(const Event& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };
  void push(TimePoint at, Kind k, uint32_t idx, uint32_t aux = 0) {
    events_.push(Event{at, seq_++, idx, aux, k});
  }

  void start_flow(Flow& f);
  void service(Endpoint& ep);
  /// Puts the datagram in out_[i] (sent by `ep` at now) on its path's pipe.
  void transmit(Endpoint& ep, size_t i, bool* was_empty);
  void deliver(Flow& f, size_t path, bool forward);
  void sample();
  void outage(size_t idx, bool begin);
  bool admit(Link& link, uint32_t wire_len, TimePoint* depart);
  /// `at` plus uniform [0, j], never before `last` (jitter keeps FIFO order).
  TimePoint jittered(TimePoint at, Duration j, TimePoint& last) {
    if (j.ns() <= 0) return at;
    at += Duration::from_ns(static_cast<int64_t>(uni_(rng_) * static_cast<double>(j.ns())));
    at = std::max(at, last);
    last = at;
    return at;
  }
  bool random_loss(Link& link);
  static uint32_t pipe_aux(size_t path, bool forward) {
    return static_cast<uint32_t>(path << 2) | (forward ? 1U : 0U);
  }
  BitsPerSec capacity() const {
    uint64_t bps = 0;
    for (const Link& l : links_) bps += l.rate.bps();
    return BitsPerSec::from_bps(bps);
  }
  Duration path_rtt(const Flow& f, size_t path) const {
    return multipath_ ? links_[path].rtt : f.rtt;
  }
  void result_paths(Result& r);
  void result_outages(Result& r);
  /// How late an endpoint wakes up (host_delay); zero on a clean host.
  Duration lateness() {
    if (s_.host_delay.ns() <= 0) return Duration::zero();
    return Duration::from_ns(
        static_cast<int64_t>(uni_(rng_) * static_cast<double>(s_.host_delay.ns())));
  }
  Endpoint& endpoint(uint32_t idx) {
    Flow& f = flows_[idx / 2];
    return idx % 2 == 0 ? f.snd : f.rcv;
  }
  uint32_t endpoint_index(const Endpoint& ep) const {
    return static_cast<uint32_t>(ep.flow->id) * 2 + (ep.sender ? 0 : 1);
  }

  Scenario s_;
  SimClock clock_;
  std::mt19937_64 rng_;
  std::uniform_real_distribution<double> uni_{0.0, 1.0};
  bool multipath_ = false;
  std::vector<Link> links_;
  uint32_t mss_ = 0, slot_ = 0;
  bool drain_ = false;
  TimePoint stop_at_;       // end_, or the drain limit
  uint32_t undrained_ = 0;  // flows with written bytes not yet read (while draining)
  Bytes tcp_window_max_ = 0;
  TimePoint end_, warmup_, last_start_, all_from_;
  Duration interval_;
  std::vector<Flow> flows_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  uint64_t seq_ = 0;
  transport::OutDatagram out_[kBurst];
  std::vector<uint8_t> tx_mem_;  // several paths: poll_send's buffers, copied to each path's pipe
  std::vector<uint8_t> scratch_;
  FILE* series_ = nullptr;

  void rr_next(Flow& f);
  void rr_answer(Flow& f);
  void rr_read_answer(Flow& f);

  // Measurements.
  Histogram qdelay_;
  Histogram rr_ns_;
  double rr_sum_s_ = 0;
  int64_t rr_max_ns_ = 0;
  double qdelay_sum_interval_ = 0;
  uint64_t qdelay_n_interval_ = 0;
  double capacity_bits_ = 0;  // capacity integrated over [warmup, end], all paths
  TimePoint cap_mark_;
  uint64_t packets_ = 0, events_run_ = 0;
  // Per sample: time, in-order bytes read (all flows), per path forward wire bytes.
  std::vector<double> sample_t_;
  std::vector<uint64_t> sample_rx_;
  std::vector<std::vector<uint64_t>> sample_wire_;
  uint64_t rx_total_ = 0;
  struct Transition {
    size_t path;
    bool up;
    TimePoint at;
  };
  std::vector<Transition> transitions_;  // flow 0's sender
};

bool Simulation::random_loss(Link& link) {
  bool lost = false;
  if (link.loss > 0 && uni_(rng_) < link.loss) lost = true;
  if (s_.ge_p_gb > 0) {
    link.ge_bad = link.ge_bad ? uni_(rng_) >= s_.ge_p_bg : uni_(rng_) < s_.ge_p_gb;
    const double p = link.ge_bad ? s_.ge_loss_bad : s_.ge_loss_good;
    if (p > 0 && uni_(rng_) < p) lost = true;
  }
  return lost;
}

bool Simulation::admit(Link& link, uint32_t wire_len, TimePoint* depart) {
  const TimePoint now = clock_.t;
  const Bytes backlog = link.free_at > now ? link.rate.bytes_in(link.free_at - now) : 0;
  ++packets_;
  if (link.down) {
    ++link.outage_drops;
    return false;
  }
  if (backlog + wire_len > link.buffer) {
    ++link.tail_drops;
    return false;
  }
  const TimePoint start = std::max(now, link.free_at);
  link.free_at = start + link.rate.transfer_time(wire_len);
  *depart = link.free_at;
  if (now >= warmup_) {
    qdelay_.add((start - now).ns());
    qdelay_sum_interval_ += static_cast<double>((start - now).ns());
    ++qdelay_n_interval_;
  }
  if (random_loss(link)) {
    ++link.random_drops;
    return false;
  }
  if (*depart >= warmup_ && *depart <= end_) link.wire_delivered += wire_len;
  link.sample_wire += wire_len;
  return true;
}

void Simulation::start_flow(Flow& f) {
  transport::TransportConfig c;
  c.connection_id = static_cast<uint64_t>(f.id) + 1;
  c.link_rate = s_.rate.scaled(s_.hint_rate);
  c.base_rtt = f.rtt.scaled(s_.hint_rtt);
  c.max_datagram = mss_;
  c.cc = f.cc;
  c.cc_params = s_.cc_params;
  // Unless told otherwise, windows never limit the CC: a full queue plus
  // the RTTs a repaired hole (or a lost retransmission) holds back delivery
  // at the receiver, sized from the true path.
  const double bdp = std::max(1.0, static_cast<double>(s_.rate.bytes_in(f.rtt)));
  // With several paths the connection sizes its BDP from all of them.
  const double hinted_bdp = std::max(1.0, static_cast<double>(c.link_rate.bytes_in(c.base_rtt)));
  const double window_bdp =
      s_.window_bdp > 0 ? s_.window_bdp
      : multipath_      ? 4.0 + 2.0 * s_.buffer_bdp
                        : (4.0 * bdp + 2.0 * static_cast<double>(links_[0].buffer)) / hinted_bdp;
  Duration shortest = f.rtt;
  if (multipath_) {
    shortest = links_[0].rtt;
    for (const Link& l : links_) {
      c.paths.push_back(transport::PathConfig{l.rate, l.rtt});
      shortest = std::min(shortest, l.rtt);
    }
  }
  c.send_buffer_bdp = window_bdp;
  c.recv_window_bdp = window_bdp;
  c.chunk_size = s_.verify ? 16384 : 65536;
  c.max_streams = 4;
  c.ack_every = s_.ack_every;
  c.max_ack_delay = std::clamp(shortest / 8, Duration::from_us(25), Duration::from_ms(1));
  c.timer_granularity = std::min(Duration::from_us(100), shortest / 4);
  c.integrity_check = s_.verify;
  c.elide_payload = !s_.verify;
  c.fec.mode = s_.fec;
  f.snd.conn = std::make_unique<transport::Connection>(c, clock_, clock_.t);
  f.rcv.conn = std::make_unique<transport::Connection>(c, clock_, clock_.t);
  f.started = true;
  f.app_window = 10ULL * 1448;
  if (s_.rr_request > 0) rr_next(f);
  service(f.snd);
}

void Simulation::rr_next(Flow& f) {
  f.rr_request_end += s_.rr_request;
  f.rr_started = clock_.t;
}

void Simulation::rr_answer(Flow& f) {
  // The receiving application has the whole request: it answers.
  while (f.rx_bytes >= (f.rr_answered + 1) * s_.rr_request) {
    const size_t w = f.rcv.conn->write(kStream, s_.verify ? scratch_.data() : nullptr,
                                       static_cast<size_t>(s_.rr_response), false, clock_.t);
    if (w < s_.rr_response) break;  // the response buffer is far larger than one answer
    ++f.rr_answered;
  }
}

void Simulation::rr_read_answer(Flow& f) {
  transport::Connection& conn = *f.snd.conn;
  uint64_t id;
  while (conn.next_readable(&id)) {
    for (;;) {
      bool fin = false;
      const size_t n = conn.read(id, s_.verify ? scratch_.data() : nullptr,
                                 s_.verify ? scratch_.size() : SIZE_MAX, &fin, clock_.t);
      if (n == 0) break;
      f.rr_resp_read += n;
    }
  }
  while (f.rr_resp_read >= (f.messages + 1) * s_.rr_response) {
    ++f.messages;
    const Duration took = clock_.t - f.rr_started;
    if (f.rr_started >= warmup_) {
      rr_ns_.add(took.ns());
      rr_sum_s_ += took.seconds();
      rr_max_ns_ = std::max(rr_max_ns_, took.ns());
    }
    rr_next(f);
  }
}

void Simulation::transmit(Endpoint& ep, size_t i, bool* was_empty) {
  Flow& f = *ep.flow;
  const TimePoint now = clock_.t;
  const size_t path = out_[i].path.index;
  Link& link = links_[path];
  Pipe& pipe = ep.sender ? *f.fwd[path] : *f.rev[path];
  TimePoint at;
  if (ep.sender) {
    if (!admit(link, out_[i].wire_len, &at)) return;
    at = jittered(at + path_rtt(f, path) / 2 + s_.host_offset, s_.jitter, f.fwd_last[path]);
  } else {
    if (link.down) {
      ++link.outage_drops;
      return;
    }
    const Duration rtt = path_rtt(f, path);
    at = jittered(now + (rtt - rtt / 2), s_.ack_jitter, f.rev_last[path]);
  }
  if (pipe.empty()) was_empty[path] = true;
  pipe.reserve(1);
  std::memcpy(pipe.free_slot(0), out_[i].data, out_[i].len);
  pipe.commit(0, at, out_[i].len, out_[i].wire_len);
}

void Simulation::service(Endpoint& ep) {
  transport::Connection& conn = *ep.conn;
  Flow& f = *ep.flow;
  const TimePoint now = clock_.t;
  // One path: datagrams are written straight into the pipe's free slots.
  Pipe& pipe = ep.sender ? *f.fwd[0] : *f.rev[0];
  const bool was_empty = pipe.empty();
  bool path_was_empty[transport::kMaxPaths] = {};
  for (;;) {
    if (ep.sender && !(drain_ && now >= end_)) {
      // A bulk application keeps the send buffer full; a host TCP keeps at
      // most its window outstanding end to end.
      Bytes room = conn.send_buffer_free();
      if (s_.tcp_source) {
        const uint64_t outstanding = f.tx_written - f.rx_bytes;
        room = std::min<Bytes>(room, f.app_window > outstanding ? f.app_window - outstanding : 0);
      }
      if (s_.rr_request > 0) {
        room = std::min<Bytes>(room, f.rr_request_end - f.tx_written);
      }
      if (s_.verify) {
        while (room > 0) {
          const size_t n = static_cast<size_t>(std::min<Bytes>(room, scratch_.size()));
          for (size_t i = 0; i < n; ++i) scratch_[i] = pattern(f.tx_written + i);
          const size_t w = conn.write(kStream, scratch_.data(), n, false, now);
          f.tx_written += w;
          if (w < n) break;
          room -= w;
        }
      } else if (room > 0) {
        f.tx_written += conn.write(kStream, nullptr, room, false, now);
      }
    }
    if (conn.next_timeout() <= now) conn.on_timeout(now);
    size_t n = 0;
    if (!multipath_) {
      pipe.reserve(kBurst);
      for (uint32_t i = 0; i < kBurst; ++i)
        out_[i] = transport::OutDatagram{pipe.free_slot(i), slot_, 0, 0, {}};
      n = conn.poll_send(std::span(out_, kBurst), now);
      size_t kept = 0;
      for (size_t i = 0; i < n; ++i) {
        TimePoint at;
        if (ep.sender) {
          if (!admit(links_[0], out_[i].wire_len, &at)) continue;
          at = jittered(at + f.rtt / 2 + s_.host_offset, s_.jitter, f.fwd_last[0]);
        } else {
          if (links_[0].down) {
            ++links_[0].outage_drops;
            continue;
          }
          at = jittered(now + (f.rtt - f.rtt / 2), s_.ack_jitter, f.rev_last[0]);
        }
        pipe.commit(i - kept, at, out_[i].len, out_[i].wire_len);
        ++kept;
      }
    } else {
      for (uint32_t i = 0; i < kBurst; ++i)
        out_[i] = transport::OutDatagram{tx_mem_.data() + size_t{i} * slot_, slot_, 0, 0, {}};
      n = conn.poll_send(std::span(out_, kBurst), now);
      for (size_t i = 0; i < n; ++i) transmit(ep, i, path_was_empty);
    }
    if (n < kBurst) break;
  }
  if (ep.sender && f.id == 0) {
    transport::PathEvent pe;
    while (conn.next_path_event(&pe))
      transitions_.push_back(
          Transition{pe.path.index, pe.state == transport::PathState::kUp, pe.at});
  }
  const uint32_t dir = ep.sender ? 1 : 0;
  if (!multipath_) {
    if (was_empty && !pipe.empty())
      push(pipe.head_time(), kPipe, static_cast<uint32_t>(f.id), pipe_aux(0, dir == 1));
  } else {
    for (size_t k = 0; k < links_.size(); ++k) {
      Pipe& pk = ep.sender ? *f.fwd[k] : *f.rev[k];
      if (path_was_empty[k] && !pk.empty())
        push(pk.head_time(), kPipe, static_cast<uint32_t>(f.id), pipe_aux(k, dir == 1));
    }
  }
  TimePoint next = conn.next_timeout();
  if (next <= now) next = now + Duration::from_us(1);  // never spin at one instant
  if (next != ep.scheduled) {
    ep.scheduled = next;
    ++ep.gen;
    if (!next.is_infinite())
      push(next + lateness(), kTimer, endpoint_index(ep), static_cast<uint32_t>(ep.gen));
  }
}

void Simulation::deliver(Flow& f, size_t path, bool forward) {
  Pipe& pipe = forward ? *f.fwd[path] : *f.rev[path];
  Endpoint& dst = forward ? f.rcv : f.snd;
  const TimePoint now = clock_.t;
  const transport::PathId pid{static_cast<uint16_t>(path)};
  while (!pipe.empty() && pipe.head_time() <= now) {
    dst.conn->on_datagram(pipe.head_data(), pipe.head_len(), io::Ecn::kEct0, now,
                          s_.rx_stamps ? pipe.head_time() : TimePoint(), pid);
    pipe.pop();
  }
  if (forward) {
    uint64_t id;
    while (dst.conn->next_readable(&id)) {
      for (;;) {
        bool fin = false;
        const size_t n = dst.conn->read(id, s_.verify ? scratch_.data() : nullptr,
                                        s_.verify ? scratch_.size() : SIZE_MAX, &fin, now);
        if (n == 0) break;
        if (s_.verify) {
          for (size_t i = 0; i < n; ++i)
            if (scratch_[i] != pattern(f.rx_bytes + i)) ++f.verify_errors;
        }
        f.rx_bytes += n;
        rx_total_ += n;
        if (s_.tcp_source) f.app_window = std::min<uint64_t>(f.app_window + n, tcp_window_max_);
        if (now >= warmup_ && now <= end_) f.rx_after_warmup += n;
        if (now >= all_from_ && now <= end_) f.rx_after_all += n;
      }
    }
    if (drain_ && now >= end_ && f.rx_bytes == f.tx_written && !f.drained) {
      f.drained = true;
      --undrained_;
    }
    if (s_.rr_request > 0) rr_answer(f);
  } else if (s_.rr_request > 0) {
    rr_read_answer(f);
  }
  service(dst);
  if (!pipe.empty())
    push(pipe.head_time(), kPipe, static_cast<uint32_t>(f.id), pipe_aux(path, forward));
}

void Simulation::outage(size_t idx, bool begin) {
  const Outage& o = s_.outages[idx];
  Link& link = links_[static_cast<size_t>(o.path)];
  link.down = begin;
  if (!begin) return;
  // A cut link loses what is on it.
  for (Flow& f : flows_) {
    link.outage_drops += f.fwd[static_cast<size_t>(o.path)]->clear();
    link.outage_drops += f.rev[static_cast<size_t>(o.path)]->clear();
  }
}

void Simulation::sample() {
  const TimePoint now = clock_.t;
  const double secs = interval_.seconds();
  int active = 0;
  for (const Flow& f : flows_) active += f.started ? 1 : 0;
  const double fair = static_cast<double>(capacity().bps()) / std::max(active, 1);
  const double qd = qdelay_n_interval_ > 0
                        ? qdelay_sum_interval_ / static_cast<double>(qdelay_n_interval_) * 1e-9
                        : 0;
  for (Flow& f : flows_) {
    if (!f.started) continue;
    const double bps = static_cast<double>(f.rx_bytes - f.rx_at_sample) * 8 / secs;
    f.rx_at_sample = f.rx_bytes;
    f.recent.push_back(bps);
    if (f.recent.size() > 2) f.recent.erase(f.recent.begin());
    const double avg = f.recent.size() == 2 ? (f.recent[0] + f.recent[1]) / 2 : 0;
    if (f.converge_s < 0 && avg >= 0.9 * fair) f.converge_s = (now - f.start).seconds();
    if (series_ != nullptr) {
      const auto& st = f.snd.conn->stats();
      fmt::print(series_, "{:.6f},{},{:.0f},{},{:.6f},{:.6f},{}\n", now.ns() * 1e-9, f.id, bps,
                 st.cwnd, st.srtt.seconds(), qd, capacity().bps());
    }
  }
  if (multipath_ || !s_.outages.empty()) {
    sample_t_.push_back((now - TimePoint::zero()).seconds());
    sample_rx_.push_back(rx_total_);
    std::vector<uint64_t> wire(links_.size());
    for (size_t k = 0; k < links_.size(); ++k) {
      wire[k] = links_[k].sample_wire;
      links_[k].sample_wire = 0;
    }
    sample_wire_.push_back(std::move(wire));
  }
  qdelay_sum_interval_ = 0;
  qdelay_n_interval_ = 0;
}

Result Simulation::run() {
  const auto wall0 = std::chrono::steady_clock::now();
  for (Flow& f : flows_) push(f.start, kStart, static_cast<uint32_t>(f.id));
  for (size_t i = 0; i < s_.rate_steps.size(); ++i)
    push(TimePoint::zero() + s_.rate_steps[i].first, kRateStep, static_cast<uint32_t>(i));
  push(TimePoint::zero() + interval_, kSample, 0);
  if (drain_) push(end_, kEnd, 0);
  cap_mark_ = warmup_;
  auto account_capacity = [&](TimePoint upto) {
    if (upto > cap_mark_) {
      capacity_bits_ += static_cast<double>(capacity().bps()) * (upto - cap_mark_).seconds();
      cap_mark_ = upto;
    }
  };
  bool drained = false;
  while (!events_.empty()) {
    const Event ev = events_.top();
    if (ev.at > stop_at_) break;
    if (drain_ && ev.at > end_ && undrained_ == 0) {
      drained = true;
      break;
    }
    events_.pop();
    clock_.t = ev.at;
    ++events_run_;
    switch (ev.kind) {
      case kStart:
        start_flow(flows_[ev.idx]);
        break;
      case kTimer: {
        Endpoint& ep = endpoint(ev.idx);
        if (ep.gen != ev.aux) break;  // superseded
        ep.scheduled = TimePoint::infinite();
        service(ep);
        break;
      }
      case kPipe:
        // A late host handles the arrival (and whatever arrived meanwhile) later.
        if ((ev.aux & 2U) == 0 && s_.host_delay.ns() > 0) {
          push(ev.at + lateness(), kPipe, ev.idx, ev.aux | 2U);
          break;
        }
        deliver(flows_[ev.idx], ev.aux >> 2, (ev.aux & 1U) == 1);
        break;
      case kSample:
        if (ev.at > end_) break;
        sample();
        push(ev.at + interval_, kSample, 0);
        break;
      case kOutage:
        outage(ev.idx, ev.aux == 1);
        break;
      case kEnd:
        // From here the senders write nothing more; the run ends once every
        // flow has read all it wrote.
        for (Flow& f : flows_) {
          if (f.rx_bytes == f.tx_written) {
            f.drained = true;
          } else {
            ++undrained_;
          }
        }
        for (Flow& f : flows_)
          if (f.started) service(f.snd);
        break;
      case kRateStep: {
        if (ev.at > end_) break;
        account_capacity(clock_.t);
        Link& l = links_[0];
        const BitsPerSec next = s_.rate_steps[ev.idx].second;
        if (l.free_at > clock_.t) {
          const Bytes backlog = l.rate.bytes_in(l.free_at - clock_.t);
          l.free_at = clock_.t + next.transfer_time(backlog);
        }
        l.rate = next;
        break;
      }
    }
  }
  if (drain_ && undrained_ == 0 && !events_.empty() && events_.top().at > end_) drained = true;
  account_capacity(end_);

  Result r;
  r.drained = drain_ && drained;
  r.capacity_bps =
      multipath_ ? static_cast<double>(capacity().bps()) : static_cast<double>(s_.rate.bps());
  const double window = (end_ - warmup_).seconds();
  uint64_t wire_delivered = 0;
  for (const Link& l : links_) wire_delivered += l.wire_delivered;
  r.utilization = capacity_bits_ > 0 ? static_cast<double>(wire_delivered) * 8 / capacity_bits_ : 0;
  uint64_t total = 0, retx = 0, sent = 0;
  double sum = 0, sum_sq = 0;
  int jain_n = 0;
  const double all_window = (end_ - all_from_).seconds();
  for (Flow& f : flows_) {
    FlowResult fr;
    fr.id = f.id;
    fr.cc = f.cc;
    fr.start_s = (f.start - TimePoint::zero()).seconds();
    fr.rtt_s = f.rtt.seconds();
    fr.converge_s = f.converge_s;
    fr.verify_errors = f.verify_errors;
    if (f.started) {
      const double w = (end_ - std::max(f.start, warmup_)).seconds();
      fr.goodput_bps = w > 0 ? static_cast<double>(f.rx_after_warmup) * 8 / w : 0;
      const auto& st = f.snd.conn->stats();
      fr.retransmit_ratio = st.stream_bytes_sent > 0 ? static_cast<double>(st.retransmitted_bytes) /
                                                           static_cast<double>(st.stream_bytes_sent)
                                                     : 0;
      fr.srtt_s = st.srtt.seconds();
      fr.min_rtt_s = st.min_rtt.seconds();
      fr.lost_packets = st.lost_packets;
      fr.rtos = st.rtos;
      fr.spurious = st.spurious_losses;
      fr.send_window_growths = st.send_window_growths;
      fr.recv_window_growths = f.rcv.conn->stats().recv_window_growths;
      retx += st.retransmitted_bytes;
      sent += st.stream_bytes_sent;
      fr.repair_packets = st.fec_repair_sent;
      fr.repair_bytes = st.fec_repair_bytes;
      fr.wire_bytes = st.bytes_sent;
      fr.retx_packets = st.retransmitted_packets;
      fr.recovered = f.rcv.conn->stats().fec_recovered;
      fr.unrecoverable = f.rcv.conn->stats().fec_unrecoverable;
      fr.ptos = st.ptos;
      fr.fec_k = st.fec_k;
      fr.fec_m = st.fec_m;
      r.unrecoverable += fr.unrecoverable;
      fr.messages = f.messages;
      r.repair_packets += fr.repair_packets;
      r.repair_bytes += fr.repair_bytes;
      r.wire_bytes += fr.wire_bytes;
      r.retx_packets += fr.retx_packets;
      r.recovered += fr.recovered;
      if (all_window > 0) {
        const double x = static_cast<double>(f.rx_after_all) * 8 / all_window;
        sum += x;
        sum_sq += x * x;
        ++jain_n;
      }
    }
    total += f.rx_after_warmup;
    r.corrupted_bytes += f.verify_errors;
    if (drain_) r.lost_bytes += f.tx_written - f.rx_bytes;
    r.flows.push_back(fr);
  }
  r.goodput_bps = window > 0 ? static_cast<double>(total) * 8 / window : 0;
  r.jain_index = sum_sq > 0 ? sum * sum / (jain_n * sum_sq) : 0;
  r.retransmit_ratio = sent > 0 ? static_cast<double>(retx) / static_cast<double>(sent) : 0;
  r.queue_delay_p50_s = qdelay_.quantile(0.50) * 1e-9;
  r.queue_delay_p95_s = qdelay_.quantile(0.95) * 1e-9;
  r.queue_delay_p99_s = qdelay_.quantile(0.99) * 1e-9;
  r.messages = rr_ns_.count();
  if (r.messages > 0) {
    r.rr_mean_s = rr_sum_s_ / static_cast<double>(r.messages);
    r.rr_p50_s = rr_ns_.quantile(0.50) * 1e-9;
    r.rr_p99_s = rr_ns_.quantile(0.99) * 1e-9;
    r.rr_p999_s = rr_ns_.quantile(0.999) * 1e-9;
    r.rr_max_s = static_cast<double>(rr_max_ns_) * 1e-9;
  }
  for (const Link& l : links_) {
    r.tail_drops += l.tail_drops;
    r.random_drops += l.random_drops;
  }
  r.packets = packets_;
  r.events = events_run_;
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  r.simulated_s = (clock_.t - TimePoint::zero()).seconds();
  if (flows_[0].started) {
    transport::Connection& conn = *flows_[0].snd.conn;
    const auto& st = conn.stats();
    r.configured_buffer_bytes = st.send_buffer_capacity + st.recv_buffer_capacity;
    for (size_t k = 0; k < conn.path_count(); ++k)
      r.path_memory_bytes += conn.path_stats(transport::PathId{static_cast<uint16_t>(k)}).memory;
  }
  result_paths(r);
  result_outages(r);
  return r;
}

void Simulation::result_paths(Result& r) {
  const double window = (end_ - warmup_).seconds();
  for (size_t k = 0; k < links_.size(); ++k) {
    const Link& l = links_[k];
    PathResult pr;
    pr.id = static_cast<int>(k);
    pr.rate_bps = static_cast<double>(l.rate.bps());
    pr.rtt_s = (multipath_ ? l.rtt : s_.rtt).seconds();
    pr.loss = l.loss;
    pr.throughput_bps = window > 0 ? static_cast<double>(l.wire_delivered) * 8 / window : 0;
    pr.utilization = pr.throughput_bps / pr.rate_bps;
    pr.tail_drops = l.tail_drops;
    pr.random_drops = l.random_drops;
    pr.outage_drops = l.outage_drops;
    for (Flow& f : flows_) {
      if (!f.started) continue;
      const auto& ps = f.snd.conn->path_stats(transport::PathId{static_cast<uint16_t>(k)});
      pr.bytes_acked += ps.bytes_acked;
      pr.lost_packets += ps.lost_packets;
      pr.downs += ps.downs;
      pr.ups += ps.ups;
      if (f.id == 0) pr.srtt_s = ps.srtt.seconds();
    }
    r.paths.push_back(pr);
  }
}

// Recovery and rejoin times from the samples: goodput over a 100 ms window
// (at least one sample) against the capacity of the paths not cut, and each
// path's forward wire bytes per sample against its rate.
void Simulation::result_outages(Result& r) {
  const double dt = interval_.seconds();
  const size_t w = std::max<size_t>(1, static_cast<size_t>(std::ceil(0.1 / dt - 1e-9)));
  for (const Outage& o : s_.outages) {
    OutageResult orr;
    orr.path = o.path;
    orr.at_s = o.at.seconds();
    orr.duration_s = o.duration.seconds();
    const TimePoint at = TimePoint::zero() + o.at;
    for (const Transition& t : transitions_) {
      if (t.path == static_cast<size_t>(o.path) && !t.up && t.at >= at) {
        orr.detect_s = (t.at - at).seconds();
        break;
      }
    }
    const double back = o.duration.ns() > 0 ? orr.at_s + orr.duration_s : 1e300;
    for (size_t i = w; i < sample_t_.size(); ++i) {
      const double t0 = sample_t_[i - w], t1 = sample_t_[i];
      if (t0 < orr.at_s - 1e-9) continue;
      // Capacity of the paths not cut at t1.
      double surviving = 0;
      for (size_t k = 0; k < links_.size(); ++k) {
        bool cut = false;
        for (const Outage& x : s_.outages) {
          const double xa = x.at.seconds();
          const double xb = x.duration.ns() > 0 ? xa + x.duration.seconds() : 1e300;
          if (static_cast<size_t>(x.path) == k && t0 < xb && t1 > xa) cut = true;
        }
        if (!cut) surviving += static_cast<double>(links_[k].rate.bps());
      }
      const double bps = static_cast<double>(sample_rx_[i] - sample_rx_[i - w]) * 8 / (t1 - t0);
      if (surviving > 0 && bps >= 0.85 * surviving) {
        orr.recovery_s = t1 - orr.at_s;
        break;
      }
      if (t1 >= back) break;  // back before goodput recovered: no recovery time
    }
    if (o.duration.ns() > 0) {
      const size_t k = static_cast<size_t>(o.path);
      const double need = 0.1 * static_cast<double>(links_[k].rate.bps()) * dt / 8;
      for (size_t i = 0; i < sample_t_.size(); ++i) {
        if (sample_t_[i] - dt < back - 1e-9) continue;
        if (static_cast<double>(sample_wire_[i][k]) >= need) {
          orr.rejoin_s = sample_t_[i] - back;
          break;
        }
      }
    }
    r.outages.push_back(orr);
  }
}

}  // namespace

Result run(const Scenario& s) {
  Simulation sim(s);
  return sim.run();
}

}  // namespace rowan::sim
