#include "io/loopback.h"

#include <algorithm>
#include <cstring>

namespace rowan::io {
namespace {

bool later(const auto& x, const auto& y) { return x.at != y.at ? x.at > y.at : x.order > y.order; }

}  // namespace

size_t LoopbackPort::send_burst(std::span<const TxDatagram> pkts, TimePoint now) noexcept {
  const size_t n = link_.send(side_, pkts, now);
  stats_.tx_packets += n;
  for (size_t i = 0; i < n; ++i) stats_.tx_bytes += pkts[i].len;
  stats_.tx_full += pkts.size() - n;
  return n;
}

size_t LoopbackPort::recv_burst(std::span<RxDatagram> bufs, TimePoint now) noexcept {
  return link_.recv(1 - side_, bufs, now, stats_);
}

TimePoint LoopbackPort::next_rx_time() const noexcept {
  const auto& heap = link_.chan_[1 - side_].heap;
  return heap.empty() ? TimePoint::infinite() : heap.front().at;
}

uint32_t LoopbackPort::max_datagram() const noexcept { return link_.max_datagram_; }

LoopbackLink::LoopbackLink(uint32_t max_datagram, uint32_t capacity, uint64_t seed)
    : max_datagram_(max_datagram), rng_(seed) {
  for (auto& c : chan_) {
    c.storage.resize(static_cast<size_t>(capacity) * max_datagram);
    c.free_slots.reserve(capacity);
    for (uint32_t i = capacity; i > 0; --i) c.free_slots.push_back(i - 1);
    c.heap.reserve(capacity);
  }
}

bool LoopbackLink::enqueue(Channel& c, const uint8_t* data, uint32_t len, Ecn ecn, TimePoint at,
                           bool corrupt) noexcept {
  if (c.free_slots.empty()) {
    ++c.stats.overflow;
    return false;
  }
  const uint32_t slot = c.free_slots.back();
  c.free_slots.pop_back();
  uint8_t* dst = c.storage.data() + static_cast<size_t>(slot) * max_datagram_;
  std::memcpy(dst, data, len);
  if (corrupt && len > 0) {
    const auto pos = static_cast<uint32_t>(uniform() * len) % len;
    dst[pos] ^= static_cast<uint8_t>(1U << (static_cast<uint32_t>(uniform() * 8) % 8));
    ++c.stats.corrupted;
  }
  c.heap.push_back(Pending{at, c.order++, slot, len, ecn});
  std::push_heap(c.heap.begin(), c.heap.end(),
                 [](const Pending& x, const Pending& y) { return later(x, y); });
  return true;
}

size_t LoopbackLink::send(int dir, std::span<const TxDatagram> pkts, TimePoint now) noexcept {
  Channel& c = chan_[dir];
  size_t accepted = 0;
  for (const TxDatagram& p : pkts) {
    if (c.free_slots.empty()) break;  // partial burst: the caller retries the rest
    ++accepted;
    ++c.stats.sent;
    const uint64_t seq = c.seq++;
    if (p.len > max_datagram_) {
      ++c.stats.dropped;
      continue;
    }
    Verdict v = Verdict::kPass;
    if (c.filter) v = c.filter(p.data, p.len, seq);
    if (v == Verdict::kDrop || (c.imp.loss > 0 && uniform() < c.imp.loss)) {
      ++c.stats.dropped;
      continue;
    }
    const bool corrupt = v == Verdict::kCorrupt || (c.imp.corrupt > 0 && uniform() < c.imp.corrupt);
    Ecn ecn = p.ecn;
    if (c.imp.ce_mark > 0 && ecn != Ecn::kNotEct && uniform() < c.imp.ce_mark) ecn = Ecn::kCe;
    TimePoint at = now + c.imp.delay;
    if (c.imp.reorder > 0 && uniform() < c.imp.reorder) {
      at += c.imp.reorder_extra;
      ++c.stats.reordered;
    }
    enqueue(c, p.data, p.len, ecn, at, corrupt);
    if (v == Verdict::kDuplicate || (c.imp.duplicate > 0 && uniform() < c.imp.duplicate)) {
      if (enqueue(c, p.data, p.len, ecn, at, false)) ++c.stats.duplicated;
    }
  }
  return accepted;
}

size_t LoopbackLink::recv(int dir, std::span<RxDatagram> bufs, TimePoint now,
                          IoStats& st) noexcept {
  Channel& c = chan_[dir];
  size_t n = 0;
  while (n < bufs.size() && !c.heap.empty() && c.heap.front().at <= now) {
    std::pop_heap(c.heap.begin(), c.heap.end(),
                  [](const Pending& x, const Pending& y) { return later(x, y); });
    const Pending p = c.heap.back();
    c.heap.pop_back();
    const uint8_t* src = c.storage.data() + static_cast<size_t>(p.slot) * max_datagram_;
    c.free_slots.push_back(p.slot);
    RxDatagram& b = bufs[n];
    if (p.len > b.capacity) {
      ++st.rx_truncated;
      continue;
    }
    std::memcpy(b.data, src, p.len);
    b.len = p.len;
    b.ecn = p.ecn;
    ++c.stats.delivered;
    ++st.rx_packets;
    st.rx_bytes += p.len;
    ++n;
  }
  return n;
}

}  // namespace rowan::io
