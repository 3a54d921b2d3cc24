// A file descriptor that becomes readable when a frame reaches the local
// port, for ports whose PMD has no Rx interrupt (net_af_packet): an idle
// event loop can then block until a frame or a timer is due, instead of
// waking on a timed back-off to poll an empty ring (l3fwd-power's idea with
// the kernel's help).
//
// It is a second AF_PACKET socket on the port's interface that only counts
// as a doorbell: outgoing frames are ignored (PACKET_IGNORE_OUTGOING), the
// receive buffer is as small as the kernel allows, so while the loop is busy
// the queue holds a few frames and the rest are refused before any copy
// (the kernel checks the buffer before cloning). The PMD's own ring gets
// every frame regardless.
//
// Use: arm() (empties the doorbell), poll the port once more, then wait on
// fd() — a frame that arrived before arm() is in the port's ring, one after
// it rings the doorbell.
//
// Threading: the packet lcore owns it.
#pragma once

#include <cstdint>
#include <string>

namespace rowan::gw {

class RxWaker {
 public:
  /// For `device` a port spec ("net_af_packet0,iface=rowan-a-lan"): opens the
  /// doorbell for af_packet vdevs; for anything else (or when the socket
  /// cannot be opened: no CAP_NET_RAW, no such interface) there is none and
  /// fd() is -1, and the loop keeps its timed back-off.
  explicit RxWaker(const std::string& device);
  ~RxWaker();
  RxWaker(const RxWaker&) = delete;
  RxWaker& operator=(const RxWaker&) = delete;

  int fd() const noexcept { return fd_; }
  /// Why there is no doorbell ("" when there is one).
  const std::string& why_not() const noexcept { return why_not_; }
  /// Empties the doorbell (non-blocking); returns the frames it held.
  uint32_t arm() noexcept;

  /// The interface of an af_packet spec ("" for other devices).
  static std::string af_packet_iface(const std::string& device);

 private:
  int fd_ = -1;
  std::string why_not_;
};

}  // namespace rowan::gw
