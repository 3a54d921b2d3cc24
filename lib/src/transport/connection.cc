#include "transport/connection.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

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

// Chunks a pool needs for a window of `window` bytes: the window plus the
// partly used chunks at both ends of each stream.
uint32_t pool_chunks(Bytes window, const TransportConfig& c) {
  return chunks_for(window, c.chunk_size) + 2 * c.max_streams;
}

// The configured BDP over all paths: their summed rate over the longest RTT
// (data striped over paths of unequal delay arrives that much apart).
Bytes configured_bdp(const TransportConfig& c) {
  if (c.paths.empty()) return std::max(c.link_rate.bytes_in(c.base_rtt), c.min_buffer);
  uint64_t bps = 0;
  Duration rtt;
  for (const PathConfig& p : c.paths) {
    bps += (p.link_rate.is_zero() ? c.link_rate : p.link_rate).bps();
    rtt = std::max(rtt, p.base_rtt.is_zero() ? c.base_rtt : p.base_rtt);
  }
  return std::max(BitsPerSec::from_bps(bps).bytes_in(rtt), c.min_buffer);
}

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

Connection::Path::Path(PathId path_id, const PathConfig& pc, size_t ring, TimePoint now)
    : id(path_id),
      cfg(pc),
      rtt(pc.base_rtt.is_zero() ? Duration::from_ms(333) : pc.base_rtt * 2),
      rate(now),
      sent_ring(ring),
      last_ack_eliciting_sent(now),
      ack_wait_from(now),
      largest_received_time(now),
      ack_return(path_id.index) {
  stats.link_rate = pc.link_rate;
  stats.base_rtt = pc.base_rtt;
}

Connection::Path& Connection::make_path(const PathConfig& pc, const Clock& clock, TimePoint now) {
  if (paths_.size() >= kMaxPaths) throw std::invalid_argument("too many paths");
  PathConfig resolved = pc;
  if (resolved.link_rate.is_zero()) resolved.link_rate = cfg_.link_rate;
  if (resolved.base_rtt.is_zero()) resolved.base_rtt = cfg_.base_rtt;
  cc::PathHints hints;
  hints.link_rate = resolved.link_rate;
  hints.base_rtt = resolved.base_rtt;
  hints.mss = cfg_.max_datagram;
  cc::ControllerPtr cc = cc::Registry::create(cfg_.cc, clock, hints, cfg_.cc_params);
  const PathId id{static_cast<uint16_t>(paths_.size())};
  paths_.push_back(std::make_unique<Path>(id, resolved, ring_size_, now));
  Path& path = *paths_.back();
  path.cc = std::move(cc);
  // With ELIDED payload a packet's bytes are its frames without stream data,
  // at most one kMinElidedBuffer.
  path.fec = std::make_unique<FecCoder>(
      cfg_.fec, (cfg_.elide_payload ? kMinElidedBuffer : cfg_.max_datagram) - overhead_);
  path.probe_interval = pto_base(path);
  ++up_paths_;
  return path;
}

PathId Connection::add_path(const PathConfig& path, const Clock& clock, TimePoint now) {
  return make_path(path, clock, now).id;
}

