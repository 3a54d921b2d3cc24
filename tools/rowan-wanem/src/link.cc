#include "link.h"

#include <algorithm>

#include "codec/ethertypes.h"

namespace rowan::wanem {
namespace {

constexpr uint32_t kEthHeader = 14;

uint16_t load16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
void store16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v & 0xff);
}

// Heap comparator for std::push_heap (a max-heap by default): invert.
bool heap_after(const Scheduled& a, const Scheduled& b) { return sched_before(b, a); }

}  // namespace

const char* drop_reason_name(DropReason r) {
  switch (r) {
    case DropReason::kLinkDown:
      return "link_down";
    case DropReason::kLoss:
      return "loss";
    case DropReason::kBurstLoss:
      return "burst_loss";
    case DropReason::kQueueFull:
      return "queue_full";
    case DropReason::kSchedulerFull:
      return "scheduler_full";
    case DropReason::kTxFull:
      return "tx_full";
    case DropReason::kNoMbuf:
      return "no_mbuf";
    case DropReason::kCount:
      break;
  }
  return "unknown";
}

Direction::Direction(size_t capacity, uint64_t seed)
    : rng_(seed), capacity_(capacity), fifo_(capacity) {
  heap_.reserve(capacity);
}

void Direction::configure(const DirSettings& s, TimePoint now) {
  const Bytes waiting = backlog(now);
  settings_ = s;
  if (!settings_.rate.is_zero() && waiting > 0) {
    last_depart_ = now + settings_.rate.transfer_time(waiting);
  } else if (settings_.rate.is_zero()) {
    last_depart_ = std::min(last_depart_, now);
  }
  if (settings_.ge_p <= 0) ge_bad_ = false;
}

Bytes Direction::backlog(TimePoint now) const noexcept {
  if (settings_.rate.is_zero() || last_depart_ <= now) return 0;
  return settings_.rate.bytes_in(last_depart_ - now);
}

bool Direction::lose(DropReason* reason) noexcept {
  if (settings_.ge_p > 0) {
    // Decide with the current state, then take the transition (netem's gemodel
    // order is the other way round; both give the same stationary behaviour).
    const double p_loss = ge_bad_ ? settings_.ge_bad_loss : settings_.ge_good_loss;
    const bool lost = rng_.chance(p_loss);
    if (ge_bad_) {
      if (rng_.chance(settings_.ge_r)) ge_bad_ = false;
    } else if (rng_.chance(settings_.ge_p)) {
      ge_bad_ = true;
    }
    if (lost) {
      *reason = DropReason::kBurstLoss;
      return true;
    }
  }
  if (rng_.chance(settings_.loss)) {
    *reason = DropReason::kLoss;
    return true;
  }
  return false;
}

void Direction::mark_ce(uint8_t* data, uint32_t len) noexcept {
  uint32_t off = 12;
  if (len < kEthHeader) return;
  uint16_t type = load16(data + off);
  while ((type == kEtherTypeVlan || type == kEtherTypeQinQ) && off + 6 <= len) {
    off += 4;
    type = load16(data + off);
  }
  const uint32_t l3 = off + 2;
  if (type == kEtherTypeIpv4 && l3 + 20 <= len) {
    uint8_t* ip = data + l3;
    if ((ip[0] >> 4) != 4) return;
    const uint8_t ecn = ip[1] & 0x3;
    if (ecn == 0) {
      ++counters_.ecn_not_ect;
      return;
    }
    if (ecn == 0x3) return;  // already CE
    // RFC 1624 incremental update: HC' = ~(~HC + ~m + m') over the first word.
    const uint16_t old_word = load16(ip);
    ip[1] = static_cast<uint8_t>(ip[1] | 0x3);
    const uint16_t new_word = load16(ip);
    uint32_t sum = static_cast<uint16_t>(~load16(ip + 10));
    sum += static_cast<uint16_t>(~old_word);
    sum += new_word;
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    store16(ip + 10, static_cast<uint16_t>(~sum));
    ++counters_.ecn_marked;
  } else if (type == kEtherTypeIpv6 && l3 + 40 <= len) {
    uint8_t* ip = data + l3;
    if ((ip[0] >> 4) != 6) return;
    const uint8_t ecn = (ip[1] >> 4) & 0x3;
    if (ecn == 0) {
      ++counters_.ecn_not_ect;
      return;
    }
    if (ecn == 0x3) return;
    ip[1] = static_cast<uint8_t>(ip[1] | 0x30);
    ++counters_.ecn_marked;
  }
}

