#include "transport/connection.h"

#include <algorithm>
#include <cstring>

namespace rowan::transport {

// The send path: packet building, ACK frames, stream frames, poll_send.

bool Connection::has_stream_data() const noexcept {
  return !retx_queue_.empty() || (!new_queue_.empty() && sent_new_total_ < peer_max_data_);
}

bool Connection::has_control_data() const noexcept {
  return max_data_pending_ || data_blocked_pending_ || !msd_pending_.empty();
}

bool Connection::ack_due(const Path& space, TimePoint now) const noexcept {
  return space.unacked_eliciting > 0 && space.ack_deadline <= now;
}

void Connection::fill_ack_frame(const Path& space, wire::AckFrame& a, TimePoint now) const {
  const auto& rs = space.recv_pns.ranges();
  a.path = static_cast<uint8_t>(space.id.index);
  a.largest = space.largest_received;
  const int64_t delay_us = (now - space.largest_received_time).us();
  a.ack_delay_us = static_cast<uint32_t>(std::clamp<int64_t>(delay_us, 0, UINT32_MAX));
  a.ce_count = space.ce_received;
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

void Connection::place_stream_data(const Stream& s, uint64_t lo, uint8_t* dst, uint64_t len,
                                   OutDatagram* pieces) {
  if (pieces != nullptr && len > 0) {
    std::array<ChunkRing::Run, 2> runs;
    const size_t room = io::kMaxTxPieces - pieces->npieces;
    const size_t n = s.sbuf.runs(send_pool_, lo, len, runs.data(), std::min(room, runs.size()));
    auto off = static_cast<uint32_t>(dst - pieces->data);
    for (size_t i = 0; i < n; ++i) {
      pieces->pieces[pieces->npieces++] = io::TxPiece{runs[i].data, off, runs[i].len};
      off += runs[i].len;
    }
    if (n > 0) return;
  }
  s.sbuf.read(send_pool_, lo, dst, len);
}

bool Connection::write_stream_frame(wire::FrameWriter& w, SentPacket& p, size_t budget,
                                    OutDatagram* pieces, bool* retx, Bytes* payload_bytes) {
  // The frame's header grows with its stream id and offset (varints), so
  // the data that fits is known once the offset is; below the largest
  // header's room the packet is done, so every frame fits at least a byte.
  if (budget <= wire::kMaxStreamFrameOverhead) return false;
  auto room_at = [budget](uint64_t id, uint64_t off) -> uint64_t {
    return std::min<uint64_t>(budget - wire::stream_frame_overhead(id, off),
                              wire::kMaxStreamFrameData);
  };
  // Retransmissions first.
  while (!retx_queue_.empty()) {
    Stream& s = *streams_[retx_queue_.v[retx_queue_.head]];
    uint64_t lo = 0, len = 0;
    bool found = false;
    while (!s.lost.empty()) {
      const RangeSet::Range r = s.lost.front();
      if (r.hi <= s.acked_floor) {
        s.lost.pop_front();
        continue;
      }
      lo = std::max(r.lo, s.acked_floor);
      // Skip a prefix the peer already acked.
      RangeSet::Range a{};
      const bool any = s.acked.first_at_or_after(lo, &a);
      if (any && a.lo <= lo) {
        s.lost.remove(r.lo, std::min(a.hi, r.hi));
        continue;
      }
      uint64_t hi = r.hi;
      if (any) hi = std::min(hi, a.lo);
      len = std::min(hi - lo, room_at(s.id, lo));
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
      place_stream_data(s, lo, dst, len, pieces);
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
    const uint64_t len = std::min(
        {limit > s.next_new ? limit - s.next_new : 0, conn_credit, room_at(s.id, s.next_new)});
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
      place_stream_data(s, lo, dst, len, pieces);
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

size_t Connection::build_packet(OutDatagram& out, Path& path, TimePoint now, bool allow_data,
                                bool probe) {
  // With ELIDED payload the buffer holds only headers and frames (≤ 512
  // bytes); the datagram's wire size is still bounded by max_datagram.
  const size_t cap =
      cfg_.elide_payload ? cfg_.max_datagram : std::min<size_t>(out.capacity, cfg_.max_datagram);
  if (out.capacity < (cfg_.elide_payload ? kMinElidedBuffer : overhead_ + wire::ack_frame_size(1)))
    return 0;
  if (path.next_pn - path.first_pn >= path.sent_ring.size()) grow_sent_ring(path);
  const uint64_t pn = path.next_pn;
  SentPacket& sp = path.sent(pn);
  sp = SentPacket{};
  // A FEC source packet leaves room for its FEC_SOURCE frame and for what a
  // repair symbol carries beyond its frames, so that symbol fits a datagram.
  FecCoder& fec = *path.fec;
  // Bulk transfer is not coded. While the application holds more than the
  // send buffer took (a short write within the last SRTT whose rest it has
  // not written since), a packet lost now is retransmitted while the data
  // behind it is still being sent: its repair would make nothing complete
  // sooner and would displace a packet of goodput for every k/m sources
  // (FlEC's bulk mode, Michel et al. 2022). What is written once the
  // application is through, its last send buffer's worth, is coded: the
  // tail whose losses delay completion. A block open when bulk begins gets
  // its repair now.
  const bool bulk = backlog_bytes_ > 0 && now - backlog_at_ < path.rtt.smoothed();
  if (bulk && fec.coding() && !fec.repair_due()) fec.flush();
  const bool coding = !bulk && fec.coding() && !fec.repair_due() && (allow_data || probe) &&
                      !closed_ && path.state == PathState::kUp;
  const size_t frame_room = cap - overhead_ - (coding ? kFecRepairExtra : 0);
  // Stream bytes stay in the send buffer as the datagram's pieces unless
  // the CRC reads the whole datagram here (the FEC coder takes its symbol
  // from the buffer and the pieces).
  out.npieces = 0;
  OutDatagram* const pieces =
      out.pieces_ok && !cfg_.integrity_check && !cfg_.elide_payload ? &out : nullptr;
  wire::FrameWriter w(out.data + wire::kHeaderSize, frame_room + (coding ? kFecSourceReserve : 0));
  bool eliciting = false;
  bool retx = false;
  Bytes elided = 0;
  const bool up = path.state == PathState::kUp;
  // A keepalive of an idle up path (path_keepalive) is a bare PING, like a
  // down path's probe: outside the path's flight and its controller.
  const bool keepalive =
      probe && !allow_data && up && path.keepalive_pending && path.probes_pending == 0;

  // ACKs of the spaces whose packets arrive on this path. With ELIDED
  // payload the buffer, not the datagram, bounds them: leave room for the
  // other frames (MAX_DATA, MAX_STREAM_DATA, CLOSE, 4 STREAM headers).
  constexpr size_t kOtherFrames = wire::kMaxDataFrameSize + wire::kMaxStreamDataFrameSize +
                                  wire::kCloseFrameSize +
                                  kMaxFramesPerPacket * wire::kMaxStreamFrameOverhead;
  static_assert(kMinElidedBuffer - wire::kMaxOverhead - kOtherFrames >=
                wire::ack_frame_size(wire::kMaxAckRanges, 1));
  const size_t ack_room = cfg_.elide_payload ? out.capacity - overhead_ - kOtherFrames : w.room();
  for (const auto& sp_ptr : paths_) {
    Path& space = *sp_ptr;
    if (!space.ack_unsent || space.ack_return != path.id.index) continue;
    wire::AckFrame& a = ack_scratch_;
    fill_ack_frame(space, a, now);
    const size_t size = wire::ack_frame_size(a.range_count, a.path);
    if (w.room() < size || w.size() + size > ack_room) continue;
    w.ack(a);
    space.ack_unsent = false;
    space.unacked_eliciting = 0;
    space.ack_deadline = TimePoint::infinite();
    ++stats_.acks_sent;
  }
  if (close_pending_ && w.room() >= wire::kCloseFrameSize) {
    w.close(close_code_);
    close_pending_ = false;
  }
  if ((allow_data || (probe && !keepalive)) && !closed_ && up) {
    if (max_data_pending_ && w.room() >= wire::kMaxDataFrameSize) {
      w.max_data(max_data_advertised_);
      max_data_pending_ = false;
      sp.has_max_data = true;
      eliciting = true;
    }
    if (data_blocked_pending_ && w.room() >= wire::kDataBlockedFrameSize) {
      w.data_blocked(peer_max_data_);
      data_blocked_pending_ = false;
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
      const size_t budget = frame_room > used ? frame_room - used : 0;
      if (!write_stream_frame(w, sp, budget, pieces, &retx, &elided)) break;
      eliciting = true;
    }
  }
  if (probe && !eliciting && !closed_ && w.room() >= 1) {
    w.ping();
    eliciting = true;
  }
  if (w.size() == 0) return 0;
  if (coding && sp.nframes > 0 && fec.fits(w.size())) {
    // A FEC source packet: its symbol is its packet number and the frames
    // so far; the FEC_SOURCE frame after them says where it belongs.
    uint32_t block = 0;
    uint8_t index = 0;
    fec.next_source(&block, &index);
    const size_t symbol = w.size();
    w.fec_source(block, index);
    fec.add_source(pn, out.data + wire::kHeaderSize, symbol, elided,
                   std::span(out.pieces.data(), out.npieces), wire::kHeaderSize);
    sp.fec_source = true;
    sp.fec_block = block;
    ++stats_.fec_source_packets;
    ++path.stats.fec_source_packets;
  }
  return finish_packet(out, path, sp, w.size(), elided, eliciting, retx, keepalive, now);
}

size_t Connection::build_repair_packet(OutDatagram& out, Path& path, TimePoint now) {
  const size_t cap =
      cfg_.elide_payload ? cfg_.max_datagram : std::min<size_t>(out.capacity, cfg_.max_datagram);
  const size_t need = overhead_ + path.fec->repair_frame_size();
  if (need > cap || need > out.capacity) {
    // Source packets leave room for their repair, so only a caller's buffer
    // below max_datagram gets here: the block goes unprotected, and
    // retransmission covers it.
    path.fec->abandon_repair();
    return 0;
  }
  if (path.next_pn - path.first_pn >= path.sent_ring.size()) grow_sent_ring(path);
  out.npieces = 0;
  const uint64_t pn = path.next_pn;
  SentPacket& sp = path.sent(pn);
  sp = SentPacket{};
  sp.fec_repair = true;
  wire::FrameWriter w(out.data + wire::kHeaderSize, cap - overhead_);
  const size_t extra = path.fec->write_repair(w, pn, now);
  const size_t len = finish_packet(out, path, sp, w.size(), extra, true, false, false, now);
  ++stats_.fec_repair_sent;
  stats_.fec_repair_bytes += out.wire_len;
  ++path.stats.fec_repair_sent;
  path.stats.fec_repair_bytes += out.wire_len;
  return len;
}

size_t Connection::finish_packet(OutDatagram& out, Path& path, SentPacket& sp, size_t frames_len,
                                 Bytes elided, bool eliciting, bool retx, bool keepalive,
                                 TimePoint now) {
  const uint64_t pn = path.next_pn;
  const bool up = path.state == PathState::kUp;
  wire::Header h;
  h.flags = wire::kTypeData | (cfg_.elide_payload ? wire::kFlagElided : 0);
  h.path = static_cast<uint8_t>(path.id.index);
  h.connection_id = cfg_.connection_id;
  h.packet_number = pn;
  wire::write_header(out.data, h);
  out.len = static_cast<uint32_t>(wire::end_datagram(out.data, frames_len, cfg_.integrity_check));
  out.wire_len = static_cast<uint32_t>(out.len + elided);
  out.path = path.id;

  ++path.next_pn;
  sp.pn = pn;
  sp.sent_time = now;
  sp.bytes = out.wire_len;
  ++stats_.packets_sent;
  stats_.bytes_sent += out.wire_len;
  ++path.stats.packets_sent;
  path.stats.bytes_sent += out.wire_len;
  if (!eliciting) {
    sp.state = PacketState::kNotInFlight;
    return out.len;
  }
  if (!up) {  // a probe of a down path: outside its flight and its controller
    sp.state = PacketState::kProbe;
    ++path.stats.probes_sent;
    return out.len;
  }
  // The wait for an ACK starts with the first ack-eliciting packet the path
  // has out (data, or an unanswered keepalive).
  const bool waiting = path.ack_eliciting_in_flight > 0 || path.keepalive_unanswered;
  if (keepalive) {
    sp.state = PacketState::kProbe;
    ++path.stats.keepalives_sent;
    if (!waiting && !path.rto_since_ack) path.ack_wait_from = now;
    path.keepalive_unanswered = true;
    path.last_keepalive = now;
    return out.len;
  }
  sp.state = PacketState::kInFlight;
  sp.rate = path.rate.on_sent(now, path.bytes_in_flight);
  if (!waiting && !path.rto_since_ack) path.ack_wait_from = now;
  path.bytes_in_flight += out.wire_len;
  ++path.ack_eliciting_in_flight;
  path.last_ack_eliciting_sent = now;
  path.idle_reported = false;
  path.fec->on_sent();
  if (retx) {
    ++stats_.retransmitted_packets;
    ++path.stats.retransmitted_packets;
  }
  cc::SentEvent ev;
  ev.now = now;
  ev.packet_number = pn;
  ev.bytes = out.wire_len;
  ev.in_flight = path.bytes_in_flight;
  ev.is_retransmission = retx;
  ev.app_limited = sp.rate.app_limited;
  path.cc->on_packet_sent(ev);
  path.pacer.on_sent(now, out.wire_len, path.cc->pacing_rate(), path.cc->send_quantum(),
                     cfg_.max_datagram);
  return out.len;
}

// The scheduler. Each packet goes on the up path whose copy would arrive
// first: a path that may send now (cwnd and pacer permitting) delivers at
// now + its one-way delay (srtt / 2); a path whose pacer releases later
// delivers what it is given after its backlog drains. A ready path is used
// unless the paths that would deliver sooner, each at its pacing rate until
// that moment, could carry all the data waiting; so when there is more data
// than the fastest path can take, every path sends at its own rate, and a
// slow or lossy path (its controller slows it, its cwnd fills) only ever
// takes what it can deliver no later than the others would.
Connection::Path* Connection::pick_data_path(TimePoint now) noexcept {
  for (const auto& pp : paths_) {
    Path& path = *pp;
    path.cwnd_ok =
        path.bytes_in_flight == 0 || path.bytes_in_flight + cfg_.max_datagram <= path.cc->cwnd();
  }
  if (!has_stream_data() && !has_control_data()) {
    for (const auto& pp : paths_) pp->pacer.idle();
    return nullptr;
  }
  if (paths_.size() == 1) {
    Path& path = *paths_[0];
    if (!path.cwnd_ok) {
      path.pacer.idle();  // the window holds it, not the pacer
      return nullptr;
    }
    if (path.pacer.ready(now)) return &path;
    path.pacer.hold();
    return nullptr;
  }
  Path* best = nullptr;
  for (const auto& pp : paths_) {
    Path& path = *pp;
    if (path.state != PathState::kUp) continue;
    if (!path.cwnd_ok) {
      path.pacer.idle();
      continue;
    }
    if (!path.pacer.ready(now)) {
      path.pacer.hold();
      continue;
    }
    if (best == nullptr || path.rtt.smoothed() < best->rtt.smoothed()) best = &path;
  }
  if (best == nullptr) return nullptr;
  // Lost data and flow-control credit go at once; new data may wait for a
  // path that delivers it sooner.
  if (!retx_queue_.empty() || has_control_data()) return best;
  const Duration owd = best->rtt.smoothed() / 2;
  const uint64_t waiting =
      std::min(written_total_ - sent_new_total_, peer_max_data_ - sent_new_total_);
  uint64_t sooner = 0;  // bytes faster, not yet ready paths deliver before `best` would
  for (const auto& pp : paths_) {
    const Path& path = *pp;
    // Ready paths other than `best` deliver no sooner than it does.
    if (path.state != PathState::kUp || !path.cwnd_ok || path.pacer.ready(now)) continue;
    const Duration arrive = (path.pacer.release_time() - now) + path.rtt.smoothed() / 2;
    if (arrive >= owd) continue;
    sooner += path.cc->pacing_rate().bytes_in(owd - arrive);
    if (sooner >= waiting) {
      best->held = true;  // wake up for the faster path's release instead
      return nullptr;
    }
  }
  return best;
}

// A path that must send even without data permission: a probe pending on
// it, or an ACK due for a space whose packets arrive on it, or CLOSE.
Connection::Path* Connection::pick_control_path(TimePoint now) noexcept {
  for (const auto& pp : paths_) {
    Path& path = *pp;
    if (path.probes_pending > 0 || path.keepalive_pending) return &path;
    if (ack_due(path, now)) return paths_[path.ack_return].get();
  }
  if (close_pending_) return &primary();
  return nullptr;
}

size_t Connection::poll_send(std::span<OutDatagram> out, TimePoint now) noexcept {
  size_t n = 0;
  // New data waits for the peer's credit (queued, or held back in the
  // application by a send buffer full of it): say so once per limit, so
  // that the peer can tell its window from its reader (on_peer_blocked).
  if (sent_new_total_ + mss_payload_ > peer_max_data_ && blocked_reported_ != peer_max_data_ &&
      (!new_queue_.empty() || send_buffered_ + mss_payload_ >= send_capacity_)) {
    blocked_reported_ = peer_max_data_;
    data_blocked_pending_ = true;
  }
  for (const auto& pp : paths_) pp->held = false;
  while (n < out.size()) {
    if (closed_ && !close_pending_) break;
    // FEC: a block ends early when no more stream data is coming (the tail
    // of a message); its repair goes before new data, paced, beside cwnd
    // (the policy caps it at a small share).
    Path* repair = nullptr;
    for (const auto& pp : paths_) {
      Path& rp = *pp;
      if (!has_stream_data()) rp.fec->flush();
      if (rp.fec->repair_due() && rp.state == PathState::kUp && !closed_ && rp.pacer.ready(now)) {
        repair = &rp;
        break;
      }
    }
    if (repair != nullptr) {
      if (build_repair_packet(out[n], *repair, now) == 0) break;
      ++n;
      continue;
    }
    Path* path = pick_data_path(now);
    const bool allow = path != nullptr;
    if (path == nullptr) path = pick_control_path(now);
    if (path == nullptr) break;
    const bool probe = path->probes_pending > 0 || path->keepalive_pending;
    if (build_packet(out[n], *path, now, allow, probe) == 0) break;
    if (path->probes_pending > 0) --path->probes_pending;
    path->keepalive_pending = false;  // sent, or superseded by what this packet carried
    ++n;
  }
  if (!has_stream_data()) {
    bool room = false;
    for (const auto& pp : paths_) {
      Path& path = *pp;
      if (path.state != PathState::kUp || !path.cwnd_ok) continue;
      room = true;
      // Nothing to send below cwnd: rate samples until this data is acked are
      // app-limited (tcp_rate_check_app_limited).
      path.rate.on_app_limited(path.bytes_in_flight);
      if (path.bytes_in_flight == 0 && !path.idle_reported) {
        path.idle_reported = true;
        path.cc->on_idle(now);
      }
    }
    // With everything written already sent, the send buffer full and credit
    // left, the buffer, not the application or the peer (a stalled reader
    // keeps this end at its configured buffer), is what limits the flight
    // (loss recovery holds acked data above a hole; a hinted BDP may be
    // short of the path's): it grows, and the application fills it on its
    // next write.
    if (room && new_queue_.empty() && send_capacity_ < send_max_ &&
        send_buffered_ + mss_payload_ >= send_capacity_ &&
        sent_new_total_ + mss_payload_ <= peer_max_data_)
      grow_send_window();
  }
  return n;
}

}  // namespace rowan::transport
