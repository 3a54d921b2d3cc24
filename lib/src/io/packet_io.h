// Packet I/O: burst send and receive of whole datagrams.
//
// Backends: an in-memory loopback for tests (loopback.h), an io_uring UDP
// socket (udp_uring.h), the DPDK WAN port (daemon/rowand/datapath/dpdk_wan_io.h) and
// the link-security wrapper around any of them (lib/src/crypto/secure_io.h).
// The transport never sees which one it runs on.
//
// Buffers are owned by the caller: `send_burst` copies (or hands to the NIC)
// the bytes it accepts before returning, `recv_burst` fills caller-provided
// buffers. No allocation per packet. A backend may also lend its own
// transmit buffers (`tx_buffer`), so that the caller writes each datagram
// where the NIC reads it, and `send_burst` skips the copy.
//
// Threading: one PacketIo belongs to one thread (lcore); none of its methods
// is thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "base/units.h"

namespace rowan::io {

/// ECN codepoint of a received or sent datagram (RFC 3168).
enum class Ecn : uint8_t { kNotEct = 0, kEct1 = 1, kEct0 = 2, kCe = 3 };

/// Bytes of a datagram that are not in its buffer: the `len` bytes at `src`
/// belong at `off` into the datagram (TxDatagram::pieces).
struct TxPiece {
  const uint8_t* src = nullptr;
  uint32_t off = 0;
  uint32_t len = 0;
};

/// Pieces a datagram may have at most.
inline constexpr size_t kMaxTxPieces = 8;

/// A datagram to send: a view of caller-owned bytes. With `npieces` > 0 the
/// buffer has holes, filled by `pieces` (in increasing `off`, within `len`):
/// only a backend whose takes_pieces() is true is given such a datagram, and
/// it reads the pieces during send_burst only.
struct TxDatagram {
  const uint8_t* data = nullptr;
  uint32_t len = 0;
  Ecn ecn = Ecn::kEct0;
  const TxPiece* pieces = nullptr;
  uint8_t npieces = 0;
};

/// Walks bytes `base` .. `base + len` of a datagram with pieces as it is
/// sent: f(src, n) for each non-empty run in order, the buffer's bytes
/// (`data`, which starts at offset `base`) between the pieces and each piece
/// where it lies. False, before any call, when the pieces are out of order
/// or outside that range.
template <class F>
bool for_each_run(const uint8_t* data, size_t len, const TxPiece* pieces, size_t n, size_t base,
                  F&& f) {
  size_t pos = base;
  for (size_t j = 0; j < n; ++j) {
    if (pieces[j].off < pos || pieces[j].off + pieces[j].len > base + len) return false;
    pos = pieces[j].off + pieces[j].len;
  }
  pos = 0;
  for (size_t j = 0; j < n; ++j) {
    const size_t off = pieces[j].off - base;
    if (off > pos) f(data + pos, off - pos);
    if (pieces[j].len > 0) f(pieces[j].src, pieces[j].len);
    pos = off + pieces[j].len;
  }
  if (pos < len) f(data + pos, len - pos);
  return true;
}

/// Copies a datagram's pieces into its buffer `data` (the datagram's own,
/// writable), so that it is whole.
inline void fill_pieces(uint8_t* data, const TxPiece* pieces, size_t n) noexcept {
  for (size_t j = 0; j < n; ++j) std::memcpy(data + pieces[j].off, pieces[j].src, pieces[j].len);
}

/// A caller-owned buffer `recv_burst` fills.
struct RxDatagram {
  uint8_t* data = nullptr;
  uint32_t capacity = 0;
  uint32_t len = 0;  ///< set by recv_burst
  Ecn ecn = Ecn::kNotEct;
  /// When the datagram arrived (the kernel's receive timestamp, converted to
  /// the monotonic clock), set by backends that have one; zero otherwise.
  /// It may be later than the `now` recv_burst was called with: a caller
  /// that read the clock and was then preempted, or slept, before reaping.
  TimePoint rx_time = TimePoint();
};

/// Counters of a PacketIo; plain integers summed by the exporter.
struct IoStats {
  uint64_t tx_packets = 0;
  uint64_t tx_bytes = 0;
  uint64_t tx_full = 0;  ///< datagrams refused by send_burst (queue full)
  uint64_t rx_packets = 0;
  uint64_t rx_bytes = 0;
  uint64_t rx_truncated = 0;  ///< datagrams longer than the receive buffer (dropped)
};

class PacketIo {
 public:
  virtual ~PacketIo() = default;
  PacketIo() = default;
  PacketIo(const PacketIo&) = delete;
  PacketIo& operator=(const PacketIo&) = delete;

  /// Sends up to pkts.size() datagrams in order; returns how many were
  /// accepted (a prefix). A partial burst is normal: the caller keeps the rest
  /// and retries on its next poll (DPDK l3fwd). Called with the time the
  /// caller read once for this burst.
  virtual size_t send_burst(std::span<const TxDatagram> pkts, TimePoint now) noexcept = 0;

  /// Zero-copy transmit (optional). A buffer of at least max_datagram()
  /// bytes in the backend's own transmit memory (a DPDK mbuf, past the room
  /// for its headers), for the i-th datagram of the caller's next burst; null
  /// when the backend lends none, or none for this i (the caller writes into
  /// its own memory then). A datagram given to send_burst whose data is such
  /// a buffer goes out without a copy, and the next tx_buffer(i) returns
  /// another one. One not sent (refused, or never passed) stays lent with
  /// its contents until it is sent or the backend is destroyed, so a refused
  /// datagram can be passed again as it is. Lent buffers belong to the one
  /// caller that asked for them (one Driver per backend).
  virtual uint8_t* tx_buffer(size_t i) noexcept {
    (void)i;
    return nullptr;
  }

  /// Whether send_burst takes datagrams with pieces (TxDatagram::pieces),
  /// reading each piece where it lies: the link-security wrapper seals them
  /// into its output, so the payload is not copied into the datagram first.
  /// The caller copies the pieces in for a backend that does not.
  virtual bool takes_pieces() const noexcept { return false; }

  /// Fills up to bufs.size() buffers with datagrams that have arrived by
  /// `now`; returns the count. Sets each filled buffer's len and ecn.
  virtual size_t recv_burst(std::span<RxDatagram> bufs, TimePoint now) noexcept = 0;

  /// Zero-copy receive (optional), asked for by the caller: after
  /// lend_rx(true) returned true, recv_burst may point a datagram's `data`
  /// at the backend's own receive memory (a DPDK mbuf, past its headers)
  /// instead of copying it into the caller's buffer, so the caller points
  /// `data` back at its buffers before each call. That memory is the
  /// caller's, writable, until it calls rx_done(), which it does after
  /// every burst it has handled; until then the backend may receive fewer
  /// (it holds what it lent). Returns whether the backend lends.
  virtual bool lend_rx(bool on) noexcept {
    (void)on;
    return false;
  }
  /// The caller is done with every datagram received since the last call:
  /// the backend takes back the memory it lent.
  virtual void rx_done() noexcept {}

  /// Earliest time a datagram becomes receivable, for event loops and
  /// simulated time; TimePoint::infinite() when nothing is pending or unknown.
  virtual TimePoint next_rx_time() const noexcept { return TimePoint::infinite(); }

  /// Largest datagram this backend carries (bytes, UDP payload).
  virtual uint32_t max_datagram() const noexcept = 0;

  virtual const IoStats& stats() const noexcept = 0;
};

}  // namespace rowan::io
