// Drives one Connection over one PacketIo: receive a burst, run timers, send
// a burst. Handles a partial send_burst by keeping the unsent datagrams and
// retrying them first on the next poll (DPDK l3fwd). All buffers are
// allocated at construction.
//
// Threading: the thread that owns the connection.
#pragma once

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

  /// How long to wait before retrying datagrams a full backend refused.
  static constexpr Duration kTxRetry = Duration::from_us(10);

  /// One pass at `now`; returns when the next pass is needed.
  TimePoint poll(TimePoint now) noexcept;

 private:
  Connection& conn_;
  io::PacketIo& io_;
  const Clock* clock_;
  uint32_t dgram_;
  std::vector<uint8_t> rx_mem_, tx_mem_;
  std::vector<io::RxDatagram> rx_;
  std::vector<OutDatagram> out_;
  std::vector<io::TxDatagram> tx_;
  size_t tx_head_ = 0, tx_count_ = 0;  // unsent datagrams left from a partial burst
};

}  // namespace rowan::transport
