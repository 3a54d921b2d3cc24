// The site port as one packet worker sees it (ARCHITECTURE.md "Packet
// workers"), the way io::PacketIo is the WAN for the transport: bursts in and
// out, the mbuf pool to build frames from, and how an idle worker sleeps
// until a frame comes.
//
// - PortSiteIo: a queue of the DPDK port itself (one worker: it owns the
//   port, as the single packet loop always did; af_packet ports get the
//   doorbell, rx_waker.h).
// - RingSiteIo: the worker's two rte_rings to the software distributor on
//   the main lcore (distributor.h), for ports with one queue and several
//   workers. RX is the distributor's share for this worker, TX goes back to
//   it for the port's one TX queue. Both rings are single-producer,
//   single-consumer.
// - QueueSiteIo (handoff.h): the worker's own queue pair of a port with one
//   per worker, and the rings on which its peers hand it the frames it owns.
//
// Threading: rx/tx/arm_wake/disarm on the owning worker's lcore only;
// stats() on any thread (rte_eth_stats_get).
#pragma once

#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "datapath/dpdk_port.h"
#include "datapath/rx_waker.h"

namespace rowan::gw {

class SiteIo {
 public:
  virtual ~SiteIo() = default;
  /// Up to `n` received frames into `pkts`; returns how many.
  virtual uint16_t rx(rte_mbuf** pkts, uint16_t n) noexcept = 0;
  /// Hands up to `n` frames to the port; returns how many it took (the rest
  /// stay the caller's).
  virtual uint16_t tx(rte_mbuf** pkts, uint16_t n) noexcept = 0;
  virtual rte_mempool* pool() const noexcept = 0;
  virtual const std::string& name() const noexcept = 0;
  virtual const std::array<uint8_t, 6>& mac() const noexcept = 0;
  virtual PortStats stats() const = 0;
  /// A descriptor readable when a frame may have come after arm_wake(), or -1
  /// (then the worker backs off in timed steps).
  virtual int wake_fd() const noexcept { return -1; }
  /// True when wake_fd() becomes readable for every frame rx() will return
  /// (so the worker may sleep until its next timer); false when it only ends
  /// some sleeps early (the worker backs off in timed steps).
  virtual bool wakes_for_frames() const noexcept { return wake_fd() >= 0; }
  /// True (once) when rx() read frames that it did not return (it handed
  /// them to another worker since the last call): the pass did work.
  virtual bool take_handed_over() noexcept { return false; }
  /// Before the last poll ahead of a sleep on wake_fd().
  virtual void arm_wake() noexcept {}
  /// After the worker found work or woke up.
  virtual void disarm() noexcept {}
};

/// Queue `queue` of a port the worker owns.
class PortSiteIo final : public SiteIo {
 public:
  /// `doorbell`: open the af_packet doorbell for the port's device (only
  /// when this worker is the port's one reader).
  PortSiteIo(Port& port, uint16_t queue, const std::string& device, bool doorbell)
      : port_(port), queue_(queue), waker_(doorbell ? device : std::string()) {}
  uint16_t rx(rte_mbuf** pkts, uint16_t n) noexcept override {
    return rte_eth_rx_burst(port_.id(), queue_, pkts, n);
  }
  uint16_t tx(rte_mbuf** pkts, uint16_t n) noexcept override {
    return rte_eth_tx_burst(port_.id(), queue_, pkts, n);
  }
  rte_mempool* pool() const noexcept override { return port_.pool(); }
  const std::string& name() const noexcept override { return port_.name(); }
  const std::array<uint8_t, 6>& mac() const noexcept override { return port_.mac(); }
  PortStats stats() const override { return port_.stats(); }
  int wake_fd() const noexcept override { return waker_.fd(); }
  void arm_wake() noexcept override { waker_.arm(); }
  uint16_t queue() const noexcept { return queue_; }

 private:
  Port& port_;
  uint16_t queue_;
  RxWaker waker_;
};

/// How one side wakes the other: `sleeping` is set by the sleeper before its
/// last look at its ring, and taken by the producer after it enqueued.
/// Both steps are followed by a seq_cst fence (a Dekker pair: the sleeper's
/// store → fence → ring load, the producer's ring store → fence → flag
/// load), so either the sleeper sees the new entries or the producer sees
/// the flag and writes the eventfd. A spurious write only wakes it early.
struct alignas(64) WakeCell {
  WakeCell();
  ~WakeCell();
  WakeCell(const WakeCell&) = delete;
  WakeCell& operator=(const WakeCell&) = delete;
  /// Sleeper: before its last poll.
  void arm() noexcept;
  /// Sleeper: found work or woke up.
  void disarm() noexcept {
    if (sleeping.load(std::memory_order_relaxed)) sleeping.store(false, std::memory_order_relaxed);
  }
  /// Producer: after enqueueing for the sleeper.
  void wake() noexcept;
  int fd = -1;  ///< eventfd
  std::atomic<bool> sleeping{false};
};

class RingSiteIo final : public SiteIo {
 public:
  /// `port`: the distributor's side of the port (pool, name, MAC, counters);
  /// `rx`/`tx`: the distributor's rings for this worker; `self`: this
  /// worker's wake cell (the distributor wakes it), `main`: the
  /// distributor's (this worker wakes it after a TX).
  RingSiteIo(const SiteIo& port, rte_ring* rx, rte_ring* tx, WakeCell& self, WakeCell& main)
      : port_(port), rx_(rx), tx_(tx), self_(self), main_(main) {}
  uint16_t rx(rte_mbuf** pkts, uint16_t n) noexcept override {
    return static_cast<uint16_t>(
        rte_ring_sc_dequeue_burst(rx_, reinterpret_cast<void**>(pkts), n, nullptr));
  }
  uint16_t tx(rte_mbuf** pkts, uint16_t n) noexcept override {
    const auto k = static_cast<uint16_t>(
        rte_ring_sp_enqueue_burst(tx_, reinterpret_cast<void**>(pkts), n, nullptr));
    if (k > 0) main_.wake();
    return k;
  }
  rte_mempool* pool() const noexcept override { return port_.pool(); }
  const std::string& name() const noexcept override { return port_.name(); }
  const std::array<uint8_t, 6>& mac() const noexcept override { return port_.mac(); }
  PortStats stats() const override { return port_.stats(); }
  int wake_fd() const noexcept override { return self_.fd; }
  void arm_wake() noexcept override { self_.arm(); }
  void disarm() noexcept override { self_.disarm(); }

 private:
  const SiteIo& port_;
  rte_ring* rx_;
  rte_ring* tx_;
  WakeCell& self_;
  WakeCell& main_;
};

}  // namespace rowan::gw