Connection::Connection(const TransportConfig& config, const Clock& clock, TimePoint now)
    : cfg_(config),
      bdp_(configured_bdp(config)),
      overhead_(static_cast<uint32_t>(wire::overhead(config.integrity_check))),
      mss_payload_(config.max_datagram > overhead_ + 64 ? config.max_datagram - overhead_ : 64),
      send_pool_(
          config.chunk_size,
          pool_chunks(std::max(scaled(bdp_, config.send_buffer_bdp), config.min_buffer), config),
          !config.elide_payload),
      recv_pool_(
          config.chunk_size,
          pool_chunks(std::max(scaled(bdp_, config.recv_window_bdp), config.min_buffer), config),
          !config.elide_payload) {
  if (cfg_.max_datagram < overhead_ + 64) cfg_.max_datagram = overhead_ + 64;
  if (cfg_.ack_every == 0) cfg_.ack_every = 1;
  if (cfg_.packet_threshold == 0) cfg_.packet_threshold = 1;
  if (cfg_.paths.size() > kMaxPaths) throw std::invalid_argument("too many paths");

  send_capacity_ = std::max(scaled(bdp_, cfg_.send_buffer_bdp), cfg_.min_buffer);
  recv_window_ = std::max(scaled(bdp_, cfg_.recv_window_bdp), cfg_.min_buffer);
  const double growth = std::max(cfg_.window_growth, 1.0);
  send_max_ = scaled(send_capacity_, growth);
  recv_max_ = scaled(recv_window_, growth);
  stream_window_ = stream_window_for(recv_window_);
  initial_stream_window_ = stream_window_;
  // Both ends are configured alike, so each starts with the other's window
  // as credit (a handshake that exchanges them comes with encryption).
  peer_max_data_ = recv_window_;
  max_data_advertised_ = recv_window_;

  streams_.reserve(cfg_.max_streams);
  stream_direct_.assign(cfg_.max_streams, 0);
  stream_index_.reserve(size_t{cfg_.max_streams} * 2);
  msd_pending_.reserve(cfg_.max_streams);
  new_queue_.v.resize(next_pow2(cfg_.max_streams));
  retx_queue_.v.resize(next_pow2(cfg_.max_streams));
  readable_queue_.v.resize(next_pow2(cfg_.max_streams));
  path_events_.resize(kMaxPathEvents);
  const uint64_t window_pkts = (std::max(send_capacity_, recv_window_) / mss_payload_) * 2;
  // Grows by doubling (warm-up) up to what the window needs. With several
  // paths each starts small and grows to what its own flight needs.
  ring_size_ =
      cfg_.paths.size() > 1 ? 1024 : next_pow2(std::clamp<uint64_t>(window_pkts, 1024, 65536));
  if (cfg_.paths.empty()) {
    make_path(PathConfig{}, clock, now);
  } else {
    paths_.reserve(cfg_.paths.size());
    for (const PathConfig& pc : cfg_.paths) make_path(pc, clock, now);
  }
}

Connection::~Connection() = default;

// ---------------------------------------------------------------------------
// Streams

Connection::Stream* Connection::find_stream(uint64_t id) const noexcept {
  if (id < stream_direct_.size()) {
    const uint32_t v = stream_direct_[id];
    return v == 0 ? nullptr : streams_[v - 1].get();
  }
  auto it = stream_index_.find(id);
  return it == stream_index_.end() ? nullptr : streams_[it->second].get();
}

Connection::Stream* Connection::open_stream(uint64_t id) noexcept {
  if (Stream* s = find_stream(id)) return s;
  // STREAM frames carry the id as a varint (wire.h).
  if (streams_.size() >= cfg_.max_streams || id > wire::kMaxVarint) return nullptr;
  auto s = std::make_unique<Stream>();
  s->id = id;
  s->slot = static_cast<uint32_t>(streams_.size());
  // Not stream_window_: after this end's receive window grew, a new stream
  // would get more credit here than the peer assumes it got, and no
  // MAX_STREAM_DATA until the reader passed a quarter of the grown window,
  // which a peer held at the initial window never lets it reach.
  s->peer_max = initial_stream_window_;
  s->max_advertised = initial_stream_window_;
  if (id < stream_direct_.size()) {
    stream_direct_[id] = s->slot + 1;
  } else {
    stream_index_.emplace(id, s->slot);
  }
  streams_.push_back(std::move(s));
  Stream& made = *streams_.back();
  if (stream_window_ > initial_stream_window_) {  // grown: tell the peer at once
    made.max_advertised = stream_window_;
    made.msd_pending = true;
    msd_pending_.push_back(made.slot);
  }
  return &made;
}

