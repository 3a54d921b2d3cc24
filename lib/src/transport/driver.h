// Drives one Connection over one PacketIo per path: receive a burst from each,
// run timers, send a burst, each datagram on the PacketIo of the path the
// connection chose. Handles a partial send_burst by keeping the unsent
// datagrams and retrying them first on the next poll (DPDK l3fwd). All
// buffers are allocated at construction. Backends that lend their memory
// (packet_io.h tx_buffer, lend_rx) are written into and read from in place;
// backends that take pieces (packet_io.h takes_pieces) get the stream bytes
// as pieces of the send buffer, not copied into the datagram.
//
// Threading: the thread that owns the connection.
#pragma once

#include <span>
#include <vector>

#include "base/clock.h"
#include "io/packet_io.h"
#include "transport/connection.h"

namespace rowan::transport {

class Driver {
 public:
  /// With `clock`, poll() reads it again before each receive burst: the
  /// caller's `now` may be stale by whatever it did since reading it (copying
  /// application data into streams, a DPDK burst, being preempted), and an
  /// ACK stamped with a time before it really arrived gives an RTT sample
  /// below the path's minimum, which delay-based controllers then keep as
  /// their base RTT (measured: 1.7 ms under a 20 ms path). The freshest time
  /// is used for the rest of the pass. Without a clock (simulation, fake
  /// clocks) `now` is used as given.
  Driver(Connection& conn, io::PacketIo& io, uint32_t burst = 32, const Clock* clock = nullptr);
  /// One PacketIo per path: ios[i] carries path i (ios.size() <=
  /// conn.path_count(); datagrams for a path without one are dropped and
  /// counted in dropped_no_io()).
  Driver(Connection& conn, std::span<io::PacketIo* const> ios, uint32_t burst = 32,
         const Clock* clock = nullptr);

  /// How long to wait before retrying datagrams a full backend refused.
  static constexpr Duration kTxRetry = Duration::from_us(10);
  /// Send bursts per poll() at most (while each one is full and taken).
  static constexpr uint32_t kMaxSendBursts = 8;

  /// One pass at `now`; returns when the next pass is needed.
  TimePoint poll(TimePoint now) noexcept;

  uint64_t dropped_no_io() const { return dropped_no_io_; }

 private:
  /// Sends what is pending, each on its path's backend; keeps the unsent,
  /// made whole (their pieces copied in: the send buffer may move on).
  void flush(TimePoint now) noexcept;
  /// Points the send buffers at the backend's lent transmit buffers where it
  /// lends them (packet_io.h tx_buffer), at the Driver's own memory otherwise.
  void lend_tx_buffers() noexcept;

  Connection& conn_;
  std::vector<io::PacketIo*> ios_;
  std::vector<bool> rx_lent_;  ///< per backend: it lends received datagrams (lend_rx)
  const Clock* clock_;
  uint32_t dgram_;
  std::vector<uint8_t> rx_mem_, tx_mem_;
  std::vector<io::RxDatagram> rx_;
  std::vector<OutDatagram> out_;
  std::vector<io::TxDatagram> tx_, scratch_;
  std::vector<uint16_t> tx_path_;
  std::vector<uint8_t*> tx_buf_;  ///< tx_[i]'s buffer, writable: its pieces are copied in there
  bool pieces_ok_ = false;        ///< every backend takes pieces (PacketIo::takes_pieces)
  size_t tx_count_ = 0;  // unsent datagrams left from a partial burst, in tx_[0, tx_count_)
  uint64_t dropped_no_io_ = 0;
};

}  // namespace rowan::transport
