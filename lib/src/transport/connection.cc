#include "transport/connection.h"

#include <algorithm>
#include <cmath>

#include "registry.h"

namespace rowan::transport {
namespace {

uint64_t next_pow2(uint64_t x) {
  uint64_t p = 1;
  while (p < x) p <<= 1;
  return p;
}

uint32_t chunks_for(Bytes bytes, uint32_t cs) {
  return static_cast<uint32_t>((bytes + cs - 1) / cs);
}

Bytes scaled(Bytes b, double f) { return static_cast<Bytes>(static_cast<double>(b) * f); }

}  // namespace

// ---------------------------------------------------------------------------
// Slot queue

void Connection::SlotQueue::push(uint32_t s) {
  if (size == v.size()) {
    std::vector<uint32_t> next(v.empty() ? 16 : v.size() * 2);
    for (size_t i = 0; i < size; ++i) next[i] = v[(head + i) & (v.size() - 1)];
    v.swap(next);
    head = 0;
  }
  v[(head + size) & (v.size() - 1)] = s;
  ++size;
}

uint32_t Connection::SlotQueue::pop() {
  const uint32_t s = v[head];
  head = (head + 1) & (v.size() - 1);
  --size;
  return s;
}

// ---------------------------------------------------------------------------
// Construction

Connection::Connection(const TransportConfig& config, const Clock& clock, TimePoint now)
    : cfg_(config),
      rtt_(config.base_rtt.is_zero() ? Duration::from_ms(333) : config.base_rtt * 2),
      bdp_(std::max(config.link_rate.bytes_in(config.base_rtt), config.min_buffer)),
      mss_payload_(config.max_datagram > wire::kOverhead + 64
                       ? config.max_datagram - static_cast<uint32_t>(wire::kOverhead)
                       : 64),
      send_pool_(config.chunk_size,
                 chunks_for(std::max(scaled(bdp_, config.send_buffer_bdp), config.min_buffer),
                            config.chunk_size) +
                     2 * config.max_streams,
                 !config.elide_payload),
      recv_pool_(config.chunk_size,
                 chunks_for(std::max(scaled(bdp_, config.recv_window_bdp), config.min_buffer),
                            config.chunk_size) +
                     2 * config.max_streams,
                 !config.elide_payload) {
  if (cfg_.max_datagram < wire::kOverhead + 64) cfg_.max_datagram = wire::kOverhead + 64;
  if (cfg_.ack_every == 0) cfg_.ack_every = 1;
  if (cfg_.packet_threshold == 0) cfg_.packet_threshold = 1;
  cc::PathHints hints;
  hints.link_rate = cfg_.link_rate;
  hints.base_rtt = cfg_.base_rtt;
  hints.mss = cfg_.max_datagram;
  cc_ = cc::Registry::create(cfg_.cc, clock, hints, cfg_.cc_params);

  send_capacity_ = std::max(scaled(bdp_, cfg_.send_buffer_bdp), cfg_.min_buffer);
  recv_window_ = std::max(scaled(bdp_, cfg_.recv_window_bdp), cfg_.min_buffer);
  stream_window_ =
      std::max<Bytes>(scaled(recv_window_, cfg_.stream_window_fraction), cfg_.chunk_size);
  // Both ends are configured alike, so each starts with the other's window
  // as credit (a handshake that exchanges them comes with encryption).
  peer_max_data_ = recv_window_;
  max_data_advertised_ = recv_window_;

  streams_.reserve(cfg_.max_streams);
  stream_index_.reserve(size_t{cfg_.max_streams} * 2);
  msd_pending_.reserve(cfg_.max_streams);
  new_queue_.v.resize(next_pow2(cfg_.max_streams));
  retx_queue_.v.resize(next_pow2(cfg_.max_streams));
  readable_queue_.v.resize(next_pow2(cfg_.max_streams));
  const uint64_t window_pkts = (std::max(send_capacity_, recv_window_) / mss_payload_) * 2;
  // Grows by doubling (warm-up) up to what the window needs.
  sent_.resize(next_pow2(std::clamp<uint64_t>(window_pkts, 1024, 65536)));
  delivered_time_ = now;
  first_sent_time_ = now;
  last_ack_eliciting_sent_ = now;
  largest_received_time_ = now;
}

Connection::~Connection() = default;

// ---------------------------------------------------------------------------
// Streams

Connection::Stream* Connection::find_stream(uint64_t id) const noexcept {
  auto it = stream_index_.find(id);
  return it == stream_index_.end() ? nullptr : streams_[it->second].get();
}

Connection::Stream* Connection::open_stream(uint64_t id) noexcept {
  if (Stream* s = find_stream(id)) return s;
  if (streams_.size() >= cfg_.max_streams) return nullptr;
  auto s = std::make_unique<Stream>();
  s->id = id;
  s->slot = static_cast<uint32_t>(streams_.size());
  s->peer_max = stream_window_;
  s->max_advertised = stream_window_;
  stream_index_.emplace(id, s->slot);
  streams_.push_back(std::move(s));
  return streams_.back().get();
}

size_t Connection::write(uint64_t id, const uint8_t* data, size_t len, bool fin,
                         TimePoint now) noexcept {
  (void)now;
  if (closed_) return 0;
  Stream* s = open_stream(id);
  if (s == nullptr || s->fin_written) return 0;
  uint64_t n = std::min<uint64_t>(len, send_capacity_ - std::min(send_capacity_, send_buffered_));
  if (n > 0) {
    const uint64_t end = s->sbuf.ensure(send_pool_, s->write_end, s->write_end + n);
    n = end - s->write_end;
    s->sbuf.write(send_pool_, s->write_end, data, n);
    s->write_end += n;
    send_buffered_ += n;
  }
  if (fin && n == len) s->fin_written = true;
  if ((n > 0 || s->fin_written) && !s->in_new_queue) {
    s->in_new_queue = true;
    new_queue_.push(s->slot);
  }
  return n;
}

size_t Connection::read(uint64_t id, uint8_t* out, size_t len, bool* fin, TimePoint now) noexcept {
  (void)now;
  if (fin != nullptr) *fin = false;
  Stream* s = find_stream(id);
  if (s == nullptr) return 0;
  const uint64_t n = std::min<uint64_t>(len, s->contiguous_end - s->read_offset);
  s->rbuf.read(recv_pool_, s->read_offset, out, n);
  s->read_offset += n;
  consumed_total_ += n;
  stats_.stream_bytes_read += n;
  s->rbuf.release_below(recv_pool_, s->read_offset);
  if (s->read_offset == s->final_size) {
    s->fin_read = true;
    if (fin != nullptr) *fin = true;
  }
  update_flow_control_credit(*s);
  return n;
}

uint64_t Connection::readable(uint64_t id) const noexcept {
  const Stream* s = find_stream(id);
  return s == nullptr ? 0 : s->contiguous_end - s->read_offset;
}

bool Connection::next_readable(uint64_t* id) noexcept {
  if (readable_queue_.empty()) return false;
  Stream& s = *streams_[readable_queue_.pop()];
  s.in_readable_queue = false;
  *id = s.id;
  return true;
}

Bytes Connection::stream_unacked(uint64_t id) const noexcept {
  const Stream* s = find_stream(id);
  return s == nullptr ? 0 : s->write_end - s->acked_floor;
}

void Connection::replace_cc(const std::string& algorithm, const cc::CcParams& params,
                            const Clock& clock) {
  cc::PathHints hints;
  hints.link_rate = cfg_.link_rate;
  hints.base_rtt = rtt_.min_rtt().is_zero() ? cfg_.base_rtt : rtt_.min_rtt();
  hints.mss = cfg_.max_datagram;
  cc_ = cc::Registry::create(algorithm, clock, hints, params);  // throws before replacing
  cfg_.cc = algorithm;
  cfg_.cc_params = params;
}

Bytes Connection::send_buffer_free() const noexcept {
  const Bytes by_budget = send_capacity_ - std::min(send_capacity_, send_buffered_);
  const Bytes by_pool = static_cast<Bytes>(send_pool_.available()) * send_pool_.chunk_size();
  return std::min(by_budget, by_pool);
}

// Credit moves forward once a quarter of a window has been consumed, so the
// sender always sees at least three quarters of it (holes that fill at once
// release data in bursts; a half-window threshold starved lossy long paths).
void Connection::update_flow_control_credit(Stream& s) {
  if (s.final_size == UINT64_MAX &&
      s.max_advertised - s.read_offset < stream_window_ - stream_window_ / 4) {
    s.max_advertised = s.read_offset + stream_window_;
    if (!s.msd_pending) {
      s.msd_pending = true;
      msd_pending_.push_back(s.slot);
    }
  }
  if (max_data_advertised_ - consumed_total_ < recv_window_ - recv_window_ / 4) {
    max_data_advertised_ = consumed_total_ + recv_window_;
    max_data_pending_ = true;
  }
}

void Connection::close(uint16_t code, TimePoint now) noexcept {
  (void)now;
  if (closed_) return;
  closed_ = true;
  close_pending_ = true;
  close_code_ = code;
}

void Connection::ping() noexcept {
  if (!closed_ && probes_pending_ == 0) probes_pending_ = 1;
}

// ---------------------------------------------------------------------------
// Receive path

struct Connection::Validator {
  Connection& c;
  bool ack_eliciting = false;
  bool on_ping() {
    ack_eliciting = true;
    return true;
  }
  wire::AckFrame& ack_scratch() { return c.ack_scratch_; }
  bool on_ack(const wire::AckFrame& a) {
    if (a.largest >= c.next_pn_) {
      ++c.stats_.drop_invalid_ack;
      return false;
    }
    return true;
  }
  bool on_stream(const wire::StreamFrame&) {
    ack_eliciting = true;
    return true;
  }
  bool on_max_data(uint64_t) {
    ack_eliciting = true;
    return true;
  }
  bool on_max_stream_data(uint64_t, uint64_t) {
    ack_eliciting = true;
    return true;
  }
  bool on_close(uint16_t) { return true; }
};

struct Connection::Applier {
  Connection& c;
  TimePoint now;
  bool on_ping() { return true; }
  wire::AckFrame& ack_scratch() { return c.ack_scratch_; }
  bool on_ack(const wire::AckFrame& a) {
    c.apply_ack(a, now);
    return true;
  }
  bool on_stream(const wire::StreamFrame& f) {
    c.apply_stream(f, now);
    return true;
  }
  bool on_max_data(uint64_t v) {
    c.peer_max_data_ = std::max(c.peer_max_data_, v);
    return true;
  }
  bool on_max_stream_data(uint64_t id, uint64_t v) {
    Stream* s = c.open_stream(id);
    if (s == nullptr) return true;
    if (v > s->peer_max) {
      s->peer_max = v;
      if ((s->next_new < s->write_end || (s->fin_written && !s->fin_sent)) && !s->in_new_queue) {
        s->in_new_queue = true;
        c.new_queue_.push(s->slot);
      }
    }
    return true;
  }
  bool on_close(uint16_t) {
    c.peer_closed_ = true;
    c.closed_ = true;
    return true;
  }
};

void Connection::on_datagram(const uint8_t* data, size_t len, io::Ecn ecn, TimePoint now,
                             TimePoint rx_time) noexcept {
  ++stats_.packets_received;
  stats_.bytes_received += len;
  rx_time_ = now;
  if (!rx_time.is_zero() && rx_time <= now + kRxTimeSlack && now <= rx_time + kRxTimeSlack) {
    rx_time_ = rx_time;
    ++stats_.rx_timestamped;
    if (rx_time > now) {
      ++stats_.rx_after_now;
      stats_.rx_after_now_max = std::max(stats_.rx_after_now_max, rx_time - now);
    }
  }
  if (closed_ && !close_pending_) return;
  wire::Header h;
  if (!wire::read_header(data, len, &h)) {
    ++stats_.drop_malformed;
    return;
  }
  if (h.version != wire::kVersion) {
    ++stats_.drop_bad_version;
    return;
  }
  if (h.connection_id != cfg_.connection_id) {
    ++stats_.drop_bad_connection_id;
    return;
  }
  const bool elided = (h.flags & wire::kFlagElided) != 0;
  if ((h.flags & wire::kTypeMask) != wire::kTypeData || (h.flags & wire::kFlagProtected) != 0 ||
      elided != cfg_.elide_payload) {
    ++stats_.drop_malformed;
    return;
  }
  const size_t body = len - wire::kTagSize;
  if (cfg_.integrity_check && wire::crc32c(data, body) != wire::get_u32(data + body)) {
    ++stats_.drop_bad_integrity;
    return;
  }
  const uint64_t pn = h.packet_number;
  if ((any_received_ && pn < recv_floor_) || recv_pns_.contains(pn)) {
    ++stats_.drop_duplicate;
    return;
  }
  const uint8_t* frames = data + wire::kHeaderSize;
  const size_t flen = body - wire::kHeaderSize;
  Validator v{*this};
  if (!wire::parse_frames(frames, flen, elided, v)) {
    ++stats_.drop_malformed;
    return;
  }
  Applier a{*this, now};
  wire::parse_frames(frames, flen, elided, a);
  if (ecn == io::Ecn::kCe) ++ce_received_;
  record_received_pn(pn, v.ack_eliciting, now);
}

void Connection::record_received_pn(uint64_t pn, bool ack_eliciting, TimePoint now) {
  bool out_of_order = false;
  if (!any_received_ || pn > largest_received_) {
    if (any_received_ && pn != largest_received_ + 1) out_of_order = true;
    largest_received_ = pn;
    largest_received_time_ = rx_time_;
    any_received_ = true;
  } else {
    out_of_order = true;
  }
  recv_pns_.add(pn, pn + 1);
  while (recv_pns_.range_count() > static_cast<size_t>(wire::kMaxAckRanges)) {
    recv_pns_.pop_front();
    recv_floor_ = recv_pns_.front().lo;
  }
  ack_unsent_ = true;
  if (!ack_eliciting) return;
  ++unacked_eliciting_;
  if (out_of_order || unacked_eliciting_ >= cfg_.ack_every) {
    ack_deadline_ = now;
  } else if (ack_deadline_.is_infinite()) {
    // From the arrival: a datagram reaped late is not held a further max_ack_delay.
    ack_deadline_ = std::min(now, rx_time_) + cfg_.max_ack_delay;
  }
}

bool Connection::apply_stream(const wire::StreamFrame& f, TimePoint now) noexcept {
  (void)now;
  Stream* s = open_stream(f.stream_id);
  if (s == nullptr) {
    ++stats_.drop_too_many_streams;
    return false;
  }
  const uint64_t end = f.offset + f.length;
  if (s->final_size != UINT64_MAX && (end > s->final_size || (f.fin && end != s->final_size))) {
    ++stats_.drop_malformed;
    return false;
  }
  if (f.fin && end < s->highest_received) {
    ++stats_.drop_malformed;
    return false;
  }
  if (end > s->max_advertised) {
    ++stats_.drop_flow_control;
    return false;
  }
  const uint64_t inc = end > s->highest_received ? end - s->highest_received : 0;
  if (recv_highest_total_ + inc > max_data_advertised_) {
    ++stats_.drop_flow_control;
    return false;
  }
  const uint64_t lo = std::max(f.offset, s->contiguous_end);
  if (lo < end) {
    if (s->rbuf.ensure(recv_pool_, lo, end) < end) {
      ++stats_.drop_no_buffer;
      return false;
    }
    s->rbuf.write(recv_pool_, lo, f.data == nullptr ? nullptr : f.data + (lo - f.offset), end - lo);
    s->received.add(lo, end);
    const uint64_t before = s->contiguous_end;
    while (!s->received.empty() && s->received.front().lo <= s->contiguous_end) {
      s->contiguous_end = std::max(s->contiguous_end, s->received.front().hi);
      s->received.pop_front();
    }
    stats_.stream_bytes_received += s->contiguous_end - before;
  }
  recv_highest_total_ += inc;
  s->highest_received += inc;
  if (f.fin) s->final_size = end;
  const bool has_data = s->contiguous_end > s->read_offset;
  const bool fin_ready = s->final_size == s->contiguous_end && !s->fin_read;
  if ((has_data || fin_ready) && !s->in_readable_queue) {
    s->in_readable_queue = true;
    readable_queue_.push(s->slot);
  }
  return true;
}

// ---------------------------------------------------------------------------
// ACK processing, loss detection (RFC 9002 / RFC 8985), delivery rate

void Connection::grow_sent_ring() {
  std::vector<SentPacket> next(sent_.size() * 2);
  for (uint64_t pn = first_pn_; pn < next_pn_; ++pn) next[pn & (next.size() - 1)] = sent(pn);
  sent_.swap(next);
}

Duration Connection::pto_base() const {
  return rtt_.smoothed() + std::max(rtt_.rttvar() * 4, cfg_.timer_granularity) + cfg_.max_ack_delay;
}

Duration Connection::backed_off_pto() const {
  const Duration base = pto_base();
  const Duration pto = base * (int64_t{1} << std::min<uint32_t>(pto_count_, 16));
  if (cfg_.max_pto.is_zero()) return pto;
  return std::min(pto, std::max(cfg_.max_pto, base));
}

void Connection::trim_sent(TimePoint now) {
  const Duration retire = pto_base() * 2;
  while (first_pn_ < next_pn_) {
    SentPacket& p = sent(first_pn_);
    if (p.state == PacketState::kInFlight) break;
    if (p.state == PacketState::kLost) {
      if (now - p.sent_time < retire) break;
      lost_pns_.remove_below(first_pn_ + 1);
    }
    p.state = PacketState::kUnused;
    ++first_pn_;
  }
  unacked_holes_.remove_below(first_pn_);
}

void Connection::on_packet_acked(SentPacket& p, TimePoint now) {
  (void)now;
  for (uint8_t i = 0; i < p.nframes; ++i) {
    const SentFrame& f = p.frames[i];
    Stream& s = *streams_[f.slot];
    const uint64_t lo = std::max(f.offset, s.acked_floor);
    const uint64_t hi = f.offset + f.length;
    if (lo < hi) {
      s.acked.add(lo, hi);
      s.lost.remove(lo, hi);
      const uint64_t before = s.acked_floor;
      while (!s.acked.empty() && s.acked.front().lo <= s.acked_floor) {
        s.acked_floor = std::max(s.acked_floor, s.acked.front().hi);
        s.acked.pop_front();
      }
      if (s.acked_floor > before) {
        send_buffered_ -= s.acked_floor - before;
        s.sbuf.release_below(send_pool_, s.acked_floor);
      }
    }
    if (f.fin) {
      s.fin_acked = true;
      s.fin_lost = false;
    }
  }
}

void Connection::on_packet_lost(SentPacket& p) {
  p.state = PacketState::kLost;
  bytes_in_flight_ -= p.bytes;
  --ack_eliciting_in_flight_;
  ++stats_.lost_packets;
  stats_.lost_bytes += p.bytes;
  lost_pns_.add(p.pn, p.pn + 1);
  for (uint8_t i = 0; i < p.nframes; ++i) {
    const SentFrame& f = p.frames[i];
    Stream& s = *streams_[f.slot];
    const uint64_t lo = std::max(f.offset, s.acked_floor);
    const uint64_t hi = f.offset + f.length;
    if (lo < hi) s.lost.add(lo, hi);
    if (f.fin && !s.fin_acked) s.fin_lost = true;
    queue_retx(s);
  }
  if (p.has_max_data) max_data_pending_ = true;
  if (p.msd_slot != kNoChunk) {
    Stream& s = *streams_[p.msd_slot];
    if (!s.msd_pending) {
      s.msd_pending = true;
      msd_pending_.push_back(s.slot);
    }
  }
}

void Connection::queue_retx(Stream& s) {
  if ((!s.lost.empty() || s.fin_lost) && !s.in_retx_queue) {
    s.in_retx_queue = true;
    retx_queue_.push(s.slot);
  }
}

void Connection::apply_ack(const wire::AckFrame& a, TimePoint now) noexcept {
  ++stats_.acks_received;
  const Bytes prior_in_flight = bytes_in_flight_;
  const bool had_acked = any_acked_;
  const uint64_t prev_largest = largest_acked_;
  Bytes acked_bytes = 0;
  uint32_t acked_packets = 0;
  bool spurious = false;
  bool largest_newly_acked = false;
  TimePoint largest_sent_time;
  // Rate sample of this ACK (tcp_rate.c): values of the newest-sent acked packet.
  bool have_rs = false;
  uint64_t rs_prior_delivered = 0;
  TimePoint rs_prior_time;
  Duration rs_send_elapsed;
  bool rs_app_limited = false;

  auto process = [&](uint64_t pn) {
    SentPacket& p = sent(pn);
    if (p.state != PacketState::kInFlight && p.state != PacketState::kLost) return;
    if (p.state == PacketState::kInFlight) {
      bytes_in_flight_ -= p.bytes;
      --ack_eliciting_in_flight_;
    } else {
      ++stats_.spurious_losses;
      spurious = true;
    }
    p.state = PacketState::kAcked;
    acked_bytes += p.bytes;
    ++acked_packets;
    delivered_ += p.bytes;
    delivered_time_ = now;
    if (!have_rs || p.delivered >= rs_prior_delivered) {
      have_rs = true;
      rs_prior_delivered = p.delivered;
      rs_prior_time = p.delivered_time;
      rs_app_limited = p.is_app_limited;
      rs_send_elapsed = p.sent_time - p.first_sent_time;
      first_sent_time_ = p.sent_time;
    }
    if (pn == a.largest) {
      largest_newly_acked = true;
      largest_sent_time = p.sent_time;
    }
    on_packet_acked(p, now);
  };

  // Walk ranges from the lowest so the rate sample ends on the newest packet.
  for (int r = a.range_count - 1; r >= 0; --r) {
    const uint64_t lo = std::max(a.ranges[r].lo, first_pn_);
    const uint64_t hi = a.ranges[r].hi;
    if (lo > hi) continue;
    if (had_acked && lo <= prev_largest) {
      const uint64_t old_hi = std::min(hi, prev_largest);
      // Only holes and lost packets can be newly acked below the previous
      // largest; most ACK ranges repeat what is already known and cost a
      // binary search each.
      for (IntervalSet* set : {&unacked_holes_, &lost_pns_}) {
        const auto& rs = set->ranges();
        const size_t first = set->first_at_or_after(lo);
        if (first == rs.size() || rs[first].lo > old_hi) continue;
        for (size_t i = first; i < rs.size() && rs[i].lo <= old_hi; ++i) {
          const uint64_t end = std::min(rs[i].hi, old_hi + 1);
          for (uint64_t pn = std::max(rs[i].lo, lo); pn < end; ++pn) process(pn);
        }
        set->remove(lo, old_hi + 1);
      }
    }
    const uint64_t new_lo = had_acked ? std::max(lo, prev_largest + 1) : lo;
    for (uint64_t pn = new_lo; pn <= hi; ++pn) process(pn);
  }

  if (!had_acked || a.largest > prev_largest) {
    // Packets between the previous largest and this one that this ACK did not
    // cover become holes: candidates for loss detection.
    uint64_t cursor = had_acked ? prev_largest + 1 : first_pn_;
    for (int r = a.range_count - 1; r >= 0; --r) {
      if (a.ranges[r].hi < cursor) continue;
      if (a.ranges[r].lo > cursor) unacked_holes_.add(cursor, a.ranges[r].lo);
      cursor = a.ranges[r].hi + 1;
    }
    largest_acked_ = a.largest;
    any_acked_ = true;
  }

  Duration rtt_sample;
  // The peer's own measure of how long it held the ACK, not capped at
  // max_ack_delay (RFC 9002 caps it against a peer that lies; our peer is
  // the other gateway, authenticated): a receiver whose ACK timer fires late
  // (a busy or sleeping event loop; on the testbed 40 % of gateway B's ACK
  // turnarounds were above the 1 ms max_ack_delay, p99 3 ms) would otherwise
  // add its lateness to the sample, which a delay-based controller reads as
  // queue. RFC 9002's guard stays: the delay is removed only while the
  // sample stays above min RTT + delay. (Removing it always was tried: it
  // moved 40 rowan flows at 1 Gbit/s x 10 ms in rowan-sim from Jain 0.98 to
  // 0.42, see docs/cc-rowan.md.)
  const Duration ack_delay = Duration::from_us(a.ack_delay_us);
  if (largest_newly_acked) {
    // From the datagram's arrival, not from when this loop read its clock.
    const Duration latest = rx_time_ - largest_sent_time;
    rtt_.on_sample(latest, ack_delay, now);
    rtt_sample = latest >= rtt_.min_rtt() + ack_delay ? latest - ack_delay : latest;
    stats_.rtt_histogram.observe(rtt_sample);
    stats_.queue_delay_histogram.observe(rtt_sample - rtt_.min_rtt());
  }

  uint32_t new_ce = 0;
  if (a.ce_count > peer_ce_count_) {
    new_ce = static_cast<uint32_t>(std::min<uint64_t>(a.ce_count - peer_ce_count_, UINT32_MAX));
    peer_ce_count_ = a.ce_count;
  }

  Bytes lost_bytes = 0;
  uint32_t lost_packets = 0;
  detect_losses(now, &lost_bytes, &lost_packets);
  if (acked_packets > 0) pto_count_ = 0;

  cc::AckEvent ev;
  ev.now = now;
  ev.rtt = rtt_sample;
  ev.min_rtt = rtt_.min_rtt();
  ev.ack_delay = Duration::from_us(a.ack_delay_us);
  ev.acked_bytes = acked_bytes;
  ev.acked_packets = acked_packets;
  ev.lost_bytes = lost_bytes;
  ev.lost_packets = lost_packets;
  ev.prior_in_flight = prior_in_flight;
  ev.in_flight = bytes_in_flight_;
  ev.ce_count = new_ce;
  if (have_rs) {
    if (rs_prior_delivered >= next_round_delivered_) {
      next_round_delivered_ = delivered_;
      ++round_count_;
      ev.round_start = true;
    }
    ev.largest_acked_sent_time = first_sent_time_;
    ev.rate.delivered = delivered_ - rs_prior_delivered;
    ev.rate.prior_delivered = rs_prior_delivered;
    ev.rate.is_app_limited = rs_app_limited;
    const Duration ack_elapsed = delivered_time_ - rs_prior_time;
    const Duration interval = std::max(rs_send_elapsed, ack_elapsed);
    // tcp_rate.c: an interval below min_rtt is a compressed ACK, not a sample.
    if (interval >= rtt_.min_rtt() && interval.ns() > 0) ev.rate.interval = interval;
    if (ev.rate.valid()) {
      // Bottleneck bandwidth for telemetry: BBR's windowed max, simplified to
      // one slot that a newer sample replaces once it is 10 rounds old.
      const BitsPerSec r = ev.rate.rate();
      const bool expired = round_count_ > btlbw_round_ + 10;
      if (r >= stats_.btlbw || (expired && !ev.rate.is_app_limited)) {
        stats_.btlbw = r;
        btlbw_round_ = round_count_;
      }
    }
  }
  ev.round_count = round_count_;
  if (app_limited_until_ > 0 && delivered_ > app_limited_until_) app_limited_until_ = 0;
  stats_.delivered_bytes = delivered_;
  if (acked_packets > 0 || lost_packets > 0 || new_ce > 0) cc_->on_ack(ev);
  if (spurious) cc_->on_spurious_loss(now);
  trim_sent(now);
}

void Connection::detect_losses(TimePoint now, Bytes* lost_bytes, uint32_t* lost_packets) {
  loss_time_ = TimePoint::infinite();
  if (!any_acked_ || unacked_holes_.empty()) return;
  const Duration base = std::max(rtt_.latest(), rtt_.smoothed());
  const Duration loss_delay = std::max(base + base / 8, cfg_.timer_granularity);
  const TimePoint lost_send_time = now - loss_delay;
  uint64_t stop = unacked_holes_.back().hi;
  bool stopped = false;
  const auto& rs = unacked_holes_.ranges();
  for (size_t i = 0; i < rs.size() && !stopped; ++i) {
    for (uint64_t pn = std::max(rs[i].lo, first_pn_); pn < rs[i].hi; ++pn) {
      SentPacket& p = sent(pn);
      if (p.state != PacketState::kInFlight) continue;
      if (p.sent_time <= lost_send_time || largest_acked_ >= pn + cfg_.packet_threshold) {
        *lost_bytes += p.bytes;
        ++*lost_packets;
        if (p.sent_time > loss_event_start_) {  // sent after the last event began: a new one
          ++stats_.loss_events;
          loss_event_start_ = now;
        }
        on_packet_lost(p);
        continue;
      }
      loss_time_ = p.sent_time + loss_delay;
      stop = pn;
      stopped = true;
      break;
    }
  }
  unacked_holes_.remove_below(stop);
}

void Connection::on_pto(TimePoint now) {
  ++pto_count_;
  if (pto_count_ > cfg_.ptos_before_rto) {
    on_rto(now);
    return;
  }
  ++stats_.ptos;
  probes_pending_ = 1;
  if (has_stream_data()) return;  // the probe carries new or already-lost data
  // Tail-loss probe: resend the data of the newest packet still in flight.
  for (uint64_t pn = next_pn_; pn > first_pn_; --pn) {
    SentPacket& p = sent(pn - 1);
    if (p.state != PacketState::kInFlight) continue;
    for (uint8_t i = 0; i < p.nframes; ++i) {
      const SentFrame& f = p.frames[i];
      Stream& s = *streams_[f.slot];
      const uint64_t lo = std::max(f.offset, s.acked_floor);
      if (lo < f.offset + f.length) s.lost.add(lo, f.offset + f.length);
      if (f.fin && !s.fin_acked) s.fin_lost = true;
      queue_retx(s);
    }
    break;
  }
}

void Connection::on_rto(TimePoint now) {
  ++stats_.rtos;
  for (uint64_t pn = first_pn_; pn < next_pn_; ++pn) {
    SentPacket& p = sent(pn);
    if (p.state == PacketState::kInFlight) on_packet_lost(p);
  }
  unacked_holes_.clear();
  loss_time_ = TimePoint::infinite();
  cc_->on_rto(now);
  probes_pending_ = 1;
}

void Connection::on_timeout(TimePoint now) noexcept {
  if (closed_) return;
  if (loss_time_ <= now) {
    Bytes lost_bytes = 0;
    uint32_t lost_packets = 0;
    detect_losses(now, &lost_bytes, &lost_packets);
    if (lost_packets > 0) {
      cc::AckEvent ev;
      ev.now = now;
      ev.min_rtt = rtt_.min_rtt();
      ev.lost_bytes = lost_bytes;
      ev.lost_packets = lost_packets;
      ev.prior_in_flight = bytes_in_flight_ + lost_bytes;
      ev.in_flight = bytes_in_flight_;
      ev.round_count = round_count_;
      cc_->on_ack(ev);
    }
    return;
  }
  if (ack_eliciting_in_flight_ > 0 && probes_pending_ == 0) {
    if (last_ack_eliciting_sent_ + backed_off_pto() <= now) on_pto(now);
  }
}

TimePoint Connection::next_timeout() const noexcept {
  if (closed_ && !close_pending_) return TimePoint::infinite();
  if (probes_pending_ > 0 || close_pending_) return TimePoint::zero();
  TimePoint t = TimePoint::infinite();
  if (unacked_eliciting_ > 0) t = std::min(t, ack_deadline_);
  t = std::min(t, loss_time_);
  if (ack_eliciting_in_flight_ > 0) {
    t = std::min(t, last_ack_eliciting_sent_ + backed_off_pto());
  }
  const bool control = max_data_pending_ || !msd_pending_.empty();
  if ((has_stream_data() || control) &&
      (bytes_in_flight_ == 0 || bytes_in_flight_ + cfg_.max_datagram <= cc_->cwnd())) {
    t = std::min(t, pacer_.release_time());
  }
  return t;
}

// ---------------------------------------------------------------------------
// Send path

bool Connection::has_stream_data() const noexcept {
  return !retx_queue_.empty() || (!new_queue_.empty() && sent_new_total_ < peer_max_data_);
}

bool Connection::ack_due(TimePoint now) const noexcept {
  return unacked_eliciting_ > 0 && ack_deadline_ <= now;
}

void Connection::fill_ack_frame(wire::AckFrame& a, TimePoint now) const {
  const auto& rs = recv_pns_.ranges();
  a.largest = largest_received_;
  const int64_t delay_us = (now - largest_received_time_).us();
  a.ack_delay_us = static_cast<uint32_t>(std::clamp<int64_t>(delay_us, 0, UINT32_MAX));
  a.ce_count = ce_received_;
  a.range_count = 0;
  for (size_t i = rs.size(); i > 0 && a.range_count < wire::kMaxAckRanges; --i) {
    const wire::PnRange r{rs[i - 1].lo, rs[i - 1].hi - 1};
    if (a.range_count > 0) {
      const uint64_t gap = a.ranges[a.range_count - 1].lo - r.hi - 2;
      if (gap > UINT32_MAX || r.hi - r.lo > UINT32_MAX) break;
    }
    a.ranges[a.range_count++] = r;
  }
}

bool Connection::write_stream_frame(wire::FrameWriter& w, SentPacket& p, size_t budget, bool* retx,
                                    Bytes* payload_bytes) {
  if (budget <= wire::kStreamFrameOverhead) return false;
  const uint64_t room =
      std::min<uint64_t>(budget - wire::kStreamFrameOverhead, wire::kMaxStreamFrameData);
  // Retransmissions first.
  while (!retx_queue_.empty()) {
    Stream& s = *streams_[retx_queue_.v[retx_queue_.head]];
    uint64_t lo = 0, len = 0;
    bool found = false;
    while (!s.lost.empty()) {
      const IntervalSet::Range r = s.lost.front();
      if (r.hi <= s.acked_floor) {
        s.lost.pop_front();
        continue;
      }
      lo = std::max(r.lo, s.acked_floor);
      // Skip a prefix the peer already acked.
      const size_t ai = s.acked.first_at_or_after(lo);
      const auto& ar = s.acked.ranges();
      if (ai < ar.size() && ar[ai].lo <= lo) {
        s.lost.remove(r.lo, std::min(ar[ai].hi, r.hi));
        continue;
      }
      uint64_t hi = r.hi;
      if (ai < ar.size()) hi = std::min(hi, ar[ai].lo);
      len = std::min(hi - lo, room);
      found = true;
      break;
    }
    bool fin = false;
    if (!found) {
      if (!s.fin_lost || s.fin_acked) {
        s.fin_lost = false;
        s.in_retx_queue = false;
        retx_queue_.pop();
        continue;
      }
      lo = s.write_end;  // FIN alone
      len = 0;
    }
    fin = s.fin_written && lo + len == s.write_end;
    uint8_t* dst = w.stream_header(s.id, lo, static_cast<uint16_t>(len), fin);
    if (!cfg_.elide_payload) {
      s.sbuf.read(send_pool_, lo, dst, len);
      w.commit_stream_data(len);
    }
    if (len > 0) s.lost.remove(lo, lo + len);
    if (fin) s.fin_lost = false;
    p.frames[p.nframes++] = SentFrame{s.slot, static_cast<uint32_t>(len), lo, fin};
    stats_.retransmitted_bytes += len;
    *payload_bytes += cfg_.elide_payload ? len : 0;
    *retx = true;
    if (s.lost.empty() && !s.fin_lost) {
      s.in_retx_queue = false;
      retx_queue_.pop();
    }
    return true;
  }
  // New data, round-robin over streams.
  while (!new_queue_.empty() && sent_new_total_ <= peer_max_data_) {
    const uint32_t slot = new_queue_.pop();
    Stream& s = *streams_[slot];
    const uint64_t limit = std::min(s.write_end, s.peer_max);
    const uint64_t conn_credit = peer_max_data_ - sent_new_total_;
    const uint64_t len = std::min({limit > s.next_new ? limit - s.next_new : 0, conn_credit, room});
    const bool fin = s.fin_written && s.next_new + len == s.write_end && !s.fin_sent;
    if (len == 0 && !fin) {
      s.in_new_queue = false;
      if (conn_credit == 0 && s.next_new < s.write_end) {  // connection-blocked: keep it queued
        s.in_new_queue = true;
        new_queue_.push(slot);
        return false;
      }
      continue;
    }
    const uint64_t lo = s.next_new;
    uint8_t* dst = w.stream_header(s.id, lo, static_cast<uint16_t>(len), fin);
    if (!cfg_.elide_payload) {
      s.sbuf.read(send_pool_, lo, dst, len);
      w.commit_stream_data(len);
    }
    s.next_new += len;
    sent_new_total_ += len;
    stats_.stream_bytes_sent += len;
    if (fin) s.fin_sent = true;
    p.frames[p.nframes++] = SentFrame{slot, static_cast<uint32_t>(len), lo, fin};
    *payload_bytes += cfg_.elide_payload ? len : 0;
    const bool more =
        s.next_new < std::min(s.write_end, s.peer_max) || (s.fin_written && !s.fin_sent);
    if (more) {
      new_queue_.push(slot);
    } else {
      s.in_new_queue = false;
    }
    return true;
  }
  return false;
}

size_t Connection::build_packet(OutDatagram& out, TimePoint now, bool allow_data, bool probe) {
  // With ELIDED payload the buffer holds only headers and frames (≤ 512
  // bytes); the datagram's wire size is still bounded by max_datagram.
  const size_t cap =
      cfg_.elide_payload ? cfg_.max_datagram : std::min<size_t>(out.capacity, cfg_.max_datagram);
  if (out.capacity <
      (cfg_.elide_payload ? kMinElidedBuffer : wire::kOverhead + wire::ack_frame_size(1)))
    return 0;
  if (next_pn_ - first_pn_ >= sent_.size()) grow_sent_ring();
  const uint64_t pn = next_pn_;
  SentPacket& sp = sent(pn);
  sp = SentPacket{};
  wire::FrameWriter w(out.data + wire::kHeaderSize, cap - wire::kOverhead);
  bool eliciting = false;
  bool retx = false;
  Bytes elided = 0;

  if (ack_unsent_) {
    wire::AckFrame& a = ack_scratch_;
    fill_ack_frame(a, now);
    if (w.room() >= wire::ack_frame_size(a.range_count)) {
      w.ack(a);
      ack_unsent_ = false;
      unacked_eliciting_ = 0;
      ack_deadline_ = TimePoint::infinite();
      ++stats_.acks_sent;
    }
  }
  if (close_pending_ && w.room() >= wire::kCloseFrameSize) {
    w.close(close_code_);
    close_pending_ = false;
  }
  if ((allow_data || probe) && !closed_) {
    if (max_data_pending_ && w.room() >= wire::kMaxDataFrameSize) {
      w.max_data(max_data_advertised_);
      max_data_pending_ = false;
      sp.has_max_data = true;
      eliciting = true;
    }
    if (!msd_pending_.empty() && w.room() >= wire::kMaxStreamDataFrameSize) {
      Stream& s = *streams_[msd_pending_.back()];
      msd_pending_.pop_back();
      s.msd_pending = false;
      w.max_stream_data(s.id, s.max_advertised);
      sp.msd_slot = s.slot;
      eliciting = true;
    }
    while (sp.nframes < kMaxFramesPerPacket) {
      // Elided payload still counts toward the datagram's size on the wire.
      const size_t used = w.size() + elided;
      const size_t budget = cap - wire::kOverhead > used ? cap - wire::kOverhead - used : 0;
      if (!write_stream_frame(w, sp, budget, &retx, &elided)) break;
      eliciting = true;
    }
    if (probe && !eliciting && w.room() >= 1) {
      w.ping();
      eliciting = true;
    }
  }
  if (w.size() == 0) return 0;

  wire::Header h;
  h.flags = wire::kTypeData | (cfg_.elide_payload ? wire::kFlagElided : 0);
  h.connection_id = cfg_.connection_id;
  h.packet_number = pn;
  wire::write_header(out.data, h);
  const size_t body = wire::kHeaderSize + w.size();
  std::memset(out.data + body, 0, wire::kTagSize);
  if (cfg_.integrity_check) wire::put_u32(out.data + body, wire::crc32c(out.data, body));
  out.len = static_cast<uint32_t>(body + wire::kTagSize);
  out.wire_len = static_cast<uint32_t>(out.len + elided);

  ++next_pn_;
  sp.pn = pn;
  sp.sent_time = now;
  sp.bytes = out.wire_len;
  ++stats_.packets_sent;
  stats_.bytes_sent += out.wire_len;
  if (!eliciting) {
    sp.state = PacketState::kNotInFlight;
    return out.len;
  }
  sp.state = PacketState::kInFlight;
  if (bytes_in_flight_ == 0) {
    first_sent_time_ = now;
    delivered_time_ = now;
  }
  sp.delivered = delivered_;
  sp.delivered_time = delivered_time_;
  sp.first_sent_time = first_sent_time_;
  sp.is_app_limited = app_limited_until_ > 0;
  bytes_in_flight_ += out.wire_len;
  ++ack_eliciting_in_flight_;
  last_ack_eliciting_sent_ = now;
  idle_reported_ = false;
  if (retx) ++stats_.retransmitted_packets;
  cc::SentEvent ev;
  ev.now = now;
  ev.packet_number = pn;
  ev.bytes = out.wire_len;
  ev.in_flight = bytes_in_flight_;
  ev.is_retransmission = retx;
  ev.app_limited = sp.is_app_limited;
  cc_->on_packet_sent(ev);
  pacer_.on_sent(now, out.wire_len, cc_->pacing_rate(), cc_->send_quantum(), cfg_.max_datagram);
  return out.len;
}

size_t Connection::poll_send(std::span<OutDatagram> out, TimePoint now) noexcept {
  size_t n = 0;
  bool cwnd_ok = true;
  while (n < out.size()) {
    if (closed_ && !close_pending_) break;
    const bool probe = probes_pending_ > 0;
    const bool data = has_stream_data() || max_data_pending_ || !msd_pending_.empty();
    cwnd_ok = bytes_in_flight_ == 0 || bytes_in_flight_ + cfg_.max_datagram <= cc_->cwnd();
    const bool allow = data && cwnd_ok && pacer_.ready(now);
    if (!allow && !probe && !ack_due(now) && !close_pending_) break;
    if (build_packet(out[n], now, allow, probe) == 0) break;
    if (probe) --probes_pending_;
    ++n;
  }
  if (!has_stream_data() && cwnd_ok) {
    // Nothing to send below cwnd: rate samples until this data is acked are
    // app-limited (tcp_rate_check_app_limited).
    app_limited_until_ = std::max<uint64_t>(delivered_ + bytes_in_flight_, 1);
    if (bytes_in_flight_ == 0 && !idle_reported_) {
      idle_reported_ = true;
      cc_->on_idle(now);
    }
  }
  return n;
}

const ConnStats& Connection::stats() noexcept {
  stats_.srtt = rtt_.smoothed();
  stats_.min_rtt = rtt_.min_rtt();
  stats_.rttvar = rtt_.rttvar();
  stats_.latest_rtt = rtt_.latest();
  stats_.cwnd = cc_->cwnd();
  stats_.pacing_rate = cc_->pacing_rate();
  stats_.bytes_in_flight = bytes_in_flight_;
  stats_.delivered_bytes = delivered_;
  stats_.send_buffer_capacity = send_pool_.capacity_bytes();
  stats_.send_buffer_used = send_pool_.bytes_in_use();
  stats_.recv_buffer_capacity = recv_pool_.capacity_bytes();
  stats_.recv_buffer_used = recv_pool_.bytes_in_use();
  return stats_;
}

}  // namespace rowan::transport
