#include "sim.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <queue>
#include <random>
#include <stdexcept>

#include "base/clock.h"
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

/// A FIFO of datagrams in flight on one path, each with its delivery time.
class Pipe {
 public:
  explicit Pipe(uint32_t slot) : slot_(slot) { grow(256); }
  bool empty() const { return size_ == 0; }
  TimePoint head_time() const { return meta_[head_].at; }
  /// Makes room for k more and returns the buffer of the i-th free slot.
  void reserve(size_t k) {
    if (size_ + k > cap_) grow(std::max(cap_ * 2, size_ + k));
  }
  uint8_t* free_slot(size_t i) { return data_.data() + idx(size_ + i) * slot_; }
  /// Appends the datagram already written in free_slot(from).
  void commit(size_t from, TimePoint at, uint32_t len, uint32_t wire_len) {
    if (from != 0) std::memmove(free_slot(0), free_slot(from), len);
    meta_[idx(size_)] = Meta{at, len, wire_len};
    ++size_;
  }
  const uint8_t* head_data() const { return data_.data() + head_ * slot_; }
  uint32_t head_len() const { return meta_[head_].len; }
  void pop() {
    head_ = (head_ + 1) & (cap_ - 1);
    --size_;
  }
  uint32_t slot_size() const { return slot_; }

 private:
  struct Meta {
    TimePoint at;
    uint32_t len;
    uint32_t wire_len;
  };
  size_t idx(size_t i) const { return (head_ + i) & (cap_ - 1); }
  void grow(size_t need) {
    size_t cap = 1;
    while (cap < need) cap <<= 1;
    std::vector<Meta> meta(cap);
    std::vector<uint8_t> data(cap * slot_);
    for (size_t i = 0; i < size_; ++i) {
      meta[i] = meta_[idx(i)];
      std::memcpy(data.data() + i * slot_, data_.data() + idx(i) * slot_, meta_[idx(i)].len);
    }
    meta_.swap(meta);
    data_.swap(data);
    cap_ = cap;
    head_ = 0;
  }
  uint32_t slot_;
  std::vector<Meta> meta_;
  std::vector<uint8_t> data_;
  size_t cap_ = 0, head_ = 0, size_ = 0;
};

/// Log-linear histogram of non-negative nanosecond values (≤ 3% error).
class Histogram {
 public:
  void add(int64_t v) {
    ++count_;
    ++bins_[index(static_cast<uint64_t>(std::max<int64_t>(v, 0)))];
  }
  uint64_t count() const { return count_; }
  double quantile(double q) const {
    if (count_ == 0) return 0;
    const auto target = static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_)));
    uint64_t seen = 0;
    for (size_t i = 0; i < bins_.size(); ++i) {
      seen += bins_[i];
      if (seen >= target && bins_[i] > 0) return value(i);
    }
    return value(bins_.size() - 1);
  }

 private:
  static size_t index(uint64_t v) {
    if (v < 64) return v;
    const int e = 63 - __builtin_clzll(v);  // >= 6
    return 64 + static_cast<size_t>(e - 6) * 32 + ((v >> (e - 5)) & 31);
  }
  static double value(size_t i) {
    if (i < 64) return static_cast<double>(i);
    const int e = static_cast<int>((i - 64) / 32) + 6;
    const uint64_t sub = (i - 64) % 32;
    const double lo = std::ldexp(static_cast<double>(32 + sub), e - 5);
    return lo + std::ldexp(0.5, e - 5);
  }
  std::vector<uint64_t> bins_ = std::vector<uint64_t>(64 + 58 * 32, 0);
  uint64_t count_ = 0;
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
  std::unique_ptr<Pipe> fwd, rev;  // to the receiver, to the sender
  uint64_t rx_bytes = 0, rx_after_warmup = 0, rx_after_all = 0, rx_at_sample = 0;
  uint64_t tx_written = 0;
  uint64_t app_window = 0;  ///< tcp_source: end-to-end window of the host TCP
  TimePoint fwd_last;       // latest forward delivery time (jitter never reorders)
  uint64_t verify_errors = 0;
  std::vector<double> recent;  // throughput of the last samples (bit/s)
  double converge_s = -1;
};

