#include "datapath/wan_link_mux.h"

#include <cstring>
#include <stdexcept>

#include "transport/wire.h"

namespace rowan::gw {
namespace {

constexpr uint32_t kBurst = 32;

}  // namespace

const char* const kMuxDropNames[] = {"unknown_connection", "unknown_source", "queue_full"};
static_assert(std::size(kMuxDropNames) == static_cast<size_t>(MuxDrop::kCount));

// ---------------------------------------------------------------------------
// UdpLinkPort

UdpLinkPort::UdpLinkPort(UdpLinkMux& mux, const io::UdpEndpoint& peer, uint64_t connection_id,
                         uint32_t max_datagram)
    : mux_(mux),
      peer_(peer),
      connection_id_(connection_id),
      dgram_(max_datagram),
      mem_(static_cast<size_t>(kQueue) * max_datagram) {}

uint32_t UdpLinkPort::max_datagram() const noexcept { return dgram_; }

size_t UdpLinkPort::send_burst(std::span<const io::TxDatagram> pkts, TimePoint now) noexcept {
  const size_t n = mux_.sock_.send_burst_to(pkts, peer_, now);
  for (size_t i = 0; i < n; ++i) {
    ++stats_.tx_packets;
    stats_.tx_bytes += pkts[i].len;
  }
  if (n < pkts.size()) ++stats_.tx_full;
  return n;
}

bool UdpLinkPort::push(const io::RxDatagram& d) noexcept {
  if (len_ == kQueue) return false;
  const uint32_t slot = (head_ + len_) % kQueue;
  std::memcpy(mem_.data() + static_cast<size_t>(slot) * dgram_, d.data, d.len);
  q_[slot] = Entry{d.len, d.ecn, d.rx_time};
  ++len_;
  return true;
}

size_t UdpLinkPort::recv_burst(std::span<io::RxDatagram> bufs, TimePoint now) noexcept {
  size_t n = 0;
  while (n < bufs.size() && len_ > 0) {
    const Entry& e = q_[head_];
    io::RxDatagram& d = bufs[n];
    if (e.len <= d.capacity) {
      std::memcpy(d.data, mem_.data() + static_cast<size_t>(head_) * dgram_, e.len);
      d.len = e.len;
      d.ecn = e.ecn;
      d.rx_time = e.rx_time;
      ++n;
    } else {
      ++stats_.rx_truncated;
    }
    head_ = (head_ + 1) % kQueue;
    --len_;
  }
  if (len_ == 0 && n < bufs.size()) n += mux_.pump(*this, bufs.subspan(n), now);
  for (size_t i = 0; i < n; ++i) {
    ++stats_.rx_packets;
    stats_.rx_bytes += bufs[i].len;
  }
  return n;
}

// ---------------------------------------------------------------------------
// UdpLinkMux

UdpLinkMux::UdpLinkMux(const io::UdpUringOptions& opts, Key key)
    : sock_(opts),
      key_(key),
      stage_mem_(static_cast<size_t>(kBurst) * opts.max_datagram),
      stage_(kBurst),
      from_(kBurst) {
  if (opts.peer.len != 0) throw std::invalid_argument("UdpLinkMux: the socket must be unconnected");
  for (uint32_t i = 0; i < kBurst; ++i) {
    stage_[i].data = stage_mem_.data() + static_cast<size_t>(i) * opts.max_datagram;
    stage_[i].capacity = opts.max_datagram;
  }
}

UdpLinkPort& UdpLinkMux::add_port(const io::UdpEndpoint& peer, uint64_t connection_id) {
  for (const auto& p : ports_) {
    if (p->peer_.same(peer.addr) || p->connection_id_ == connection_id) {
      throw std::invalid_argument("link port for " + peer.to_string() +
                                  ": another peer on the link has its endpoint or connection id");
    }
  }
  ports_.push_back(std::unique_ptr<UdpLinkPort>(
      new UdpLinkPort(*this, peer, connection_id, sock_.max_datagram())));
  return *ports_.back();
}

UdpLinkPort* UdpLinkMux::owner(const io::RxDatagram& d, const io::UdpEndpoint& from) noexcept {
  if (key_ == Key::kSource) {
    for (const auto& p : ports_) {
      if (p->peer_.same(from.addr)) return p.get();
    }
    ++drops_[static_cast<size_t>(MuxDrop::kUnknownSource)];
    return nullptr;
  }
  transport::wire::Header h;
  if (transport::wire::read_header(d.data, d.len, &h)) {
    for (const auto& p : ports_) {
      if (p->connection_id_ == h.connection_id) return p.get();
    }
  }
  ++drops_[static_cast<size_t>(MuxDrop::kUnknownConnection)];
  return nullptr;
}

size_t UdpLinkMux::pump(UdpLinkPort& into, std::span<io::RxDatagram> bufs, TimePoint now) noexcept {
  const size_t got = sock_.recv_burst_from(std::span(stage_), from_.data(), now);
  size_t n = 0;
  for (size_t i = 0; i < got; ++i) {
    const io::RxDatagram& d = stage_[i];
    UdpLinkPort* p = owner(d, from_[i]);
    if (p == nullptr) continue;
    if (p == &into && into.len_ == 0 && n < bufs.size() && d.len <= bufs[n].capacity) {
      std::memcpy(bufs[n].data, d.data, d.len);
      bufs[n].len = d.len;
      bufs[n].ecn = d.ecn;
      bufs[n].rx_time = d.rx_time;
      ++n;
    } else if (!p->push(d)) {
      ++drops_[static_cast<size_t>(MuxDrop::kQueueFull)];
    }
  }
  return n;
}

}  // namespace rowan::gw
