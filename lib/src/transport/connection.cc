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
                 !config.elide_payload),
      rate_(now) {
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
  const double growth = std::max(cfg_.window_growth, 1.0);
  send_max_ = scaled(send_capacity_, growth);
  recv_max_ = scaled(recv_window_, growth);
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

void Connection::grow_send_window() noexcept {
  send_capacity_ = std::min(send_capacity_ * 2, send_max_);
  send_pool_.grow_to(chunks_for(send_capacity_, cfg_.chunk_size) + 2 * cfg_.max_streams);
  ++stats_.send_window_growths;
}

void Connection::grow_recv_window() noexcept {
  recv_window_ = std::min(recv_window_ * 2, recv_max_);
  stream_window_ =
      std::max<Bytes>(scaled(recv_window_, cfg_.stream_window_fraction), cfg_.chunk_size);
  recv_pool_.grow_to(chunks_for(recv_window_, cfg_.chunk_size) + 2 * cfg_.max_streams);
  ++stats_.recv_window_growths;
}

void Connection::on_peer_blocked(uint64_t limit) noexcept {
  // The peer had data that this end's credit did not allow. If that was
  // credit given since the window last grew (reports sent before the
  // grown credit arrived say nothing new) and the application keeps up
  // with what is in order, the window, not the reader, is what limits the
  // flow (a window sized from a hinted BDP short of the path, or data held
  // behind holes under repair): it doubles and the new credit goes out.
  if (recv_window_ >= recv_max_ || limit < recv_grown_at_) return;
  if (stats_.stream_bytes_received - consumed_total_ >= recv_window_ / 4) return;
  grow_recv_window();
  max_data_advertised_ = consumed_total_ + recv_window_;
  max_data_pending_ = true;
  recv_grown_at_ = max_data_advertised_;
  for (const auto& sp : streams_) {
    Stream& s = *sp;
    if (s.final_size != UINT64_MAX || s.max_advertised >= s.read_offset + stream_window_) continue;
    s.max_advertised = s.read_offset + stream_window_;
    if (!s.msd_pending) {
      s.msd_pending = true;
      msd_pending_.push_back(s.slot);
    }
  }
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
  bool on_data_blocked(uint64_t) {
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
  bool on_data_blocked(uint64_t limit) {
    c.on_peer_blocked(limit);
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

const ConnStats& Connection::stats() noexcept {
  stats_.srtt = rtt_.smoothed();
  stats_.min_rtt = rtt_.min_rtt();
  stats_.rttvar = rtt_.rttvar();
  stats_.latest_rtt = rtt_.latest();
  stats_.cwnd = cc_->cwnd();
  stats_.pacing_rate = cc_->pacing_rate();
  stats_.bytes_in_flight = bytes_in_flight_;
  stats_.delivered_bytes = rate_.delivered();
  stats_.btlbw = rate_.btlbw();
  stats_.send_buffer_capacity = send_pool_.capacity_bytes();
  stats_.send_buffer_used = send_pool_.bytes_in_use();
  stats_.recv_buffer_capacity = recv_pool_.capacity_bytes();
  stats_.recv_buffer_used = recv_pool_.bytes_in_use();
  return stats_;
}

}  // namespace rowan::transport