class Simulation {
 public:
  explicit Simulation(const Scenario& s) : s_(s), rng_(s.seed) {
    if (s.rate.is_zero()) throw std::invalid_argument("rate must be > 0");
    if (s.rtt.ns() <= 0) throw std::invalid_argument("rtt must be > 0");
    if (s.flows < 1 || s.flows > 10000) throw std::invalid_argument("flows must be 1..10000");
    if (s.duration.ns() <= 0) throw std::invalid_argument("duration must be > 0");
    if (s.loss < 0 || s.loss >= 1) throw std::invalid_argument("loss must be in [0, 1)");
    rate_ = s.rate;
    mss_ = s.mss != 0 ? s.mss : (s.rate >= BitsPerSec::from_gbps(1) ? 9000 : 1500);
    if (mss_ < 600 || mss_ > 65000) throw std::invalid_argument("mss must be 600..65000");
    buffer_ = s.buffer_bytes != 0
                  ? s.buffer_bytes
                  : static_cast<Bytes>(static_cast<double>(s.rate.bytes_in(s.rtt)) * s.buffer_bdp);
    buffer_ = std::max<Bytes>(buffer_, mss_);
    tcp_window_max_ = s.tcp_window_max != 0 ? s.tcp_window_max : 2 * s.rate.bytes_in(s.rtt);
    end_ = TimePoint::zero() + s.duration;
    warmup_ = TimePoint::zero() + std::min(s.warmup, s.duration - Duration::from_ns(1));
    interval_ =
        s.sample_interval.ns() > 0 ? s.sample_interval : std::max(s.rtt, Duration::from_ms(1));
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
      f.fwd = std::make_unique<Pipe>(slot_);
      f.rev = std::make_unique<Pipe>(slot_);
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
    if (s.verify) scratch_.resize(1 << 16);
  }
  ~Simulation() {
    if (series_ != nullptr) std::fclose(series_);
  }
  Simulation(const Simulation&) = delete;
  Simulation& operator=(const Simulation&) = delete;

  Result run();

 private:
  enum Kind : uint8_t { kTimer, kPipe, kSample, kRateStep, kStart };
  struct Event {
    TimePoint at;
    uint64_t seq;
    uint32_t idx;
    uint32_t aux;  // timer generation (low bits) / pipe direction
    Kind kind;
    bool operator>(const Event& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };
  void push(TimePoint at, Kind k, uint32_t idx, uint32_t aux = 0) {
    events_.push(Event{at, seq_++, idx, aux, k});
  }

  void start_flow(Flow& f);
  void service(Endpoint& ep);
  void deliver(Flow& f, bool forward);
  void sample();
  bool admit(Flow& f, uint32_t wire_len, TimePoint* depart);
  bool random_loss();
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
  bool ge_bad_ = false;
  BitsPerSec rate_;
  uint32_t mss_ = 0, slot_ = 0;
  Bytes buffer_ = 0;
  Bytes tcp_window_max_ = 0;
  TimePoint end_, warmup_, last_start_, all_from_;
  Duration interval_;
  TimePoint link_free_at_;
  std::vector<Flow> flows_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  uint64_t seq_ = 0;
  transport::OutDatagram out_[kBurst];
  std::vector<uint8_t> scratch_;
  FILE* series_ = nullptr;

