// DPDK set-up for rowand: the EAL from [eal], and ports opened from a device
// spec (a PCI address, or a vdev such as `net_af_packet0,iface=rowan-a-lan`).
//
// Threading: init_eal and Port's constructor run on the main thread before
// the packet loop starts; rx/tx are called by the one lcore that owns the port.
#pragma once

#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"

namespace rowan::gw {

/// Builds the EAL argument list for `eal` and the devices to probe (vdevs go
/// as --vdev, PCI addresses as -a). Exposed for tests.
std::vector<std::string> eal_args(const EalConfig& eal, const std::vector<std::string>& devices);

/// Initializes the EAL; throws std::runtime_error naming the failing step.
void init_eal(const EalConfig& eal, const std::vector<std::string>& devices);
void cleanup_eal();

/// Port statistics (rte_eth_stats) as plain integers.
struct PortStats {
  uint64_t ipackets = 0, opackets = 0, ibytes = 0, obytes = 0, imissed = 0, ierrors = 0,
           oerrors = 0, rx_nombuf = 0;
};

class Port {
 public:
  /// Finds the port the EAL created for `device`, configures one RX and one
  /// TX queue and starts it. Throws std::runtime_error.
  Port(const std::string& device, uint16_t rx_ring, uint16_t tx_ring, uint32_t mbuf_size,
       uint32_t nb_mbufs);
  ~Port();
  Port(const Port&) = delete;
  Port& operator=(const Port&) = delete;

  uint16_t id() const { return id_; }
  const std::array<uint8_t, 6>& mac() const { return mac_; }
  rte_mempool* pool() const { return pool_; }
  const std::string& name() const { return name_; }

  uint16_t rx(rte_mbuf** pkts, uint16_t n) noexcept { return rte_eth_rx_burst(id_, 0, pkts, n); }
  uint16_t tx(rte_mbuf** pkts, uint16_t n) noexcept { return rte_eth_tx_burst(id_, 0, pkts, n); }
  PortStats stats() const;

 private:
  uint16_t id_ = 0;
  std::string name_;
  std::array<uint8_t, 6> mac_{};
  rte_mempool* pool_ = nullptr;
  bool started_ = false;
};

/// The device name of a spec: "net_af_packet0,iface=x" → "net_af_packet0".
std::string device_name(const std::string& spec);
bool is_vdev(const std::string& spec);

}  // namespace rowan::gw
