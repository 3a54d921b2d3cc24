// A doorbell for a DPDK port whose PMD has no Rx interrupt (net_af_packet on
// a veth or TAP): a second AF_PACKET socket on the port's interface that
// becomes readable when a frame arrives, so an idle loop can sleep in poll(),
// or in an io_uring poll, until a frame instead of waking on a timer to look
// at an empty ring (DPDK l3fwd-power's idea, with the kernel's help). The
// PMD's own ring gets every frame regardless.
//
// It keeps one byte of each incoming frame (a "ret #1" socket filter),
// ignores outgoing ones (PACKET_IGNORE_OUTGOING) and has a small receive
// buffer: while the loop is busy it holds a few frames and refuses the rest
// before any clone. With `timestamps` each kept frame carries its kernel
// arrival time (SO_TIMESTAMPNS), for a loop that must date frames it reaps
// late (rowan-wanem).
//
// Use: drain() it, poll the port once more, then sleep on fd(): a frame that
// arrived before the drain is in the port's ring, one after it rings.
//
// Threading: one thread owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace rowan::io {

struct DoorbellOptions {
  /// SO_RCVBUF bytes; 0: the kernel's minimum (a few frames).
  int rcvbuf = 0;
  bool timestamps = false;  ///< keep each frame's kernel arrival time
};

class Doorbell {
 public:
  /// Opens the doorbell on `iface`; throws std::runtime_error (no such
  /// interface, no CAP_NET_RAW).
  explicit Doorbell(const std::string& iface, const DoorbellOptions& opts = {});
  ~Doorbell();
  Doorbell(const Doorbell&) = delete;
  Doorbell& operator=(const Doorbell&) = delete;

  int fd() const noexcept { return fd_; }
  /// Empties it (non-blocking); returns the frames it held.
  uint32_t drain() const noexcept;
  /// Takes up to `max` held frames, oldest first, and writes their arrival
  /// times on the monotonic clock (`mono_minus_real`: the offset from
  /// base/clock.h's monotonic_minus_realtime_ns()). Needs `timestamps`.
  size_t read_stamps(int64_t* out, size_t max, int64_t mono_minus_real) const noexcept;

 private:
  int fd_ = -1;
};

}  // namespace rowan::io