  // Measurements.
  Histogram qdelay_;
  double qdelay_sum_interval_ = 0;
  uint64_t qdelay_n_interval_ = 0;
  uint64_t wire_bytes_delivered_ = 0;  // after warmup, not randomly lost
  double capacity_bits_ = 0;           // capacity integrated over [warmup, end]
  TimePoint cap_mark_;
  uint64_t tail_drops_ = 0, random_drops_ = 0, packets_ = 0, events_run_ = 0;
};

bool Simulation::random_loss() {
  bool lost = false;
  if (s_.loss > 0 && uni_(rng_) < s_.loss) lost = true;
  if (s_.ge_p_gb > 0) {
    ge_bad_ = ge_bad_ ? uni_(rng_) >= s_.ge_p_bg : uni_(rng_) < s_.ge_p_gb;
    const double p = ge_bad_ ? s_.ge_loss_bad : s_.ge_loss_good;
    if (p > 0 && uni_(rng_) < p) lost = true;
  }
  return lost;
}

bool Simulation::admit(Flow& f, uint32_t wire_len, TimePoint* depart) {
  (void)f;
  const TimePoint now = clock_.t;
  const Bytes backlog = link_free_at_ > now ? rate_.bytes_in(link_free_at_ - now) : 0;
  ++packets_;
  if (backlog + wire_len > buffer_) {
    ++tail_drops_;
    return false;
  }
  const TimePoint start = std::max(now, link_free_at_);
  link_free_at_ = start + rate_.transfer_time(wire_len);
  *depart = link_free_at_;
  if (now >= warmup_) {
    qdelay_.add((start - now).ns());
    qdelay_sum_interval_ += static_cast<double>((start - now).ns());
    ++qdelay_n_interval_;
  }
  if (random_loss()) {
    ++random_drops_;
    return false;
  }
  if (*depart >= warmup_ && *depart <= end_) wire_bytes_delivered_ += wire_len;
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
  const double hinted_bdp = std::max(1.0, static_cast<double>(c.link_rate.bytes_in(c.base_rtt)));
  const double window_bdp = s_.window_bdp > 0
                                ? s_.window_bdp
                                : (4.0 * bdp + 2.0 * static_cast<double>(buffer_)) / hinted_bdp;
  c.send_buffer_bdp = window_bdp;
  c.recv_window_bdp = window_bdp;
  c.chunk_size = s_.verify ? 16384 : 65536;
  c.max_streams = 4;
  c.ack_every = s_.ack_every;
  c.max_ack_delay = std::clamp(f.rtt / 8, Duration::from_us(25), Duration::from_ms(1));
  c.timer_granularity = std::min(Duration::from_us(100), f.rtt / 4);
  c.integrity_check = s_.verify;
  c.elide_payload = !s_.verify;
  f.snd.conn = std::make_unique<transport::Connection>(c, clock_, clock_.t);
  f.rcv.conn = std::make_unique<transport::Connection>(c, clock_, clock_.t);
  f.started = true;
  f.app_window = 10ULL * 1448;
  service(f.snd);
}

void Simulation::service(Endpoint& ep) {
  transport::Connection& conn = *ep.conn;
  Flow& f = *ep.flow;
  const TimePoint now = clock_.t;
  Pipe& pipe = ep.sender ? *f.fwd : *f.rev;
  const bool was_empty = pipe.empty();
  for (;;) {
    if (ep.sender) {
      // A bulk application keeps the send buffer full; a host TCP keeps at
      // most its window outstanding end to end.
      Bytes room = conn.send_buffer_free();
      if (s_.tcp_source) {
        const uint64_t outstanding = f.tx_written - f.rx_bytes;
        room = std::min<Bytes>(room, f.app_window > outstanding ? f.app_window - outstanding : 0);
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
    pipe.reserve(kBurst);
    for (uint32_t i = 0; i < kBurst; ++i)
      out_[i] = transport::OutDatagram{pipe.free_slot(i), slot_, 0, 0};
    const size_t n = conn.poll_send(std::span(out_, kBurst), now);
    size_t kept = 0;
    for (size_t i = 0; i < n; ++i) {
      TimePoint at;
      if (ep.sender) {
        if (!admit(f, out_[i].wire_len, &at)) continue;
        at += f.rtt / 2 + s_.host_offset;
        if (s_.jitter.ns() > 0) {
          at += Duration::from_ns(
              static_cast<int64_t>(uni_(rng_) * static_cast<double>(s_.jitter.ns())));
          at = std::max(at, f.fwd_last);
          f.fwd_last = at;
        }
      } else {
        at = now + (f.rtt - f.rtt / 2);
      }
      pipe.commit(i - kept, at, out_[i].len, out_[i].wire_len);
      ++kept;
    }
    if (n < kBurst) break;
  }
  if (was_empty && !pipe.empty())
    push(pipe.head_time(), kPipe, static_cast<uint32_t>(f.id), ep.sender ? 1 : 0);
  TimePoint next = conn.next_timeout();
  if (next <= now) next = now + Duration::from_us(1);  // never spin at one instant
  if (next != ep.scheduled) {
    ep.scheduled = next;
    ++ep.gen;
    if (!next.is_infinite())
      push(next + lateness(), kTimer, endpoint_index(ep), static_cast<uint32_t>(ep.gen));
  }
}

void Simulation::deliver(Flow& f, bool forward) {
  Pipe& pipe = forward ? *f.fwd : *f.rev;
  Endpoint& dst = forward ? f.rcv : f.snd;
  const TimePoint now = clock_.t;
  while (!pipe.empty() && pipe.head_time() <= now) {
    dst.conn->on_datagram(pipe.head_data(), pipe.head_len(), io::Ecn::kEct0, now,
                          s_.rx_stamps ? pipe.head_time() : TimePoint());
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
        if (s_.tcp_source) f.app_window = std::min<uint64_t>(f.app_window + n, tcp_window_max_);
        if (now >= warmup_) f.rx_after_warmup += n;
        if (now >= all_from_) f.rx_after_all += n;
      }
    }
  }
  service(dst);
  if (!pipe.empty()) push(pipe.head_time(), kPipe, static_cast<uint32_t>(f.id), forward ? 1 : 0);
}

void Simulation::sample() {
  const TimePoint now = clock_.t;
  const double secs = interval_.seconds();
  int active = 0;
  for (const Flow& f : flows_) active += f.started ? 1 : 0;
  const double fair = static_cast<double>(rate_.bps()) / std::max(active, 1);
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
                 st.cwnd, st.srtt.seconds(), qd, rate_.bps());
    }
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
  cap_mark_ = warmup_;
  auto account_capacity = [&](TimePoint upto) {
    if (upto > cap_mark_) {
      capacity_bits_ += static_cast<double>(rate_.bps()) * (upto - cap_mark_).seconds();
      cap_mark_ = upto;
    }
  };
  while (!events_.empty()) {
    const Event ev = events_.top();
    if (ev.at > end_) break;
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
        deliver(flows_[ev.idx], (ev.aux & 1U) == 1);
        break;
      case kSample:
        sample();
        push(ev.at + interval_, kSample, 0);
        break;
      case kRateStep: {
        account_capacity(clock_.t);
        const BitsPerSec next = s_.rate_steps[ev.idx].second;
        if (link_free_at_ > clock_.t) {
          const Bytes backlog = rate_.bytes_in(link_free_at_ - clock_.t);
          link_free_at_ = clock_.t + next.transfer_time(backlog);
        }
        rate_ = next;
        break;
      }
    }
  }
  account_capacity(end_);

  Result r;
  r.capacity_bps = static_cast<double>(s_.rate.bps());
  const double window = (end_ - warmup_).seconds();
  r.utilization =
      capacity_bits_ > 0 ? static_cast<double>(wire_bytes_delivered_) * 8 / capacity_bits_ : 0;
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
      if (all_window > 0) {
        const double x = static_cast<double>(f.rx_after_all) * 8 / all_window;
        sum += x;
        sum_sq += x * x;
        ++jain_n;
      }
    }
    total += f.rx_after_warmup;
    r.flows.push_back(fr);
  }
  r.goodput_bps = window > 0 ? static_cast<double>(total) * 8 / window : 0;
  r.jain_index = sum_sq > 0 ? sum * sum / (jain_n * sum_sq) : 0;
  r.retransmit_ratio = sent > 0 ? static_cast<double>(retx) / static_cast<double>(sent) : 0;
  r.queue_delay_p50_s = qdelay_.quantile(0.50) * 1e-9;
  r.queue_delay_p95_s = qdelay_.quantile(0.95) * 1e-9;
  r.queue_delay_p99_s = qdelay_.quantile(0.99) * 1e-9;
  r.tail_drops = tail_drops_;
  r.random_drops = random_drops_;
  r.packets = packets_;
  r.events = events_run_;
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  return r;
}

}  // namespace

