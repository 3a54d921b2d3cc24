#include "datapath/handoff.h"

#include <rte_errno.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <stdexcept>

namespace rowan::gw {
namespace {

void add(std::atomic<uint64_t>& c, uint64_t n) {
  if (n != 0) c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

std::atomic<uint32_t> g_instances{0};  // rte_ring names are global to the process

}  // namespace

Handoff::Handoff(std::vector<SiteIo*> queues)
    : n_(static_cast<uint32_t>(queues.size())),
      queues_(std::move(queues)),
      rings_(static_cast<size_t>(n_) * n_, nullptr),
      counters_(new Counters[n_]) {
  if (n_ < 2) throw std::runtime_error("queues per worker need two or more workers");
  const uint32_t id = g_instances.fetch_add(1, std::memory_order_relaxed);
  for (uint32_t i = 0; i < n_; ++i) cells_.push_back(std::make_unique<WakeCell>());
  for (uint32_t from = 0; from < n_; ++from) {
    for (uint32_t to = 0; to < n_; ++to) {
      if (from == to) continue;
      const std::string name =
          "ho" + std::to_string(id) + "_" + std::to_string(from) + "_" + std::to_string(to);
      rte_ring* r = rte_ring_create(name.c_str(), kRingSize, static_cast<int>(rte_socket_id()),
                                    RING_F_SP_ENQ | RING_F_SC_DEQ);
      if (r == nullptr) {
        for (rte_ring* x : rings_) rte_ring_free(x);
        throw std::runtime_error("rte_ring_create " + name + ": " + rte_strerror(rte_errno));
      }
      rings_[from * n_ + to] = r;
    }
  }
}

Handoff::~Handoff() {
  void* m = nullptr;
  for (rte_ring* r : rings_) {
    if (r == nullptr) continue;
    while (rte_ring_dequeue(r, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
    rte_ring_free(r);
  }
}

std::unique_ptr<QueueSiteIo> Handoff::worker_io(uint32_t i) {
  if (i >= n_) throw std::runtime_error("no worker " + std::to_string(i));
  return std::make_unique<QueueSiteIo>(*this, i);
}

HandoffStats Handoff::stats(uint32_t i) const {
  const Counters& c = counters_[i];
  HandoffStats s;
  s.out = c.out.load(std::memory_order_relaxed);
  s.in = c.in.load(std::memory_order_relaxed);
  s.ring_full = c.ring_full.load(std::memory_order_relaxed);
  s.hold = c.hold.load(std::memory_order_relaxed);
  s.broadcast = c.broadcast.load(std::memory_order_relaxed);
  s.copy_nombuf = c.copy_nombuf.load(std::memory_order_relaxed);
  return s;
}

QueueSiteIo::QueueSiteIo(Handoff& h, uint32_t self)
    : h_(h),
      self_(self),
      queue_(*h.queues_.at(self)),
      cell_(*h.cells_.at(self)),
      count_(h.counters_[self]),
      wake_fd_(cell_.fd) {
  if (queue_.wake_fd() < 0) return;
  // Both the peers' wake-ups and the queue's doorbell end a sleep: an epoll
  // set is readable when either is.
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) throw std::runtime_error("epoll_create1 for a packet worker failed");
  for (const int fd : {cell_.fd, queue_.wake_fd()}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      close(epoll_fd_);
      throw std::runtime_error("epoll_ctl for a packet worker failed");
    }
  }
  wake_fd_ = epoll_fd_;
}

QueueSiteIo::~QueueSiteIo() {
  if (epoll_fd_ >= 0) close(epoll_fd_);
}

void QueueSiteIo::arm_wake() noexcept {
  cell_.arm();
  queue_.arm_wake();
}

void QueueSiteIo::disarm() noexcept {
  cell_.disarm();
  queue_.disarm();
}

uint16_t QueueSiteIo::rx(rte_mbuf** pkts, uint16_t n) noexcept {
  // Alternate which comes first, so that neither a busy queue nor a busy
  // peer starves the other; a flow has one way in, so this reorders none.
  peers_first_ = !peers_first_;
  uint16_t k = peers_first_ ? read_peers(pkts, n) : 0;
  if (k < n) k = static_cast<uint16_t>(k + read_queue(pkts + k, static_cast<uint16_t>(n - k)));
  if (!peers_first_ && k < n) {
    k = static_cast<uint16_t>(k + read_peers(pkts + k, static_cast<uint16_t>(n - k)));
  }
  return k;
}

uint16_t QueueSiteIo::read_peers(rte_mbuf** pkts, uint16_t n) noexcept {
  uint16_t k = 0;
  const uint32_t peers = h_.n_;
  for (uint32_t step = 0; step < peers && k < n; ++step) {
    const uint32_t from = (next_peer_ + step) % peers;
    if (from == self_) continue;
    k = static_cast<uint16_t>(k + rte_ring_sc_dequeue_burst(h_.ring(from, self_),
                                                            reinterpret_cast<void**>(pkts + k),
                                                            n - k, nullptr));
  }
  next_peer_ = (next_peer_ + 1) % peers;
  add(count_.in, k);
  return k;
}

uint16_t QueueSiteIo::read_queue(rte_mbuf** keep, uint16_t n) noexcept {
  const uint32_t workers = h_.n_;
  const uint16_t want = n < Handoff::kBurst ? n : Handoff::kBurst;
  // Each frame read adds at most one entry to each outbound ring.
  for (uint32_t to = 0; to < workers; ++to) {
    if (to != self_ && rte_ring_free_count(h_.ring(self_, to)) < want) {
      add(count_.hold, 1);
      return 0;
    }
  }
  rte_mbuf* pkts[Handoff::kBurst];
  const uint16_t got = queue_.rx(pkts, want);
  if (got == 0) return 0;
  // Per peer, at most one entry per frame read: staged in `out`, one
  // enqueue each below.
  rte_mbuf* out[RTE_MAX_LCORE][Handoff::kBurst];
  uint16_t cnt[RTE_MAX_LCORE] = {};
  uint16_t kept = 0;
  uint64_t bcast = 0, nombuf = 0;
  for (uint16_t i = 0; i < got; ++i) {
    rte_mbuf* m = pkts[i];
    const uint32_t w =
        shard_of(rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m), workers, routes_);
    if (w == self_) {
      keep[kept++] = m;
    } else if (w != kAllWorkers) {
      out[w][cnt[w]++] = m;
    } else {
      ++bcast;
      for (uint32_t to = 0; to < workers; ++to) {
        if (to == self_) continue;
        rte_mbuf* c = rte_pktmbuf_copy(m, queue_.pool(), 0, UINT32_MAX);
        if (c == nullptr) {
          ++nombuf;
        } else {
          out[to][cnt[to]++] = c;
        }
      }
      keep[kept++] = m;
    }
  }
  uint64_t handed = 0, refused = 0;
  for (uint32_t to = 0; to < workers; ++to) {
    if (cnt[to] == 0) continue;
    const unsigned took = rte_ring_sp_enqueue_burst(
        h_.ring(self_, to), reinterpret_cast<void**>(out[to]), cnt[to], nullptr);
    for (unsigned j = took; j < cnt[to]; ++j) rte_pktmbuf_free(out[to][j]);
    handed += took;
    refused += cnt[to] - took;
    if (took > 0) h_.cells_[to]->wake();
  }
  if (kept < got) handed_ = true;
  add(count_.out, handed);
  add(count_.ring_full, refused);
  add(count_.broadcast, bcast);
  add(count_.copy_nombuf, nombuf);
  return kept;
}

}  // namespace rowan::gw