// One bit of the UDP or TCP payload flipped and the L4 checksum updated for
// that one 16-bit word (RFC 1624: HC' = ~(~HC + ~m + m')), so the frame still
// passes the IP and UDP/TCP checks and the damage reaches the application
// (for rowan: the AEAD). IPv4 without fragments, IPv6 without extension
// headers; anything else is left intact (returns false).
bool Direction::corrupt_l4_payload(uint8_t* data, uint32_t len) noexcept {
  constexpr uint8_t kTcp = 6;
  constexpr uint8_t kUdp = 17;
  uint32_t off = 12;
  if (len < kEthHeader) return false;
  uint16_t type = load16(data + off);
  while ((type == kEtherTypeVlan || type == kEtherTypeQinQ) && off + 6 <= len) {
    off += 4;
    type = load16(data + off);
  }
  const uint32_t l3 = off + 2;
  uint32_t l4 = 0;
  uint32_t l4_len = 0;
  uint8_t proto = 0;
  if (type == kEtherTypeIpv4 && l3 + 20 <= len && (data[l3] >> 4) == 4) {
    const uint32_t ihl = (data[l3] & 0xfU) * 4;
    const uint32_t total = load16(data + l3 + 2);
    const bool fragment = (load16(data + l3 + 6) & 0x3fffU) != 0;  // MF or an offset
    if (ihl < 20 || total < ihl || l3 + total > len || fragment) return false;
    proto = data[l3 + 9];
    l4 = l3 + ihl;
    l4_len = total - ihl;
  } else if (type == kEtherTypeIpv6 && l3 + 40 <= len && (data[l3] >> 4) == 6) {
    const uint32_t payload = load16(data + l3 + 4);
    if (l3 + 40 + payload > len) return false;
    proto = data[l3 + 6];
    l4 = l3 + 40;
    l4_len = payload;
  } else {
    return false;
  }
  uint32_t hdr = 0;
  uint32_t csum_at = 0;
  if (proto == kUdp && l4_len >= 8) {
    hdr = 8;
    csum_at = 6;
    l4_len = std::min<uint32_t>(l4_len, std::max<uint32_t>(load16(data + l4 + 4), 8));
  } else if (proto == kTcp && l4_len >= 20) {
    hdr = (data[l4 + 12] >> 4U) * 4U;
    csum_at = 16;
    if (hdr < 20 || hdr > l4_len) return false;
  } else {
    return false;
  }
  if (l4_len <= hdr) return false;
  uint8_t* seg = data + l4;
  const uint64_t bit = rng_.below(static_cast<uint64_t>(l4_len - hdr) * 8);
  const uint32_t at = hdr + static_cast<uint32_t>(bit / 8);
  // The checksummed 16-bit word holding the byte (an odd last byte is padded
  // with zero for the sum, whatever follows it in the frame).
  const uint32_t w = at & ~1U;
  auto word = [&] {
    return static_cast<uint16_t>((seg[w] << 8) | (w + 1 < l4_len ? seg[w + 1] : 0));
  };
  const uint16_t before = word();
  seg[at] ^= static_cast<uint8_t>(1U << (bit % 8));
  const uint16_t after = word();
  const uint16_t hc = load16(seg + csum_at);
  if (proto == kUdp && hc == 0 && type == kEtherTypeIpv4) return true;  // no checksum in use
  uint32_t sum = static_cast<uint16_t>(~hc);
  sum += static_cast<uint16_t>(~before);
  sum += after;
  while ((sum >> 16) != 0) sum = (sum & 0xffff) + (sum >> 16);
  uint16_t out = static_cast<uint16_t>(~sum);
  if (proto == kUdp && out == 0) out = 0xffff;  // 0 means "no checksum" in UDP
  store16(seg + csum_at, out);
  return true;
}

bool Direction::push(const Scheduled& s) noexcept {
  if (fifo_count_ + heap_.size() >= capacity_) return false;
  if (fifo_count_ == 0 || s.release_ns >= last_fifo_release_ns_) {
    fifo_[(fifo_head_ + fifo_count_) % capacity_] = s;
    ++fifo_count_;
    last_fifo_release_ns_ = s.release_ns;
  } else {
    heap_.push_back(s);  // capacity reserved: never reallocates
    std::push_heap(heap_.begin(), heap_.end(), heap_after);
  }
  return true;
}

