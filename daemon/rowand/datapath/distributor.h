// The software distributor (ARCHITECTURE.md "Packet workers"): when the site
// port has one RX queue (vdevs: af_packet, memif, TAP) and there are several
// workers, the main lcore reads the port in bursts, picks each frame's worker
// (shard.h) and hands it over on that worker's RX ring; it also empties the
// workers' TX rings into the port's one TX queue. One burst of the port is
// split into at most one enqueue per worker, so a ring operation is paid per
// burst, not per frame.
//
// A frame for every worker (ARP, neighbour discovery) is copied for workers
// 1..N-1 (rare; a failed copy counts `copy_nombuf`). The distributor reads
// a burst only when every worker's RX ring has room for a whole one
// (`backpressure` counts the passes it did not): a worker that falls behind
// leaves frames in the port's queue (the port drops them, imissed, when that
// fills) rather than have them read and dropped, and the main lcore then
// idles and sleeps, which matters where lcores share CPUs. The price is
// head-of-line blocking: one slow worker holds the port for all.
// `worker_busy` (a ring refused part of a burst) then only counts what
// should not happen.
//
// Threading: poll(), set_routes(), arm_wake(), wait() on the main lcore;
// stats() from any thread (each counter has one writer, the main lcore,
// which adds a burst's figures with relaxed stores).
#pragma once

#include <rte_mbuf.h>
#include <rte_ring.h>

#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "base/units.h"
#include "datapath/shard.h"
#include "datapath/site_io.h"

namespace rowan::gw {

struct DistributorStats {
  uint64_t rx_packets = 0;          ///< frames read from the port
  uint64_t tx_packets = 0;          ///< frames the port's tx_burst took from the workers
  uint64_t broadcast = 0;           ///< frames given to every worker
  uint64_t copy_nombuf = 0;         ///< copies of those that found no mbuf
  uint64_t backpressure = 0;        ///< passes that left the port unread: a worker's ring was full
  std::vector<uint64_t> to_worker;  ///< frames handed to each worker
  std::vector<uint64_t> worker_busy;  ///< frames dropped: that worker's RX ring was full
};

class Distributor {
 public:
  static constexpr uint32_t kRingSize = 1024;
  static constexpr uint16_t kBurst = 32;
  /// Rings for `workers` workers on `port` (the port's one queue pair, with
  /// its doorbell when it has one). Throws std::runtime_error.
  Distributor(SiteIo& port, uint32_t workers);
  ~Distributor();
  Distributor(const Distributor&) = delete;
  Distributor& operator=(const Distributor&) = delete;

  uint32_t workers() const noexcept { return n_; }
  /// Worker `i`'s view of the port (its two rings).
  std::unique_ptr<SiteIo> worker_io(uint32_t i);
  /// The routes (longest prefix first) that decide split-mode hashing.
  void set_routes(std::vector<ShardRoute> routes) { routes_ = std::move(routes); }

  /// One pass: a few RX bursts distributed, the TX rings drained. Returns
  /// whether a frame moved.
  bool poll() noexcept;
  /// True when wait() also wakes for local frames (an af_packet doorbell).
  bool can_block() const noexcept { return port_.wake_fd() >= 0; }
  /// Before the last poll ahead of wait(): workers' TX then wakes wait().
  void arm_wake() noexcept;
  /// Sleeps until a worker sent, a local frame came (can_block) or `d` passed.
  void wait(Duration d) noexcept;
  void disarm() noexcept { self_.disarm(); }

  DistributorStats stats() const;

 private:
  SiteIo& port_;
  uint32_t n_;
  WakeCell self_;
  std::vector<std::unique_ptr<WakeCell>> cells_;  ///< one per worker
  std::vector<rte_ring*> rx_, tx_;
  std::vector<ShardRoute> routes_;
  struct Staged {
    std::array<rte_mbuf*, kBurst> m{};
    uint16_t head = 0, len = 0;
  };
  std::vector<Staged> staged_;  ///< per worker: dequeued, not yet taken by tx_burst
  // Counters (one writer: the main lcore).
  std::atomic<uint64_t> rx_count_{0}, tx_count_{0}, broadcast_{0}, copy_nombuf_{0},
      backpressure_{0};
  std::unique_ptr<std::atomic<uint64_t>[]> to_worker_, worker_busy_;
};

}  // namespace rowan::gw