Result run(const Scenario& s) {
  Simulation sim(s);
  return sim.run();
}

std::string to_json(const Scenario& s, const Result& r) {
  nlohmann::json j;
  j["capacity_bps"] = r.capacity_bps;
  j["utilization"] = r.utilization;
  j["goodput_bps"] = r.goodput_bps;
  j["queue_delay_p50_s"] = r.queue_delay_p50_s;
  j["queue_delay_p95_s"] = r.queue_delay_p95_s;
  j["queue_delay_p99_s"] = r.queue_delay_p99_s;
  j["jain_index"] = r.jain_index;
  j["retransmit_ratio"] = r.retransmit_ratio;
  j["cc"] = s.cc;
  j["rtt_s"] = s.rtt.seconds();
  j["loss"] = s.loss;
  j["duration_s"] = s.duration.seconds();
  j["warmup_s"] = s.warmup.seconds();
  j["jitter_s"] = s.jitter.seconds();
  j["host_delay_s"] = s.host_delay.seconds();
  j["host_offset_s"] = s.host_offset.seconds();
  j["hint_rate"] = s.hint_rate;
  j["hint_rtt"] = s.hint_rtt;
  j["window_bdp"] = s.window_bdp;
  j["rx_stamps"] = s.rx_stamps;
  j["tcp_source"] = s.tcp_source;
  j["tail_drops"] = r.tail_drops;
  j["random_drops"] = r.random_drops;
  j["packets"] = r.packets;
  j["events"] = r.events;
  j["wall_s"] = r.wall_s;
  nlohmann::json flows = nlohmann::json::array();
  for (const FlowResult& f : r.flows) {
    nlohmann::json o;
    o["id"] = f.id;
    o["start_s"] = f.start_s;
    o["goodput_bps"] = f.goodput_bps;
    o["cc"] = f.cc;
    o["rtt_s"] = f.rtt_s;
    o["retransmit_ratio"] = f.retransmit_ratio;
    o["srtt_s"] = f.srtt_s;
    o["min_rtt_s"] = f.min_rtt_s;
    o["lost_packets"] = f.lost_packets;
    o["rtos"] = f.rtos;
    o["spurious_losses"] = f.spurious;
    o["send_window_growths"] = f.send_window_growths;
    o["recv_window_growths"] = f.recv_window_growths;
    if (f.converge_s >= 0) {
      o["converge_s"] = f.converge_s;
    } else {
      o["converge_s"] = nullptr;
    }
    if (s.verify) o["verify_errors"] = f.verify_errors;
    flows.push_back(o);
  }
  j["flows"] = flows;
  return j.dump();
}

}  // namespace rowan::sim
