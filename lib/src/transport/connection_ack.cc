#include "transport/connection.h"

#include <algorithm>

namespace rowan::transport {

// ACK processing, loss detection (RFC 9002 / RFC 8985), timers and path
// failover. Everything here works on one path's packet-number space: packet
// numbers, holes, RTT and loss timers never mix paths, so reordering between
// paths never looks like loss.

void Connection::grow_sent_ring(Path& path) {
  std::vector<SentPacket> next(path.sent_ring.size() * 2);
  for (uint64_t pn = path.first_pn; pn < path.next_pn; ++pn)
    next[pn & (next.size() - 1)] = path.sent(pn);
  path.sent_ring.swap(next);
}

Duration Connection::pto_base(const Path& path) const {
  return path.rtt.smoothed() + std::max(path.rtt.rttvar() * 4, cfg_.timer_granularity) +
         cfg_.max_ack_delay;
}

Duration Connection::backed_off_pto(const Path& path) const {
  const Duration base = pto_base(path);
  const Duration pto = base * (int64_t{1} << std::min<uint32_t>(path.pto_count, 16));
  if (cfg_.max_pto.is_zero()) return pto;
  return std::min(pto, std::max(cfg_.max_pto, base));
}

void Connection::trim_sent(Path& path, TimePoint now) {
  const Duration retire = pto_base(path) * 2;
  while (path.first_pn < path.next_pn) {
    SentPacket& p = path.sent(path.first_pn);
    if (p.state == PacketState::kInFlight) break;
    // A PING outside the flight (a down path's probe, an idle path's
    // keepalive) waits for its ACK, a sign of life, as long as a lost packet
    // waits for a late one: ACKs crossing it must not retire it first.
    if (p.state == PacketState::kProbe && now - p.sent_time < retire) break;
    if (p.state == PacketState::kLost) {
      if (now - p.sent_time < retire) break;
      path.lost_pns.remove_below(path.first_pn + 1);
    }
    p.state = PacketState::kUnused;
    ++path.first_pn;
  }
  path.unacked_holes.remove_below(path.first_pn);
}

void Connection::on_packet_acked(SentPacket& p, TimePoint now) {
  (void)now;
  for (uint8_t i = 0; i < p.nframes; ++i) {
    const SentFrame& f = p.frames[i];
    Stream& s = *streams_[f.slot];
    const uint64_t lo = std::max(f.offset, s.acked_floor);
    const uint64_t hi = f.offset + f.length;
    if (lo < hi) {
      const uint64_t before = s.acked_floor;
      if (lo == s.acked_floor) {
        s.acked_floor = hi;  // in order: the floor moves without touching the set
      } else {
        s.acked.add(lo, hi);
      }
      s.lost.remove(lo, hi);
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

bool Connection::queue_full(const Path& path) noexcept {
  // FEC plans against random loss, not against the drops of a full queue: a
  // loss while the path's RTT stands well above its min (a buffer-filling
  // competitor, or this flow's own overshoot) is congestion, which repair
  // traffic would only add to (two bbr flows at a 1-BDP buffer: Jain 0.72
  // with such drops coded, 0.99 without).
  const Duration m = path.rtt.min_rtt();
  if (m.is_zero()) return false;
  return path.rtt.latest() > m + std::max(m / 8, Duration::from_ms(1));
}

void Connection::on_packet_lost(Path& path, SentPacket& p) {
  p.state = PacketState::kLost;
  path.bytes_in_flight -= p.bytes;
  --path.ack_eliciting_in_flight;
  ++stats_.lost_packets;
  stats_.lost_bytes += p.bytes;
  ++path.stats.lost_packets;
  path.stats.lost_bytes += p.bytes;
  path.lost_pns.add(p.pn, p.pn + 1);
  if (!queue_full(path)) path.fec->on_path_loss(p.pn);
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
  Path& path = *paths_[a.path];  // the validator checked the index
  ++stats_.acks_received;
  const Bytes prior_in_flight = path.bytes_in_flight;
  const bool had_acked = path.any_acked;
  const uint64_t prev_largest = path.largest_acked;
  Bytes acked_bytes = 0;
  uint32_t acked_packets = 0;
  bool spurious = false;
  bool probe_acked = false;
  bool largest_newly_acked = false;
  TimePoint largest_sent_time;
  path.rate.begin_ack();

  auto process = [&](uint64_t pn) {
    SentPacket& p = path.sent(pn);
    if (p.state == PacketState::kProbe) {  // a down path's PING: a sign of life only
      p.state = PacketState::kAcked;
      probe_acked = true;
      if (pn == a.largest) {
        largest_newly_acked = true;
        largest_sent_time = p.sent_time;
      }
      return;
    }
    if (p.state != PacketState::kInFlight && p.state != PacketState::kLost) return;
    if (p.fec_held && p.state == PacketState::kInFlight) {
      ++stats_.fec_held_acked;  // the path lost it and the peer rebuilt it
      if (!queue_full(path)) path.fec->on_path_loss(pn);
    }
    if (p.state == PacketState::kInFlight) {
      path.bytes_in_flight -= p.bytes;
      --path.ack_eliciting_in_flight;
    } else {
      ++stats_.spurious_losses;
      spurious = true;
    }
    p.state = PacketState::kAcked;
    acked_bytes += p.bytes;
    ++acked_packets;
    path.rate.on_acked(p.rate, p.sent_time, p.bytes, now);
    if (pn == a.largest) {
      largest_newly_acked = true;
      largest_sent_time = p.sent_time;
    }
    on_packet_acked(p, now);
  };

  // Walk ranges from the lowest so the rate sample ends on the newest packet.
  for (int r = a.range_count - 1; r >= 0; --r) {
    const uint64_t lo = std::max(a.ranges[r].lo, path.first_pn);
    const uint64_t hi = a.ranges[r].hi;
    if (lo > hi) continue;
    if (had_acked && lo <= prev_largest) {
      const uint64_t old_hi = std::min(hi, prev_largest);
      // Only holes and lost packets can be newly acked below the previous
      // largest; most ACK ranges repeat what is already known and cost a
      // binary search each.
      for (IntervalSet* set : {&path.unacked_holes, &path.lost_pns}) {
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
    uint64_t cursor = had_acked ? prev_largest + 1 : path.first_pn;
    for (int r = a.range_count - 1; r >= 0; --r) {
      if (a.ranges[r].hi < cursor) continue;
      if (a.ranges[r].lo > cursor) path.unacked_holes.add(cursor, a.ranges[r].lo);
      cursor = a.ranges[r].hi + 1;
    }
    path.largest_acked = a.largest;
    path.any_acked = true;
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
    path.rtt.on_sample(latest, ack_delay, now);
    rtt_sample = latest >= path.rtt.min_rtt() + ack_delay ? latest - ack_delay : latest;
    stats_.rtt_histogram.observe(rtt_sample);
    stats_.queue_delay_histogram.observe(rtt_sample - path.rtt.min_rtt());
  }

  uint32_t new_ce = 0;
  if (a.ce_count > path.peer_ce_count) {
    new_ce = static_cast<uint32_t>(std::min<uint64_t>(a.ce_count - path.peer_ce_count, UINT32_MAX));
    path.peer_ce_count = a.ce_count;
  }

  if (acked_packets > 0 || probe_acked) {
    path.ack_wait_from = now;
    path.keepalive_unanswered = false;
    path.rto_since_ack = false;
    path.stats.packets_acked += acked_packets;
    path.stats.bytes_acked += acked_bytes;
    if (path.state == PathState::kDown) bring_up(path, now);
  }

  Bytes lost_bytes = 0;
  uint32_t lost_packets = 0;
  detect_losses(path, now, &lost_bytes, &lost_packets);
  if (acked_packets > 0) path.pto_count = 0;

  cc::AckEvent ev;
  ev.now = now;
  ev.rtt = rtt_sample;
  ev.min_rtt = path.rtt.min_rtt();
  ev.ack_delay = Duration::from_us(a.ack_delay_us);
  ev.acked_bytes = acked_bytes;
  ev.acked_packets = acked_packets;
  ev.lost_bytes = lost_bytes;
  ev.lost_packets = lost_packets;
  ev.prior_in_flight = prior_in_flight;
  ev.in_flight = path.bytes_in_flight;
  ev.ce_count = new_ce;
  path.rate.end_ack(path.rtt.min_rtt(), ev);
  if (ev.round_start) {
    const BitsPerSec r =
        path.cc->pacing_rate().is_zero() ? path.cfg.link_rate : path.cc->pacing_rate();
    path.fec->update_rate(path.rtt.smoothed(), r.transfer_time(cfg_.max_datagram));
  }
  if (acked_packets > 0 || lost_packets > 0 || new_ce > 0) path.cc->on_ack(ev);
  if (spurious) path.cc->on_spurious_loss(now);
  trim_sent(path, now);
}

void Connection::detect_losses(Path& path, TimePoint now, Bytes* lost_bytes,
                               uint32_t* lost_packets) {
  path.loss_time = TimePoint::infinite();
  if (!path.any_acked || path.unacked_holes.empty()) return;
  const Duration base = std::max(path.rtt.latest(), path.rtt.smoothed());
  const Duration loss_delay = std::max(base + base / 8, cfg_.timer_granularity);
  const TimePoint lost_send_time = now - loss_delay;
  uint64_t stop = path.unacked_holes.back().hi;
  bool stopped = false;
  const auto& rs = path.unacked_holes.ranges();
  for (size_t i = 0; i < rs.size() && !stopped; ++i) {
    for (uint64_t pn = std::max(rs[i].lo, path.first_pn); pn < rs[i].hi; ++pn) {
      SentPacket& p = path.sent(pn);
      if (p.state != PacketState::kInFlight) continue;
      // A FEC source packet is judged against its block's last repair
      // packet: lost only if the peer could not rebuild it from the repair.
      uint64_t ref_pn = pn + cfg_.packet_threshold;
      TimePoint ref_time = p.sent_time;
      if (p.fec_source) {
        const bool own_verdict =
            p.sent_time <= lost_send_time || path.largest_acked >= pn + cfg_.packet_threshold;
        if (!path.fec->loss_reference(p.fec_block, &ref_pn, &ref_time)) {
          p.fec_held = p.fec_held || own_verdict;  // repair still to leave: wait for it
          stop = pn;
          stopped = true;
          break;
        }
        if (own_verdict) p.fec_held = true;
      }
      if (ref_time <= lost_send_time || path.largest_acked >= ref_pn) {
        *lost_bytes += p.bytes;
        ++*lost_packets;
        if (p.sent_time > path.loss_event_start) {  // sent after the last event began: a new one
          ++stats_.loss_events;
          path.loss_event_start = now;
        }
        on_packet_lost(path, p);
        continue;
      }
      path.loss_time = ref_time + loss_delay;
      stop = pn;
      stopped = true;
      break;
    }
  }
  path.unacked_holes.remove_below(stop);
}

void Connection::on_pto(Path& path, TimePoint now) {
  ++path.pto_count;
  if (path.pto_count > cfg_.ptos_before_rto) {
    on_rto(path, now);
    return;
  }
  ++stats_.ptos;
  ++path.stats.ptos;
  path.probes_pending = 1;
  path.fec->flush();              // a block waiting for more sources sends its repair now
  if (has_stream_data()) return;  // the probe carries new or already-lost data
  // Tail-loss probe: resend the data of the newest packet still in flight.
  for (uint64_t pn = path.next_pn; pn > path.first_pn; --pn) {
    SentPacket& p = path.sent(pn - 1);
    if (p.state != PacketState::kInFlight || p.fec_repair) continue;
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

void Connection::lose_flight(Path& path, TimePoint now) {
  for (uint64_t pn = path.first_pn; pn < path.next_pn; ++pn) {
    SentPacket& p = path.sent(pn);
    if (p.state == PacketState::kInFlight) on_packet_lost(path, p);
  }
  path.unacked_holes.clear();
  path.loss_time = TimePoint::infinite();
  path.cc->on_rto(now);
}

void Connection::on_rto(Path& path, TimePoint now) {
  ++stats_.rtos;
  ++path.stats.rtos;
  lose_flight(path, now);
  path.probes_pending = 1;
  path.rto_since_ack = true;
}

// ---------------------------------------------------------------------------
// Path failover

// A path is judged on its keepalives only once it has been acknowledged at
// all: until the peer answers (its gateway starting, the link's handshake),
// silence says nothing about the link.
TimePoint Connection::down_deadline(const Path& path) const {
  if (up_paths_ < 2 || path.state != PathState::kUp ||
      (path.ack_eliciting_in_flight == 0 && !(path.keepalive_unanswered && path.any_acked)))
    return TimePoint::infinite();
  return path.ack_wait_from + std::max(path.rtt.smoothed() * 3, cfg_.path_down_floor);
}

// An up path of several with nothing ack-eliciting in flight is kept
// measured: a PING after path_keepalive of silence, repeated sooner while
// unanswered (a single lost PING or ACK must not take the path down).
TimePoint Connection::keepalive_time(const Path& path) const {
  if (closed_ || paths_.size() < 2 || cfg_.path_keepalive.is_zero() ||
      path.state != PathState::kUp || path.ack_eliciting_in_flight > 0 || path.probes_pending > 0 ||
      path.keepalive_pending)
    return TimePoint::infinite();
  if (path.keepalive_unanswered)
    return path.last_keepalive + std::max(cfg_.path_keepalive / 4, pto_base(path));
  return std::max(path.last_ack_eliciting_sent, path.last_keepalive) + cfg_.path_keepalive;
}

void Connection::declare_down(Path& path, TimePoint now) {
  path.state = PathState::kDown;
  --up_paths_;
  ++path.stats.downs;
  // Everything in flight on it is resent at once on the surviving paths; its
  // controller starts again from its floor when the path is back.
  lose_flight(path, now);
  path.pto_count = 0;
  path.probes_pending = 0;
  path.keepalive_pending = false;
  path.keepalive_unanswered = false;
  path.probe_interval = pto_base(path);
  path.next_probe = now + path.probe_interval;
  push_path_event(path, now);
}

void Connection::bring_up(Path& path, TimePoint now) {
  path.state = PathState::kUp;
  ++up_paths_;
  ++path.stats.ups;
  path.next_probe = TimePoint::infinite();
  path.pto_count = 0;
  path.ack_wait_from = now;
  path.last_keepalive = now;
  path.idle_reported = false;
  push_path_event(path, now);
}

// ---------------------------------------------------------------------------
// Timers

void Connection::on_timeout(TimePoint now) noexcept {
  if (closed_) return;
  for (const auto& pp : paths_) {
    Path& path = *pp;
    if (path.loss_time <= now) {
      Bytes lost_bytes = 0;
      uint32_t lost_packets = 0;
      detect_losses(path, now, &lost_bytes, &lost_packets);
      if (lost_packets > 0) {
        cc::AckEvent ev;
        ev.now = now;
        ev.min_rtt = path.rtt.min_rtt();
        ev.lost_bytes = lost_bytes;
        ev.lost_packets = lost_packets;
        ev.prior_in_flight = path.bytes_in_flight + lost_bytes;
        ev.in_flight = path.bytes_in_flight;
        ev.round_count = path.rate.round_count();
        path.cc->on_ack(ev);
      }
      continue;
    }
    if (path.state == PathState::kDown) {
      if (path.next_probe <= now) {
        path.probes_pending = 1;
        path.probe_interval = std::min(path.probe_interval * 2, cfg_.path_probe_max);
        path.next_probe = now + path.probe_interval;
      }
      continue;
    }
    if (down_deadline(path) <= now) {
      declare_down(path, now);
      continue;
    }
    if (keepalive_time(path) <= now) path.keepalive_pending = true;
    if (path.ack_eliciting_in_flight > 0 && path.probes_pending == 0) {
      if (path.last_ack_eliciting_sent + backed_off_pto(path) <= now) on_pto(path, now);
    }
  }
}

TimePoint Connection::next_timeout() const noexcept {
  if (closed_ && !close_pending_) return TimePoint::infinite();
  if (close_pending_) return TimePoint::zero();
  TimePoint t = TimePoint::infinite();
  const bool data = has_stream_data() || has_control_data();
  for (const auto& pp : paths_) {
    const Path& path = *pp;
    if (path.probes_pending > 0 || path.keepalive_pending) return TimePoint::zero();
    if (path.unacked_eliciting > 0) t = std::min(t, path.ack_deadline);
    t = std::min(t, path.loss_time);
    if (path.state == PathState::kDown) {
      t = std::min(t, path.next_probe);
      continue;
    }
    if (path.ack_eliciting_in_flight > 0) {
      t = std::min(t, path.last_ack_eliciting_sent + backed_off_pto(path));
    }
    t = std::min({t, down_deadline(path), keepalive_time(path)});
    if (path.fec->repair_due()) t = std::min(t, path.pacer.release_time());
    if (data && !path.held &&
        (path.bytes_in_flight == 0 ||
         path.bytes_in_flight + cfg_.max_datagram <= path.cc->cwnd())) {
      t = std::min(t, path.pacer.release_time());
    }
  }
  return t;
}

}  // namespace rowan::transport