Direction::Verdict Direction::admit(TimePoint now, void* pkt, uint8_t* data, uint32_t len,
                                    bool allow_duplicate, bool* duplicate,
                                    DropReason* drop_reason) noexcept {
  *duplicate = false;
  if (allow_duplicate) {
    ++counters_.rx_frames;
    counters_.rx_bytes += len;
  }
  if (!settings_.up) {
    *drop_reason = DropReason::kLinkDown;
    note_drop(*drop_reason);
    return Verdict::kDropped;
  }
  if (lose(drop_reason)) {
    note_drop(*drop_reason);
    return Verdict::kDropped;
  }
  const Bytes wire = len + settings_.overhead;
  const Bytes waiting = backlog(now);
  if (!settings_.rate.is_zero() && waiting + wire > settings_.queue_limit) {
    *drop_reason = DropReason::kQueueFull;
    note_drop(*drop_reason);
    return Verdict::kDropped;
  }
  if (settings_.ecn_threshold > 0 && waiting >= settings_.ecn_threshold) mark_ce(data, len);
  if (rng_.chance(settings_.corrupt) && len > kEthHeader) {
    if (!settings_.corrupt_payload) {
      const uint64_t bit = rng_.below(static_cast<uint64_t>(len - kEthHeader) * 8);
      data[kEthHeader + bit / 8] ^= static_cast<uint8_t>(1U << (bit % 8));
      ++counters_.corrupted;
    } else if (corrupt_l4_payload(data, len)) {
      ++counters_.corrupted;
    } else {
      ++counters_.corrupt_skipped;
    }
  }

  TimePoint depart = now;
  if (!settings_.rate.is_zero()) {
    depart = std::max(now, last_depart_) + settings_.rate.transfer_time(wire);
    last_depart_ = depart;
    counters_.queue_max_bytes = std::max(counters_.queue_max_bytes, waiting + wire);
  }
  int64_t release_ns = depart.ns();
  const bool skip_delay = settings_.reorder > 0 && rng_.chance(settings_.reorder);
  if (skip_delay) {
    ++counters_.reordered;
  } else {
    int64_t d = settings_.delay.ns();
    if (!settings_.jitter.is_zero()) {
      const int64_t j = settings_.jitter.ns();
      d += static_cast<int64_t>(rng_.below(static_cast<uint64_t>(2 * j + 1))) - j;
      d = std::max<int64_t>(d, 0);
    }
    release_ns += d;
    if (!settings_.jitter_reorder && fifo_count_ > 0) {
      release_ns = std::max(release_ns, last_fifo_release_ns_);
    }
  }
  if (!push(Scheduled{release_ns, seq_++, pkt})) {
    *drop_reason = DropReason::kSchedulerFull;
    note_drop(*drop_reason);
    return Verdict::kDropped;
  }
  const int64_t applied = release_ns - now.ns();
  if (counters_.delay_count == 0) {
    counters_.delay_min_ns = applied;
    counters_.delay_max_ns = applied;
  } else {
    counters_.delay_min_ns = std::min(counters_.delay_min_ns, applied);
    counters_.delay_max_ns = std::max(counters_.delay_max_ns, applied);
  }
  ++counters_.delay_count;
  counters_.delay_sum_ns += applied;
  if (allow_duplicate && rng_.chance(settings_.duplicate)) {
    *duplicate = true;
    ++counters_.duplicated;
  }
  return Verdict::kQueued;
}

TimePoint Direction::next_release() const noexcept {
  int64_t t = TimePoint::infinite().ns();
  if (fifo_count_ > 0) t = fifo_[fifo_head_].release_ns;
  if (!heap_.empty()) t = std::min(t, heap_.front().release_ns);
  return TimePoint::from_ns(t);
}

size_t Direction::release(TimePoint deadline, Scheduled* out, size_t max) noexcept {
  size_t n = 0;
  const int64_t limit = deadline.ns();
  while (n < max) {
    const bool have_fifo = fifo_count_ > 0 && fifo_[fifo_head_].release_ns <= limit;
    const bool have_heap = !heap_.empty() && heap_.front().release_ns <= limit;
    if (!have_fifo && !have_heap) break;
    if (have_heap && (!have_fifo || sched_before(heap_.front(), fifo_[fifo_head_]))) {
      std::pop_heap(heap_.begin(), heap_.end(), heap_after);
      out[n++] = heap_.back();
      heap_.pop_back();
    } else {
      out[n++] = fifo_[fifo_head_];
      fifo_head_ = (fifo_head_ + 1) % capacity_;
      --fifo_count_;
    }
  }
  return n;
}

size_t Direction::drain(Scheduled* out, size_t max) noexcept {
  return release(TimePoint::infinite(), out, max);
}

void Direction::note_tx(TimePoint now, int64_t release_ns, uint32_t len) noexcept {
  ++counters_.tx_frames;
  counters_.tx_bytes += len;
  const int64_t late = now.ns() - release_ns;
  if (counters_.late_count == 0) {
    counters_.late_min_ns = late;
    counters_.late_max_ns = late;
  } else {
    counters_.late_min_ns = std::min(counters_.late_min_ns, late);
    counters_.late_max_ns = std::max(counters_.late_max_ns, late);
  }
  ++counters_.late_count;
  counters_.late_sum_ns += late;
  const int64_t bucket = std::clamp<int64_t>(late / 1000 - DirCounters::kLateHistMinUs, 0,
                                             DirCounters::kLateHistBuckets - 1);
  ++counters_.late_hist[static_cast<size_t>(bucket)];
}

double DirCounters::late_quantile_us(double q) const {
  if (late_count == 0) return 0;
  const auto target = static_cast<uint64_t>(q * static_cast<double>(late_count - 1));
  uint64_t seen = 0;
  for (size_t i = 0; i < late_hist.size(); ++i) {
    seen += late_hist[i];
    if (seen > target) return static_cast<double>(static_cast<int64_t>(i) + kLateHistMinUs);
  }
  return static_cast<double>(static_cast<int64_t>(late_hist.size()) + kLateHistMinUs);
}

}  // namespace rowan::wanem
