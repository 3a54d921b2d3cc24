// A PacketIo that hands every call to an inner one: the base of the test
// wrappers that change one side of it (rx_lending_io.h, tx_lending_io.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

#include "io/packet_io.h"

namespace rowan::test {

class WrappingIo : public io::PacketIo {
 public:
  explicit WrappingIo(io::PacketIo& inner) : inner_(inner) {}
  size_t send_burst(std::span<const io::TxDatagram> pkts, TimePoint now) noexcept override {
    return inner_.send_burst(pkts, now);
  }
  uint8_t* tx_buffer(size_t i) noexcept override { return inner_.tx_buffer(i); }
  size_t recv_burst(std::span<io::RxDatagram> bufs, TimePoint now) noexcept override {
    return inner_.recv_burst(bufs, now);
  }
  bool lend_rx(bool on) noexcept override { return inner_.lend_rx(on); }
  void rx_done() noexcept override { inner_.rx_done(); }
  TimePoint next_rx_time() const noexcept override { return inner_.next_rx_time(); }
  uint32_t max_datagram() const noexcept override { return inner_.max_datagram(); }
  const io::IoStats& stats() const noexcept override { return inner_.stats(); }

 protected:
  /// Whether `p` lies in one of `buffers` (a range of byte vectors).
  template <class Buffers>
  static bool lies_in(const Buffers& buffers, const uint8_t* p) {
    return std::any_of(buffers.begin(), buffers.end(),
                       [p](const auto& m) { return p >= m.data() && p < m.data() + m.size(); });
  }

  io::PacketIo& inner_;
};

}  // namespace rowan::test
