#include "transport/connection.h"

#include <algorithm>
#include <cstring>

namespace rowan::transport {

// The send path: packet building, ACK frames, stream frames, poll_send.

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
  sp.rate = rate_.on_sent(now, bytes_in_flight_);
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
  ev.app_limited = sp.rate.app_limited;
  cc_->on_packet_sent(ev);
  pacer_.on_sent(now, out.wire_len, cc_->pacing_rate(), cc_->send_quantum(), cfg_.max_datagram);
  return out.len;
}

size_t Connection::poll_send(std::span<OutDatagram> out, TimePoint now) noexcept {
  size_t n = 0;
  bool cwnd_ok = true;
  // New data waits for the peer's credit (queued, or held back in the
  // application by a send buffer full of it): say so once per limit, so
  // that the peer can tell its window from its reader (on_peer_blocked).
  if (sent_new_total_ + mss_payload_ > peer_max_data_ && blocked_reported_ != peer_max_data_ &&
      (!new_queue_.empty() || send_buffered_ + mss_payload_ >= send_capacity_)) {
    blocked_reported_ = peer_max_data_;
    data_blocked_pending_ = true;
  }
  while (n < out.size()) {
    if (closed_ && !close_pending_) break;
    const bool probe = probes_pending_ > 0;
    const bool data =
        has_stream_data() || max_data_pending_ || data_blocked_pending_ || !msd_pending_.empty();
    cwnd_ok = bytes_in_flight_ == 0 || bytes_in_flight_ + cfg_.max_datagram <= cc_->cwnd();
    const bool allow = data && cwnd_ok && pacer_.ready(now);
    if (!allow && !probe && !ack_due(now) && !close_pending_) break;
    if (build_packet(out[n], now, allow, probe) == 0) break;
    if (probe) --probes_pending_;
    ++n;
  }
  if (!has_stream_data() && cwnd_ok) {
    // Nothing to send below cwnd. With everything written already sent, the
    // send buffer full and credit left, the buffer, not the application or
    // the peer (a stalled reader keeps this end at its configured buffer),
    // is what limits the flight (loss recovery holds acked data
    // above a hole; a hinted BDP may be short of the path's): it grows,
    // and the application fills it on its next write.
    if (new_queue_.empty() && send_capacity_ < send_max_ &&
        send_buffered_ + mss_payload_ >= send_capacity_ &&
        sent_new_total_ + mss_payload_ <= peer_max_data_)
      grow_send_window();
    // Rate samples until this data is acked are app-limited
    // (tcp_rate_check_app_limited).
    rate_.on_app_limited(bytes_in_flight_);
    if (bytes_in_flight_ == 0 && !idle_reported_) {
      idle_reported_ = true;
      cc_->on_idle(now);
    }
  }
  return n;
}

}  // namespace rowan::transport
