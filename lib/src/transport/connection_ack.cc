#include "transport/connection.h"

#include <algorithm>

namespace rowan::transport {

// ACK processing, loss detection (RFC 9002 / RFC 8985) and timers.

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
  fec_.on_path_loss(p.pn);
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
  rate_.begin_ack();

  auto process = [&](uint64_t pn) {
    SentPacket& p = sent(pn);
    if (p.state != PacketState::kInFlight && p.state != PacketState::kLost) return;
    if (p.fec_held && p.state == PacketState::kInFlight) {
      ++stats_.fec_held_acked;  // the path lost it and the peer rebuilt it
      fec_.on_path_loss(pn);
    }
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
    rate_.on_acked(p.rate, p.sent_time, p.bytes, now);
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
  rate_.end_ack(rtt_.min_rtt(), ev);
  stats_.delivered_bytes = rate_.delivered();
  if (ev.round_start) {
    const BitsPerSec r = cc_->pacing_rate().is_zero() ? cfg_.link_rate : cc_->pacing_rate();
    fec_.update_rate(rtt_.smoothed(), r.transfer_time(cfg_.max_datagram));
  }
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
      // A FEC source packet is judged against its block's last repair
      // packet: lost only if the peer could not rebuild it from the repair.
      uint64_t ref_pn = pn + cfg_.packet_threshold;
      TimePoint ref_time = p.sent_time;
      if (p.fec_source) {
        const bool own_verdict =
            p.sent_time <= lost_send_time || largest_acked_ >= pn + cfg_.packet_threshold;
        if (!fec_.loss_reference(p.fec_block, &ref_pn, &ref_time)) {
          p.fec_held = p.fec_held || own_verdict;  // repair still to leave: wait for it
          stop = pn;
          stopped = true;
          break;
        }
        if (own_verdict) p.fec_held = true;
      }
      if (ref_time <= lost_send_time || largest_acked_ >= ref_pn) {
        *lost_bytes += p.bytes;
        ++*lost_packets;
        if (p.sent_time > loss_event_start_) {  // sent after the last event began: a new one
          ++stats_.loss_events;
          loss_event_start_ = now;
        }
        on_packet_lost(p);
        continue;
      }
      loss_time_ = ref_time + loss_delay;
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
  fec_.flush();                    // a block waiting for more sources sends its repair now
  if (has_stream_data()) return;  // the probe carries new or already-lost data
  // Tail-loss probe: resend the data of the newest packet still in flight.
  for (uint64_t pn = next_pn_; pn > first_pn_; --pn) {
    SentPacket& p = sent(pn - 1);
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
      ev.round_count = rate_.round_count();
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
  if (fec_.repair_due()) t = std::min(t, pacer_.release_time());
  if ((has_stream_data() || control) &&
      (bytes_in_flight_ == 0 || bytes_in_flight_ + cfg_.max_datagram <= cc_->cwnd())) {
    t = std::min(t, pacer_.release_time());
  }
  return t;
}

}  // namespace rowan::transport
