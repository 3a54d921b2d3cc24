// The local port's doorbell (io/doorbell.h) when its PMD has no Rx interrupt:
// net_af_packet ports get one on their interface, so an idle rowand loop can
// sleep until a local frame, a WAN datagram or its next timer.
//
// Use: arm() (empties it), poll the port once more, then wait on fd().
//
// Threading: the packet lcore owns it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "io/doorbell.h"

namespace rowan::gw {

class RxWaker {
 public:
  /// For `device` a port spec ("net_af_packet0,iface=rowan-a-lan"): opens the
  /// doorbell for af_packet vdevs. For anything else, or when it cannot be
  /// opened (no CAP_NET_RAW, no such interface), there is none: fd() is -1
  /// and the loop keeps its timed back-off.
  explicit RxWaker(const std::string& device);

  int fd() const noexcept { return bell_ ? bell_->fd() : -1; }
  /// Why there is no doorbell ("" when there is one).
  const std::string& why_not() const noexcept { return why_not_; }
  /// Empties the doorbell; returns the frames it held.
  uint32_t arm() noexcept { return bell_ ? bell_->drain() : 0; }

  /// The interface of an af_packet spec ("" for other devices).
  static std::string af_packet_iface(const std::string& device);

 private:
  std::unique_ptr<io::Doorbell> bell_;
  std::string why_not_;
};

}  // namespace rowan::gw
