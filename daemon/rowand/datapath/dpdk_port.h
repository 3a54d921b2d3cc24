// DPDK set-up for rowand: the EAL from [eal], and ports opened from a device
// spec (a PCI address, or a vdev such as `net_af_packet0,iface=rowan-a-lan`).
//
// Threading: init_eal and Port's constructor run on the main thread before
// the packet loop starts; rx/tx are called by the one lcore that owns the port
// (or queue 0 of it); with a queue per worker, worker i owns queue i.
#pragma once

#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "config/config.h"

namespace rowan::gw {

/// Builds the EAL argument list for `eal` and the devices to probe (vdevs go
/// as --vdev, PCI addresses as -a). Exposed for tests.
std::vector<std::string> eal_args(const EalConfig& eal, const std::vector<std::string>& devices);

/// Initializes the EAL; throws std::runtime_error naming the failing step.
void init_eal(const EalConfig& eal, const std::vector<std::string>& devices);
/// Runs `fn` on the EAL's interrupt thread (as an alarm callback, so never
/// during a device's interrupt callback) and waits for it. False, with `fn`
/// not run, when the thread did not start it within `limit` or the alarm
/// could not be set. Not from the interrupt thread itself.
bool on_interrupt_thread(const std::function<void()>& fn, Duration limit);
/// Parks the EAL's interrupt thread for good (after what it runs now), then
/// rte_eal_cleanup(). Call once, after every port is closed, just before the
/// process exits: nothing that needs that thread works afterwards.
void cleanup_eal();

/// Port statistics (rte_eth_stats) as plain integers.
struct PortStats {
  uint64_t ipackets = 0, opackets = 0, ibytes = 0, obytes = 0, imissed = 0, ierrors = 0,
           oerrors = 0, rx_nombuf = 0;
};

/// How many RX/TX queue pairs to open for `workers` packet workers on a port
/// that has at most `max_rx`/`max_tx` queues: one per worker under kAuto
/// when there are two or more and the port has that many, else one (the
/// distributor's, or the one worker's).
uint16_t queue_pairs_for(QueueMode mode, uint32_t workers, uint16_t max_rx, uint16_t max_tx);

/// How many workers the EAL's `lcores` run (site.h): one on one or two
/// lcores, lcores - 1 from three on.
uint32_t workers_for(uint32_t lcores);

class Port {
 public:
  /// Finds the port the EAL created for `device`, configures `queues` RX
  /// and TX queues (queue_pairs_for; more than one: RSS over the IP
  /// addresses and the TCP/UDP ports, as far as the PMD hashes them, with a
  /// symmetric Toeplitz key when it takes one) and starts it. Throws
  /// std::runtime_error.
  Port(const std::string& device, uint16_t rx_ring, uint16_t tx_ring, uint32_t mbuf_size,
       uint32_t nb_mbufs, uint16_t queues = 1);
  /// The most RX/TX queue pairs the EAL's port for `device` offers (0: no
  /// such port; 1 for net_memif, whose queues its peer decides). Before a
  /// Port is opened on it.
  static uint16_t max_queue_pairs(const std::string& device);
  ~Port();
  Port(const Port&) = delete;
  Port& operator=(const Port&) = delete;

  uint16_t id() const { return id_; }
  const std::array<uint8_t, 6>& mac() const { return mac_; }
  rte_mempool* pool() const { return pool_; }
  const std::string& name() const { return name_; }

  /// RX/TX queue pairs opened (1, or one per worker).
  uint16_t queues() const { return queues_; }
  /// The RSS hash functions in use (0: one queue, or the PMD hashes its own way).
  uint64_t rss_hf() const { return rss_hf_; }

  uint16_t rx(rte_mbuf** pkts, uint16_t n) noexcept { return rte_eth_rx_burst(id_, 0, pkts, n); }
  uint16_t tx(rte_mbuf** pkts, uint16_t n) noexcept { return rte_eth_tx_burst(id_, 0, pkts, n); }
  PortStats stats() const;

 private:
  uint16_t id_ = 0;
  std::string name_;
  std::array<uint8_t, 6> mac_{};
  rte_mempool* pool_ = nullptr;
  uint16_t queues_ = 1;
  uint64_t rss_hf_ = 0;
  bool started_ = false;
};

/// The device name of a spec: "net_af_packet0,iface=x" → "net_af_packet0".
std::string device_name(const std::string& spec);
bool is_vdev(const std::string& spec);

}  // namespace rowan::gw
