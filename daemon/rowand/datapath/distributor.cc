#include "datapath/distributor.h"

#include <poll.h>
#include <rte_errno.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <stdexcept>

namespace rowan::gw {
namespace {

void add(std::atomic<uint64_t>& c, uint64_t n) {
  if (n != 0) c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

}  // namespace

WakeCell::WakeCell() : fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (fd < 0) throw std::runtime_error("eventfd for a packet worker failed");
}
WakeCell::~WakeCell() {
  if (fd >= 0) close(fd);
}
void WakeCell::arm() noexcept {
  sleeping.store(true, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  uint64_t v;
  [[maybe_unused]] const ssize_t r = read(fd, &v, sizeof v);  // empty it (EAGAIN when it is)
}
void WakeCell::wake() noexcept {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!sleeping.load(std::memory_order_relaxed)) return;
  if (!sleeping.exchange(false, std::memory_order_relaxed)) return;
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t r = write(fd, &one, sizeof one);
}

Distributor::Distributor(SiteIo& port, uint32_t workers)
    : port_(port),
      n_(workers),
      staged_(workers),
      to_worker_(new std::atomic<uint64_t>[workers]),
      worker_busy_(new std::atomic<uint64_t>[workers]) {
  for (uint32_t i = 0; i < n_; ++i) {
    to_worker_[i].store(0);
    worker_busy_[i].store(0);
    cells_.push_back(std::make_unique<WakeCell>());
    for (int dir = 0; dir < 2; ++dir) {
      const std::string name = (dir == 0 ? "wrk_rx" : "wrk_tx") + std::to_string(i);
      rte_ring* r = rte_ring_create(name.c_str(), kRingSize, static_cast<int>(rte_socket_id()),
                                    RING_F_SP_ENQ | RING_F_SC_DEQ);
      if (r == nullptr) {
        throw std::runtime_error("rte_ring_create " + name + ": " + rte_strerror(rte_errno));
      }
      (dir == 0 ? rx_ : tx_).push_back(r);
    }
  }
}

Distributor::~Distributor() {
  void* m = nullptr;
  for (rte_ring* r : rx_) {
    while (rte_ring_dequeue(r, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
    rte_ring_free(r);
  }
  for (rte_ring* r : tx_) {
    while (rte_ring_dequeue(r, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
    rte_ring_free(r);
  }
  for (Staged& s : staged_) {
    for (uint16_t i = 0; i < s.len; ++i) rte_pktmbuf_free(s.m[s.head + i]);
  }
}

std::unique_ptr<SiteIo> Distributor::worker_io(uint32_t i) {
  return std::make_unique<RingSiteIo>(port_, rx_.at(i), tx_.at(i), *cells_[i], self_);
}

bool Distributor::poll() noexcept {
  bool moved = false;
  // Per worker, at most one frame of each received one: kBurst each.
  rte_mbuf* out[RTE_MAX_LCORE][kBurst];
  uint16_t cnt[RTE_MAX_LCORE];
  for (int round = 0; round < 4; ++round) {
    // Backpressure: read a burst only when every worker's ring can take a
    // whole one (each frame adds at most one entry per ring). Otherwise the
    // frames wait in the port's queue, as they would before a busy core,
    // and this lcore goes idle (and sleeps), so that the workers get their
    // CPU where lcores share one.
    bool room = true;
    for (uint32_t i = 0; i < n_ && room; ++i) room = rte_ring_free_count(rx_[i]) >= kBurst;
    if (!room) {
      add(backpressure_, 1);
      break;
    }
    rte_mbuf* pkts[kBurst];
    const uint16_t n = port_.rx(pkts, kBurst);
    if (n == 0) break;
    moved = true;
    std::fill(cnt, cnt + n_, 0);
    uint64_t bcast = 0, nombuf = 0;
    for (uint16_t k = 0; k < n; ++k) {
      rte_mbuf* m = pkts[k];
      const uint32_t w =
          shard_of(rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m), n_, routes_);
      if (w != kAllWorkers) {
        out[w][cnt[w]++] = m;
        continue;
      }
      ++bcast;
      for (uint32_t i = 1; i < n_; ++i) {
        rte_mbuf* c = rte_pktmbuf_copy(m, port_.pool(), 0, UINT32_MAX);
        if (c == nullptr) {
          ++nombuf;
        } else {
          out[i][cnt[i]++] = c;
        }
      }
      out[0][cnt[0]++] = m;
    }
    for (uint32_t i = 0; i < n_; ++i) {
      if (cnt[i] == 0) continue;
      const unsigned took =
          rte_ring_sp_enqueue_burst(rx_[i], reinterpret_cast<void**>(out[i]), cnt[i], nullptr);
      for (unsigned j = took; j < cnt[i]; ++j) rte_pktmbuf_free(out[i][j]);
      add(to_worker_[i], took);
      add(worker_busy_[i], cnt[i] - took);
      if (took > 0) cells_[i]->wake();
    }
    add(rx_count_, n);
    add(broadcast_, bcast);
    add(copy_nombuf_, nombuf);
    if (n < kBurst) break;
  }
  // The workers' frames toward the site, each worker's in its order.
  uint64_t sent_total = 0;
  for (uint32_t i = 0; i < n_; ++i) {
    Staged& s = staged_[i];
    for (int round = 0; round < 4; ++round) {
      if (s.len == 0) {
        s.head = 0;
        s.len = static_cast<uint16_t>(rte_ring_sc_dequeue_burst(
            tx_[i], reinterpret_cast<void**>(s.m.data()), kBurst, nullptr));
        if (s.len == 0) break;
      }
      const uint16_t sent = port_.tx(s.m.data() + s.head, s.len);
      s.head = static_cast<uint16_t>(s.head + sent);
      s.len = static_cast<uint16_t>(s.len - sent);
      sent_total += sent;
      if (sent > 0) moved = true;
      if (s.len > 0) break;  // the port is busy: the rest on the next pass
    }
  }
  add(tx_count_, sent_total);
  return moved;
}

void Distributor::arm_wake() noexcept {
  self_.arm();
  port_.arm_wake();
}

void Distributor::wait(Duration d) noexcept {
  pollfd fds[2] = {{self_.fd, POLLIN, 0}, {port_.wake_fd(), POLLIN, 0}};
  const timespec ts{d.ns() / 1000000000, d.ns() % 1000000000};
  ppoll(fds, port_.wake_fd() >= 0 ? 2 : 1, &ts, nullptr);
  self_.disarm();
}

DistributorStats Distributor::stats() const {
  DistributorStats s;
  s.rx_packets = rx_count_.load(std::memory_order_relaxed);
  s.tx_packets = tx_count_.load(std::memory_order_relaxed);
  s.broadcast = broadcast_.load(std::memory_order_relaxed);
  s.copy_nombuf = copy_nombuf_.load(std::memory_order_relaxed);
  s.backpressure = backpressure_.load(std::memory_order_relaxed);
  for (uint32_t i = 0; i < n_; ++i) {
    s.to_worker.push_back(to_worker_[i].load(std::memory_order_relaxed));
    s.worker_busy.push_back(worker_busy_[i].load(std::memory_order_relaxed));
  }
  return s;
}

}  // namespace rowan::gw
