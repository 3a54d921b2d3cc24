// A PacketIo wrapper that lends what it receives (packet_io.h lend_rx) the
// way the DPDK WAN lends mbufs: each datagram in memory of its own, pointed
// to by the caller's RxDatagram, and scribbled over at rx_done. A caller
// that read a datagram after rx_done sees garbage; one that passed a lent
// buffer back as its own is counted (stale_buffers). Transmit passes through.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "tools/wrapping_io.h"

namespace rowan::test {

class RxLendingIo final : public WrappingIo {
 public:
  explicit RxLendingIo(io::PacketIo& inner, uint32_t buffer = 2048) : WrappingIo(inner) {
    for (auto& m : mem_) m.assign(buffer, 0);
  }
  size_t recv_burst(std::span<io::RxDatagram> bufs, TimePoint now) noexcept override {
    if (!lend_) return inner_.recv_burst(bufs, now);
    for (const io::RxDatagram& b : bufs) {
      for (const auto& m : mem_) stale_buffers += b.data == m.data() ? 1 : 0;
    }
    // Like the DPDK WAN, no more than it can hold until rx_done.
    const size_t n = inner_.recv_burst(bufs.first(std::min(bufs.size(), mem_.size() - held_)), now);
    for (size_t i = 0; i < n; ++i) {
      std::vector<uint8_t>& m = mem_[held_++];
      std::copy(bufs[i].data, bufs[i].data + bufs[i].len, m.begin());
      bufs[i].data = m.data();
    }
    return n;
  }
  bool lend_rx(bool on) noexcept override {
    if (!on) rx_done();
    lend_ = on;
    return on;
  }
  void rx_done() noexcept override {
    for (size_t i = 0; i < held_; ++i) std::fill(mem_[i].begin(), mem_[i].end(), 0xEE);
    lent += held_;
    held_ = 0;
  }

  /// Whether a datagram's data lies in memory this backend lent.
  bool lent_memory(const uint8_t* p) const { return lies_in(mem_, p); }

  uint64_t lent = 0;           ///< datagrams lent and given back
  uint64_t stale_buffers = 0;  ///< lent buffers a caller passed back as its own

 private:
  bool lend_ = false;
  std::array<std::vector<uint8_t>, 128> mem_;
  size_t held_ = 0;
};

}  // namespace rowan::test