size_t Connection::write(uint64_t id, const uint8_t* head, size_t head_len, const uint8_t* data,
                         size_t body_len, bool fin, TimePoint now) noexcept {
  if (closed_) return 0;
  Stream* s = open_stream(id);
  if (s == nullptr || s->fin_written) return 0;
  const size_t len = head_len + body_len;
  uint64_t n = std::min<uint64_t>(len, send_capacity_ - std::min(send_capacity_, send_buffered_));
  if (n > 0) {
    const uint64_t end = s->sbuf.ensure(send_pool_, s->write_end, s->write_end + n);
    n = end - s->write_end;
    const uint64_t from_head = std::min<uint64_t>(n, head_len);
    if (from_head > 0) s->sbuf.write(send_pool_, s->write_end, head, from_head);
    if (n > from_head) s->sbuf.write(send_pool_, s->write_end + from_head, data, n - from_head);
    s->write_end += n;
    written_total_ += n;
    send_buffered_ += n;
  }
  if (n < len) {
    backlog_at_ = now;
    backlog_bytes_ = len - n;
  } else {
    backlog_bytes_ -= std::min<uint64_t>(backlog_bytes_, n);
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

size_t Connection::peek(uint64_t id, uint8_t* out, size_t len) const noexcept {
  const Stream* s = find_stream(id);
  if (s == nullptr) return 0;
  const uint64_t n = std::min<uint64_t>(len, s->contiguous_end - s->read_offset);
  s->rbuf.read(recv_pool_, s->read_offset, out, n);
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
  std::vector<cc::ControllerPtr> next;
  next.reserve(paths_.size());
  for (const auto& path : paths_) {  // every one made before any is replaced
    cc::PathHints hints;
    hints.link_rate = path->cfg.link_rate;
    hints.base_rtt = path->rtt.min_rtt().is_zero() ? path->cfg.base_rtt : path->rtt.min_rtt();
    hints.mss = cfg_.max_datagram;
    next.push_back(cc::Registry::create(algorithm, clock, hints, params));  // throws
  }
  for (size_t i = 0; i < paths_.size(); ++i) paths_[i]->cc = std::move(next[i]);
  cfg_.cc = algorithm;
  cfg_.cc_params = params;
}

Bytes Connection::stream_window_for(Bytes conn_window) const noexcept {
  return std::max<Bytes>(scaled(conn_window, cfg_.stream_window_fraction), cfg_.chunk_size);
}

void Connection::grow_send_window() noexcept {
  send_capacity_ = std::min(send_capacity_ * 2, send_max_);
  send_pool_.grow_to(pool_chunks(send_capacity_, cfg_));
  ++stats_.send_window_growths;
}

void Connection::grow_recv_window() noexcept {
  recv_window_ = std::min(recv_window_ * 2, recv_max_);
  stream_window_ = stream_window_for(recv_window_);
  recv_pool_.grow_to(pool_chunks(recv_window_, cfg_));
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
  Path& path = primary();
  if (!closed_ && path.probes_pending == 0) path.probes_pending = 1;
}

Connection::Path& Connection::primary() noexcept {
  for (const auto& path : paths_)
    if (path->state == PathState::kUp) return *path;
  return *paths_[0];
}

bool Connection::next_path_event(PathEvent* ev) noexcept {
  if (path_event_count_ == 0) return false;
  *ev = path_events_[path_event_head_];
  path_event_head_ = (path_event_head_ + 1) % kMaxPathEvents;
  --path_event_count_;
  return true;
}

void Connection::push_path_event(const Path& path, TimePoint now) {
  if (path_event_count_ == kMaxPathEvents) {  // the owner fell behind: drop the oldest
    path_event_head_ = (path_event_head_ + 1) % kMaxPathEvents;
    --path_event_count_;
    ++stats_.path_events_dropped;
  }
  path_events_[(path_event_head_ + path_event_count_) % kMaxPathEvents] =
      PathEvent{path.id, path.state, now};
  ++path_event_count_;
}

// ---------------------------------------------------------------------------
// Receive path

struct Connection::Validator {
  Connection& c;
  bool recovered = false;  // a packet rebuilt from repair symbols: no FEC frames in it
  bool ack_eliciting = false;
  bool has_source = false;
  uint8_t source_index = 0;
  uint32_t source_block = 0;
  size_t source_pos = 0;  // the FEC_SOURCE frame's offset: the symbol is the frames before it
  bool has_repair = false;
  wire::RepairFrame repair{};
  bool on_fec_source(uint32_t block, uint8_t index, size_t pos) {
    if (recovered || has_source) return false;
    has_source = true;
    source_block = block;
    source_index = index;
    source_pos = pos;
    return true;
  }
  bool on_repair(const wire::RepairFrame& r) {
    if (recovered || has_repair) return false;
    has_repair = true;
    repair = r;
    ack_eliciting = true;
    return true;
  }
  bool on_ping() {
    ack_eliciting = true;
    return true;
  }
  wire::AckFrame& ack_scratch() { return c.ack_scratch_; }
  bool on_ack(const wire::AckFrame& a) {
    if (a.path >= c.paths_.size()) {
      ++c.stats_.drop_bad_path;
      return false;
    }
    if (a.largest >= c.paths_[a.path]->next_pn) {
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
  bool skip_acks = false;  // a rebuilt packet's ACK is old news (later ACKs carry it)
  bool on_ping() { return true; }
  wire::AckFrame& ack_scratch() { return c.ack_scratch_; }
  bool on_ack(const wire::AckFrame& a) {
    if (skip_acks) return true;
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
                             TimePoint rx_time, PathId path) noexcept {
  ++stats_.packets_received;
  stats_.bytes_received += len;
  if (path.index >= paths_.size()) {
    ++stats_.drop_bad_path;
    return;
  }
  Path& arrival = *paths_[path.index];
  ++arrival.stats.packets_received;
  arrival.stats.bytes_received += len;
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
  // A CRC is checked wherever one is sent; a connection that needs it (no
  // AEAD below) takes no datagram without one.
  const bool crc = (h.flags & wire::kFlagCrc) != 0;
  if (crc ? len < wire::kMaxOverhead : cfg_.integrity_check) {
    ++stats_.drop_bad_integrity;
    return;
  }
  const size_t body = crc ? len - wire::kCrcSize : len;
  if (crc && wire::crc32c(data, body) != wire::get_u32(data + body)) {
    ++stats_.drop_bad_integrity;
    return;
  }
  if (h.path >= paths_.size()) {
    ++stats_.drop_bad_path;
    return;
  }
  Path& space = *paths_[h.path];
  const uint64_t pn = h.packet_number;
  if ((space.any_received && pn < space.recv_floor) || space.recv_pns.contains(pn)) {
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
  if (ecn == io::Ecn::kCe) ++space.ce_received;
  space.ack_return = path.index;
  record_received_pn(space, pn, v.ack_eliciting, now);
  FecCoder& fec = *space.fec;
  if (!fec.enabled()) return;  // a peer's FEC frames are harmless: nothing is kept
  if (v.has_source) {
    on_fec_status(space, fec.on_source(v.source_block, v.source_index, pn, frames, v.source_pos),
                  now);
  }
  if (v.has_repair) {
    ++stats_.fec_repair_received;
    on_fec_status(space, fec.on_repair(v.repair), now);
  }
}

void Connection::on_fec_status(Path& space, fec::Status st, TimePoint now) noexcept {
  if (st == fec::Status::kInvalid) ++stats_.fec_drop_invalid;
  if (st != fec::Status::kRecovered) return;
  for (int i = 0; i < space.fec->recovered_count(); ++i) {
    apply_recovered(space, space.fec->recovered(i), now);
  }
}

void Connection::apply_recovered(Path& space, std::span<const uint8_t> packet,
                                 TimePoint now) noexcept {
  // A rebuilt packet of `space`: its packet number, then its frames. It is
  // checked and applied as a received one would be, and acknowledged, so the
  // sender does not resend it.
  if (packet.size() < 8) {
    ++stats_.fec_drop_invalid;
    return;
  }
  const uint64_t pn = wire::get_u64(packet.data());
  if ((space.any_received && pn < space.recv_floor) || space.recv_pns.contains(pn)) {
    return;  // it came after all
  }
  const uint8_t* frames = packet.data() + 8;
  const size_t flen = packet.size() - 8;
  Validator v{*this};
  v.recovered = true;
  if (!wire::parse_frames(frames, flen, cfg_.elide_payload, v)) {
    ++stats_.fec_drop_invalid;
    return;
  }
  Applier a{*this, now};
  a.skip_acks = true;
  wire::parse_frames(frames, flen, cfg_.elide_payload, a);
  record_received_pn(space, pn, v.ack_eliciting, now);
  ++stats_.fec_recovered;
  ++space.stats.fec_recovered;
}

void Connection::record_received_pn(Path& space, uint64_t pn, bool ack_eliciting, TimePoint now) {
  bool out_of_order = false;
  if (!space.any_received || pn > space.largest_received) {
    if (space.any_received && pn != space.largest_received + 1) out_of_order = true;
    space.largest_received = pn;
    space.largest_received_time = rx_time_;
    space.any_received = true;
  } else {
    out_of_order = true;
  }
  space.recv_pns.add(pn, pn + 1);
  while (space.recv_pns.range_count() > static_cast<size_t>(wire::kMaxAckRanges)) {
    space.recv_pns.pop_front();
    space.recv_floor = space.recv_pns.front().lo;
  }
  space.ack_unsent = true;
  if (!ack_eliciting) return;
  ++space.unacked_eliciting;
  if (out_of_order || space.unacked_eliciting >= cfg_.ack_every) {
    space.ack_deadline = now;
  } else if (space.ack_deadline.is_infinite()) {
    // From the arrival: a datagram reaped late is not held a further max_ack_delay.
    space.ack_deadline = std::min(now, rx_time_) + cfg_.max_ack_delay;
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
  uint64_t lo = std::max(f.offset, s->contiguous_end);
  if (sink_ != nullptr && f.data != nullptr && lo < end && lo == s->read_offset &&
      s->contiguous_end == s->read_offset) {
    // Nothing unread is buffered: the sink may take the frame's bytes where
    // they lie, and what it takes is read.
    const uint64_t took = std::min<uint64_t>(
        sink_->on_stream_data(s->id, f.data + (lo - f.offset), end - lo), end - lo);
    if (took > 0) {
      const uint64_t before = s->contiguous_end;
      lo += took;
      s->read_offset = lo;
      s->contiguous_end = lo;
      // Data buffered out of order may now follow on (a range the sink's
      // bytes reached): the stream is readable from `lo` up to its end.
      while (!s->received.empty() && s->received.front().lo <= s->contiguous_end) {
        s->contiguous_end = std::max(s->contiguous_end, s->received.front().hi);
        s->received.pop_front();
      }
      consumed_total_ += took;
      stats_.stream_bytes_read += took;
      stats_.stream_bytes_received += s->contiguous_end - before;
      stats_.stream_bytes_read_in_place += took;
      s->rbuf.release_below(recv_pool_, s->read_offset);
      update_flow_control_credit(*s);
    }
  }
  if (lo < end) {
    if (s->rbuf.ensure(recv_pool_, lo, end) < end) {
      ++stats_.drop_no_buffer;
      return false;
    }
    s->rbuf.write(recv_pool_, lo, f.data == nullptr ? nullptr : f.data + (lo - f.offset), end - lo);
    const uint64_t before = s->contiguous_end;
    if (lo == s->contiguous_end) {
      // In order: the contiguous point moves without touching the set.
      s->contiguous_end = end;
    } else {
      s->received.add(lo, end);
    }
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
  const Path& first = primary();
  stats_.srtt = first.rtt.smoothed();
  stats_.min_rtt = first.rtt.min_rtt();
  stats_.rttvar = first.rtt.rttvar();
  stats_.latest_rtt = first.rtt.latest();
  stats_.cwnd = 0;
  stats_.bytes_in_flight = 0;
  stats_.delivered_bytes = 0;
  uint64_t pacing = 0, btlbw = 0;
  for (const auto& path : paths_) {
    stats_.delivered_bytes += path->rate.delivered();
    if (path->state != PathState::kUp) continue;
    stats_.cwnd += path->cc->cwnd();
    // Saturating: an unpaced controller reports an infinite rate.
    const uint64_t r = path->cc->pacing_rate().bps();
    pacing = UINT64_MAX - pacing < r ? UINT64_MAX : pacing + r;
    btlbw += path->rate.btlbw().bps();
    stats_.bytes_in_flight += path->bytes_in_flight;
  }
  stats_.pacing_rate = BitsPerSec::from_bps(pacing);
  stats_.btlbw = BitsPerSec::from_bps(btlbw);
  stats_.send_buffer_capacity = send_pool_.capacity_bytes();
  stats_.send_buffer_used = send_pool_.bytes_in_use();
  stats_.recv_buffer_capacity = recv_pool_.capacity_bytes();
  stats_.recv_buffer_used = recv_pool_.bytes_in_use();
  stats_.fec_unrecoverable = 0;
  for (const auto& p : paths_) stats_.fec_unrecoverable += p->fec->decoder_stats().unrecoverable;
  stats_.fec_k = static_cast<uint32_t>(paths_[0]->fec->rate().k);  // path 0's code rate
  stats_.fec_m = static_cast<uint32_t>(paths_[0]->fec->rate().m);
  return stats_;
}

const PathStats& Connection::path_stats(PathId id) noexcept {
  Path& path = *paths_[id.index];
  PathStats& st = path.stats;
  st.state = path.state;
  st.srtt = path.rtt.smoothed();
  st.min_rtt = path.rtt.min_rtt();
  st.rttvar = path.rtt.rttvar();
  st.latest_rtt = path.rtt.latest();
  st.cwnd = path.cc->cwnd();
  st.pacing_rate = path.cc->pacing_rate();
  st.btlbw = path.rate.btlbw();
  st.bytes_in_flight = path.bytes_in_flight;
  st.fec_k = static_cast<uint32_t>(path.fec->rate().k);
  st.fec_m = static_cast<uint32_t>(path.fec->rate().m);
  st.memory = sizeof(Path) + path.sent_ring.capacity() * sizeof(SentPacket) +
              path.unacked_holes.memory() + path.lost_pns.memory() + path.recv_pns.memory();
  return st;
}

}  // namespace rowan::transport
