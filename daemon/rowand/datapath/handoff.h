// Queues per worker (ARCHITECTURE.md "Packet workers"): when the site port
// has an RX/TX queue pair per worker (a NIC with RSS; net_af_packet with
// qpairs=N, where the kernel's PACKET_FANOUT hash spreads the flows), each
// worker reads its own queue and sends on its own queue; the main lcore does
// no packet work.
//
// The port picks a frame's queue by its own hash (Toeplitz on a NIC, the
// kernel's flow hash on af_packet), which is not shard.h's: a QP's owner is
// shard.h's choice, so that split-mode routes (hashed on the addresses only)
// and the WAN's worker pairing hold whatever the port does. So each worker
// computes the shard of every frame it reads, keeps its own, and hands the
// others to their owner on one single-producer/single-consumer rte_ring per
// ordered pair of workers (N x (N-1) rings), one enqueue per destination and
// burst. ARP and neighbour discovery go to every worker (the reader keeps
// the frame, the others get copies; a failed copy counts `copy_nombuf`).
//
// Order: the port puts a given flow always on the same queue, so its frames
// reach their owner either directly or through one ring, in the order the
// queue had them. (net_af_packet's fanout has the rollover flag: when a
// queue's ring is (nearly) full the kernel puts a frame on another, where
// it can overtake or fall behind its flow; that happens only under overload.)
//
// Backpressure, as the distributor does it: a worker reads its queue only
// when each of its outbound rings has room for the whole burst; otherwise
// the frames wait in the queue (the port drops them when it fills:
// imissed), the pass counts `hold` and finds no work, so the worker may
// sleep and its peers get the CPU where lcores share one. What a peer handed
// over is read first on every other pass and its rings are always drained,
// so a held worker waits only for its peer to catch up. `ring_full` counts
// frames a ring still refused (it should not happen).
//
// Wake-ups: a worker that sleeps is woken by a peer that enqueued for it
// (WakeCell, site_io.h: the sleeper's flag and eventfd). Its wake_fd() is
// that eventfd, or, when its queue has a doorbell (af_packet), an epoll set
// of both; then the doorbell rings for every frame on the interface, not
// only its queue's, and a frame wakes every sleeping worker once.
//
// Threading: QueueSiteIo's rx/tx/arm_wake/disarm/set_routes on its worker's
// lcore; Handoff::stats() from any thread (each counter has one writer,
// relaxed stores).
#pragma once

#include <rte_mbuf.h>
#include <rte_ring.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "datapath/shard.h"
#include "datapath/site_io.h"

namespace rowan::gw {

struct HandoffStats {
  uint64_t out = 0;          ///< frames this worker handed to peers (copies included)
  uint64_t in = 0;           ///< frames peers handed to this worker
  uint64_t ring_full = 0;    ///< frames dropped: a peer's ring refused them
  uint64_t hold = 0;         ///< passes its queue was left unread: a peer's ring was short of room
  uint64_t broadcast = 0;    ///< frames it read that went to every worker
  uint64_t copy_nombuf = 0;  ///< copies of those that found no mbuf
};

class QueueSiteIo;

class Handoff {
 public:
  static constexpr uint32_t kRingSize = 1024;
  static constexpr uint16_t kBurst = 32;
  /// `queues[i]`: worker i's queue pair of the port (outlives this). Creates
  /// the rings and wake cells; throws std::runtime_error.
  explicit Handoff(std::vector<SiteIo*> queues);
  ~Handoff();
  Handoff(const Handoff&) = delete;
  Handoff& operator=(const Handoff&) = delete;

  uint32_t workers() const noexcept { return n_; }
  /// Worker `i`'s view of the port: its queue and what its peers hand it.
  /// Once per worker, before the workers start. Throws std::runtime_error.
  std::unique_ptr<QueueSiteIo> worker_io(uint32_t i);
  HandoffStats stats(uint32_t i) const;

 private:
  friend class QueueSiteIo;
  struct alignas(64) Counters {
    std::atomic<uint64_t> out{0}, in{0}, ring_full{0}, hold{0}, broadcast{0}, copy_nombuf{0};
  };
  rte_ring* ring(uint32_t from, uint32_t to) const noexcept { return rings_[from * n_ + to]; }

  uint32_t n_;
  std::vector<SiteIo*> queues_;
  std::vector<std::unique_ptr<WakeCell>> cells_;  ///< one per worker
  std::vector<rte_ring*> rings_;                  ///< [from * n + to]; null where from == to
  std::unique_ptr<Counters[]> counters_;          ///< one per worker, written by it
};

class QueueSiteIo final : public SiteIo {
 public:
  QueueSiteIo(Handoff& h, uint32_t self);
  ~QueueSiteIo() override;
  QueueSiteIo(const QueueSiteIo&) = delete;
  QueueSiteIo& operator=(const QueueSiteIo&) = delete;

  /// Frames peers handed over and frames of its own queue that this worker
  /// owns (the rest go to their owners).
  uint16_t rx(rte_mbuf** pkts, uint16_t n) noexcept override;
  /// Straight to its own TX queue.
  uint16_t tx(rte_mbuf** pkts, uint16_t n) noexcept override { return queue_.tx(pkts, n); }
  rte_mempool* pool() const noexcept override { return queue_.pool(); }
  const std::string& name() const noexcept override { return queue_.name(); }
  const std::array<uint8_t, 6>& mac() const noexcept override { return queue_.mac(); }
  PortStats stats() const override { return queue_.stats(); }
  int wake_fd() const noexcept override { return wake_fd_; }
  bool wakes_for_frames() const noexcept override { return queue_.wakes_for_frames(); }
  void arm_wake() noexcept override;
  void disarm() noexcept override;
  bool take_handed_over() noexcept override {
    const bool h = handed_;
    handed_ = false;
    return h;
  }

  /// The routes (longest prefix first) that decide split-mode hashing; on
  /// the worker's lcore (at start and after a reload).
  void set_routes(std::vector<ShardRoute> routes) { routes_ = std::move(routes); }

 private:
  /// Reads one burst of its queue (at most `n`) and shards it; returns the
  /// frames it keeps, written to `keep`.
  uint16_t read_queue(rte_mbuf** keep, uint16_t n) noexcept;
  uint16_t read_peers(rte_mbuf** pkts, uint16_t n) noexcept;

  Handoff& h_;
  uint32_t self_;
  SiteIo& queue_;
  WakeCell& cell_;
  Handoff::Counters& count_;
  std::vector<ShardRoute> routes_;
  int epoll_fd_ = -1;  ///< the cell and the queue's doorbell, when it has one
  int wake_fd_ = -1;
  uint32_t next_peer_ = 0;  ///< the peer whose ring is read first (round robin)
  bool peers_first_ = true;
  bool handed_ = false;  ///< read_queue() passed frames on since take_handed_over()
};

}  // namespace rowan::gw
