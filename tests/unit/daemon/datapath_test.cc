// The packet workers' data path without a NIC, root or namespaces
// (site_io.h): real mbufs from a real mempool (EAL with --no-huge), the
// software distributor between a MemorySiteIo "port" and its workers'
// rings, queues per worker (a MemorySiteIo per queue) with the hand-over
// between workers, and two Gateways forwarding over UDP on 127.0.0.1.
#include <poll.h>
#include <rte_eal.h>
#include <rte_mbuf.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "base/clock.h"
#include "config/config.h"
#include "crypto/keys.h"
#include "datapath/distributor.h"
#include "datapath/dpdk_port.h"
#include "datapath/flow_table.h"
#include "datapath/handoff.h"
#include "datapath/shard.h"
#include "datapath/worker.h"
#include "memory_site_io.h"
#include "net/vlan.h"
#include "test_frames.h"
#include "tools/fake_clock.h"
#include "tools/temp_dir.h"

namespace rowan::gw {
namespace {

using frames::arp;
using frames::frame4;
using frames::MacBytes;
using wire::load_be16;

constexpr uint32_t kHostA = 0xC612010A;  // 198.18.1.10
constexpr uint32_t kHostB = 0xC612020A;  // 198.18.2.10
constexpr uint32_t kGwB = 0xC6120201;    // 198.18.2.1
constexpr MacBytes kMacA = {0x02, 0, 0, 0, 0x0A, 0x01};
constexpr MacBytes kMacB = {0x02, 0, 0, 0, 0x0B, 0x01};
constexpr MacBytes kHostMacA = {0x02, 0, 0, 0, 0x0A, 0x10};
constexpr MacBytes kHostMacB = {0x02, 0, 0, 0, 0x0B, 0x10};

rte_mempool* g_pool = nullptr;
std::string g_eal_error;

class Eal : public ::testing::Environment {
 public:
  void SetUp() override {
    std::vector<std::string> args = {"datapath_test",
                                     "--no-huge",
                                     "--no-pci",
                                     "-m",
                                     "128",
                                     "--lcores=0",
                                     "--log-level=lib.eal:error",
                                     "--file-prefix=rowan-dp-test-" + std::to_string(getpid())};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    if (rte_eal_init(static_cast<int>(argv.size()), argv.data()) < 0) {
      g_eal_error = "rte_eal_init failed (no --no-huge memory?)";
      return;
    }
    g_pool = rte_pktmbuf_pool_create("dp_test", 8191, 0, 0, 2048 + RTE_PKTMBUF_HEADROOM,
                                     static_cast<int>(rte_socket_id()));
    if (g_pool == nullptr) g_eal_error = "no mbuf pool";
  }
  void TearDown() override { rte_eal_cleanup(); }
};
const auto* const g_env = ::testing::AddGlobalTestEnvironment(new Eal);

#define NEED_EAL()                                      \
  do {                                                  \
    if (g_pool == nullptr) GTEST_SKIP() << g_eal_error; \
  } while (0)

uint32_t psn_of(const std::vector<uint8_t>& f) {
  const uint8_t* bth = f.data() + 14 + 20 + 8;
  return (uint32_t{bth[9]} << 16) | (uint32_t{bth[10]} << 8) | bth[11];
}
uint32_t qp_of(const std::vector<uint8_t>& f) {
  const uint8_t* bth = f.data() + 14 + 20 + 8;
  return (uint32_t{bth[5]} << 16) | (uint32_t{bth[6]} << 8) | bth[7];
}
// The IP packet of an Ethernet frame, as bytes in a string: the multisets
// below compare these, and GCC 12 at -O3 reports a false -Wstringop-overread
// in std::vector<uint8_t>'s operator<=> (its memcmp bound from the vectors'
// sizes) inlined into std::multiset's insert.
std::string ip_packet(const std::vector<uint8_t>& frame) {
  if (frame.size() < 14) {
    ADD_FAILURE() << "a " << frame.size() << "-byte frame";
    return {};
  }
  return {frame.begin() + 14, frame.end()};
}
std::vector<uint8_t> bytes_of(rte_mbuf* m) {
  const auto* p = rte_pktmbuf_mtod(m, const uint8_t*);
  std::vector<uint8_t> v(p, p + rte_pktmbuf_data_len(m));
  rte_pktmbuf_free(m);
  return v;
}

// Numbered frames (consecutive PSNs) on 64 QPs, interleaved as a port would
// see them, through the distributor to 2 workers: each QP lands on one
// worker and in PSN order, and the QPs spread with Jain >= 0.9.
TEST(Distributor, SixtyFourQpsInOrderOnTwoWorkersAndSpread) {
  NEED_EAL();
  MemorySiteIo port(g_pool, "mem0", kMacA);
  Distributor d(port, 2);
  std::vector<std::unique_ptr<SiteIo>> w;
  for (uint32_t i = 0; i < 2; ++i) w.push_back(d.worker_io(i));
  constexpr uint32_t kQps = 64, kFrames = 40;
  std::map<uint32_t, uint32_t> next_psn, worker_of;
  std::vector<double> per_worker(2, 0);
  for (uint32_t i = 0; i < kFrames; ++i) {
    for (uint32_t q = 0; q < kQps; ++q) {
      ASSERT_TRUE(port.inject(
          frame4(kHostA, kHostB, 17, static_cast<uint16_t>(49152 + q), 4791, 0x100 + q, i, kMacA)));
    }
    // Poll and drain as the loops would, with RX rings that never overflow.
    while (port.rx_pending() > 0) {
      d.poll();
      for (uint32_t k = 0; k < 2; ++k) {
        rte_mbuf* m[32];
        uint16_t n;
        while ((n = w[k]->rx(m, 32)) > 0) {
          for (uint16_t j = 0; j < n; ++j) {
            const auto f = bytes_of(m[j]);
            const uint32_t qp = qp_of(f);
            auto [it, fresh] = worker_of.emplace(qp, k);
            EXPECT_EQ(it->second, k) << "QP " << qp << " moved between workers";
            EXPECT_EQ(psn_of(f), next_psn[qp]) << "QP " << qp << " reordered";
            next_psn[qp] = psn_of(f) + 1;
            per_worker[k] += 1;
          }
        }
      }
    }
  }
  ASSERT_EQ(next_psn.size(), kQps);
  for (const auto& [qp, psn] : next_psn) EXPECT_EQ(psn, kFrames) << "QP " << qp;
  EXPECT_GE(jain_index(per_worker), 0.9) << per_worker[0] << " / " << per_worker[1];
  const DistributorStats s = d.stats();
  EXPECT_EQ(s.rx_packets, kQps * kFrames);
  EXPECT_EQ(s.to_worker[0] + s.to_worker[1], kQps * kFrames);
}

// ARP reaches every worker (each keeps its neighbours), a full worker ring
// holds the port back (nothing read and dropped), and the workers' TX
// reaches the port in each worker's order even when the port takes only
// part of a burst.
TEST(Distributor, BroadcastsArpHoldsThePortForAFullRingAndKeepsTxOrder) {
  NEED_EAL();
  MemorySiteIo port(g_pool, "mem0", kMacA);
  Distributor d(port, 2);
  auto w0 = d.worker_io(0), w1 = d.worker_io(1);
  ASSERT_TRUE(
      port.inject(arp(1, kHostMacA, kHostA, 0xC6120101, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff})));
  d.poll();
  rte_mbuf* m[64];
  ASSERT_EQ(w0->rx(m, 64), 1);
  rte_pktmbuf_free(m[0]);
  ASSERT_EQ(w1->rx(m, 64), 1);
  rte_pktmbuf_free(m[0]);
  EXPECT_EQ(d.stats().broadcast, 1u);

  // One QP only, never drained: once its worker's ring cannot take a whole
  // burst the distributor stops reading (backpressure); the frames wait in
  // the port, none is dropped, and they flow once the worker drains.
  const uint32_t total = Distributor::kRingSize + 100;
  for (uint32_t i = 0; i < total; ++i) {
    ASSERT_TRUE(port.inject(frame4(kHostA, kHostB, 17, 50000, 4791, 7, i, kMacA)));
  }
  for (int pass = 0; pass < 100; ++pass) d.poll();
  DistributorStats s = d.stats();
  EXPECT_EQ(s.worker_busy[0] + s.worker_busy[1], 0u);
  EXPECT_GT(s.backpressure, 0u);
  EXPECT_GT(port.rx_pending(), 100u) << "the port kept what the worker could not take";
  EXPECT_LE(s.rx_packets, uint64_t{Distributor::kRingSize});
  SiteIo& full = s.to_worker[0] > 1 ? *w0 : *w1;  // beyond the ARP copy
  uint32_t next = 0;
  for (int pass = 0; pass < 1000 && next < total; ++pass) {
    d.poll();
    uint16_t n;
    while ((n = full.rx(m, 64)) > 0) {
      for (uint16_t j = 0; j < n; ++j) {
        EXPECT_EQ(psn_of(bytes_of(m[j])), next) << "in order, none lost";
        ++next;
      }
    }
  }
  EXPECT_EQ(next, total);

  // TX: the port takes 5 frames per pass; every frame comes out, in order.
  std::vector<rte_mbuf*> out;
  for (uint32_t i = 0; i < 50; ++i) {
    rte_mbuf* x = rte_pktmbuf_alloc(g_pool);
    const auto f = frame4(kHostB, kHostA, 17, 50000, 4791, 9, i, kHostMacA);
    std::memcpy(rte_pktmbuf_append(x, static_cast<uint16_t>(f.size())), f.data(), f.size());
    out.push_back(x);
  }
  ASSERT_EQ(w1->tx(out.data(), 50), 50);
  std::vector<std::vector<uint8_t>> sent;
  for (int pass = 0; pass < 100 && sent.size() < 50; ++pass) {
    port.set_tx_budget(5);
    d.poll();
    for (auto& f : port.take_sent()) sent.push_back(std::move(f));
  }
  ASSERT_EQ(sent.size(), 50u);
  for (uint32_t i = 0; i < 50; ++i) EXPECT_EQ(psn_of(sent[i]), i);
}

// How many queue pairs the port opens: one per worker only with two or
// more workers, local.queues = "auto" and a port that has that many.
TEST(QueuesPerWorker, APortOpensAQueuePerWorkerOnlyWhenItHasThem) {
  EXPECT_EQ(workers_for(1), 1u);
  EXPECT_EQ(workers_for(2), 1u);
  EXPECT_EQ(workers_for(3), 2u);
  EXPECT_EQ(workers_for(5), 4u);
  EXPECT_EQ(queue_pairs_for(QueueMode::kAuto, 1, 8, 8), 1);
  EXPECT_EQ(queue_pairs_for(QueueMode::kAuto, 2, 8, 8), 2);
  EXPECT_EQ(queue_pairs_for(QueueMode::kAuto, 4, 4, 4), 4);
  EXPECT_EQ(queue_pairs_for(QueueMode::kAuto, 4, 4, 2), 1) << "too few TX queues";
  EXPECT_EQ(queue_pairs_for(QueueMode::kAuto, 2, 1, 1), 1) << "a vdev with one queue";
  EXPECT_EQ(queue_pairs_for(QueueMode::kDistributor, 2, 8, 8), 1);
}

// A port with a queue per worker, as RSS fills it: one MemorySiteIo per
// queue, and a queue picked per flow by a hash of the UDP source port that
// is not shard.h's (a NIC's Toeplitz or the kernel's fanout hash are not).
struct MultiQueuePort {
  explicit MultiQueuePort(uint32_t n) {
    for (uint32_t i = 0; i < n; ++i) {
      queues.push_back(std::make_unique<MemorySiteIo>(g_pool, "mq" + std::to_string(i), kMacA));
    }
  }
  static uint32_t queue_of(uint16_t sport, uint32_t n) { return ((sport * 40503U) >> 7) % n; }
  std::vector<SiteIo*> ios() const {
    std::vector<SiteIo*> v;
    for (const auto& q : queues) v.push_back(q.get());
    return v;
  }
  size_t pending() const {
    size_t p = 0;
    for (const auto& q : queues) p += q->rx_pending();
    return p;
  }
  std::vector<std::unique_ptr<MemorySiteIo>> queues;
};

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

// Numbered frames on 64 QPs sprayed over 2 queues by the port's own hash,
// 2 workers each reading its queue: every QP's frames reach the worker
// shard.h names for it, in PSN order; the QPs spread with Jain >= 0.9, and
// both workers handed frames over (the port's hash is not shard.h's).
TEST(QueuesPerWorker, SixtyFourQpsReachTheirOwnerInOrderAndSpread) {
  NEED_EAL();
  constexpr uint32_t kWorkers = 2, kQps = 64, kFrames = 40;
  MultiQueuePort port(kWorkers);
  Handoff h(port.ios());
  std::vector<std::unique_ptr<QueueSiteIo>> w;
  for (uint32_t i = 0; i < kWorkers; ++i) w.push_back(h.worker_io(i));
  std::map<uint32_t, uint32_t> next_psn;
  std::vector<double> per_worker(kWorkers, 0);
  uint32_t misrouted_by_port = 0;  // QPs whose queue is not their owner
  for (uint32_t q = 0; q < kQps; ++q) {
    const auto f =
        frame4(kHostA, kHostB, 17, static_cast<uint16_t>(49152 + q), 4791, 0x100 + q, 0, kMacA);
    const uint32_t owner = shard_of(f.data(), static_cast<uint32_t>(f.size()), kWorkers, {});
    if (owner != MultiQueuePort::queue_of(static_cast<uint16_t>(49152 + q), kWorkers)) {
      ++misrouted_by_port;
    }
  }
  ASSERT_GE(misrouted_by_port, kQps / 4) << "the port's hash must differ from shard.h's";
  for (uint32_t i = 0; i < kFrames; ++i) {
    for (uint32_t q = 0; q < kQps; ++q) {
      const auto sport = static_cast<uint16_t>(49152 + q);
      ASSERT_TRUE(port.queues[MultiQueuePort::queue_of(sport, kWorkers)]->inject(
          frame4(kHostA, kHostB, 17, sport, 4791, 0x100 + q, i, kMacA)));
    }
    // Each worker's loop in turn, until the queues and the rings are empty.
    for (int pass = 0; pass < 1000; ++pass) {
      bool moved = false;
      for (uint32_t k = 0; k < kWorkers; ++k) {
        rte_mbuf* m[32];
        const uint16_t n = w[k]->rx(m, 32);
        moved = w[k]->take_handed_over() || n > 0 || moved;
        for (uint16_t j = 0; j < n; ++j) {
          const auto f = bytes_of(m[j]);
          const uint32_t qp = qp_of(f);
          EXPECT_EQ(shard_of(f.data(), static_cast<uint32_t>(f.size()), kWorkers, {}), k)
              << "QP " << qp << " at a worker that does not own it";
          EXPECT_EQ(psn_of(f), next_psn[qp]) << "QP " << qp << " reordered";
          next_psn[qp] = psn_of(f) + 1;
          per_worker[k] += 1;
        }
      }
      if (!moved && port.pending() == 0) break;
    }
  }
  ASSERT_EQ(next_psn.size(), kQps);
  for (const auto& [qp, psn] : next_psn) EXPECT_EQ(psn, kFrames) << "QP " << qp;
  EXPECT_GE(jain_index(per_worker), 0.9) << per_worker[0] << " / " << per_worker[1];
  uint64_t out = 0, in = 0;
  for (uint32_t k = 0; k < kWorkers; ++k) {
    const HandoffStats hs = h.stats(k);
    EXPECT_GT(hs.out, 0u) << "worker " << k;
    EXPECT_EQ(hs.ring_full, 0u);
    out += hs.out;
    in += hs.in;
  }
  EXPECT_EQ(out, in);
  EXPECT_EQ(out, uint64_t{misrouted_by_port} * kFrames);
}

// ARP read from any queue reaches every worker; a worker whose ring toward
// a peer is short of room leaves its queue unread (nothing dropped) until
// the peer drains; a sleeping worker is woken by a peer's hand-over; TX goes
// to the worker's own queue.
TEST(QueuesPerWorker, ArpReachesEveryWorkerHoldsForAFullRingWakesAndSendsOnItsQueue) {
  NEED_EAL();
  MultiQueuePort port(3);
  Handoff h(port.ios());
  std::vector<std::unique_ptr<QueueSiteIo>> w;
  for (uint32_t i = 0; i < 3; ++i) w.push_back(h.worker_io(i));
  rte_mbuf* m[64];
  ASSERT_TRUE(port.queues[1]->inject(
      arp(1, kHostMacA, kHostA, 0xC6120101, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff})));
  for (uint32_t k : {1U, 0U, 2U}) {
    ASSERT_EQ(w[k]->rx(m, 64), 1) << "worker " << k;
    EXPECT_EQ(load_be16(rte_pktmbuf_mtod(m[0], const uint8_t*) + 12), 0x0806);
    rte_pktmbuf_free(m[0]);
  }
  EXPECT_EQ(h.stats(1).broadcast, 1u);
  EXPECT_EQ(h.stats(1).out, 2u);

  // One QP that worker 2 owns, all on queue 0; worker 2 sleeps.
  uint16_t sport = 40000;
  for (;; ++sport) {
    const auto f = frame4(kHostA, kHostB, 17, sport, 4791, 7, 0, kMacA);
    if (shard_of(f.data(), static_cast<uint32_t>(f.size()), 3, {}) == 2) break;
  }
  w[2]->arm_wake();
  EXPECT_FALSE(readable(w[2]->wake_fd()));
  const uint32_t total = Handoff::kRingSize + 100;
  for (uint32_t i = 0; i < total; ++i) {
    ASSERT_TRUE(port.queues[0]->inject(frame4(kHostA, kHostB, 17, sport, 4791, 7, i, kMacA)));
  }
  for (int pass = 0; pass < 100; ++pass) EXPECT_EQ(w[0]->rx(m, 32), 0);
  EXPECT_TRUE(readable(w[2]->wake_fd())) << "worker 0's hand-over wakes the sleeping worker 2";
  w[2]->disarm();
  EXPECT_EQ(h.stats(0).ring_full, 0u);
  EXPECT_GT(h.stats(0).hold, 0u);
  EXPECT_GT(port.queues[0]->rx_pending(), 100u) << "the queue kept what the ring could not take";
  uint32_t next = 0;
  for (int pass = 0; pass < 1000 && next < total; ++pass) {
    w[0]->rx(m, 32);
    uint16_t n;
    while ((n = w[2]->rx(m, 64)) > 0) {
      for (uint16_t j = 0; j < n; ++j) {
        EXPECT_EQ(psn_of(bytes_of(m[j])), next) << "in order, none lost";
        ++next;
      }
    }
  }
  EXPECT_EQ(next, total);
  EXPECT_EQ(h.stats(2).in, total + 1);  // and the ARP copy

  // TX: straight to the worker's own queue.
  rte_mbuf* x = rte_pktmbuf_alloc(g_pool);
  const auto f = frame4(kHostB, kHostA, 17, 50000, 4791, 9, 0, kHostMacA);
  std::memcpy(rte_pktmbuf_append(x, static_cast<uint16_t>(f.size())), f.data(), f.size());
  ASSERT_EQ(w[1]->tx(&x, 1), 1);
  EXPECT_EQ(port.queues[1]->take_sent().size(), 1u);
  EXPECT_TRUE(port.queues[0]->take_sent().empty());
}

// `local_extra` and `route_extra`: more keys for [local] and the [[route]].
GatewayConfig config_for(char site, uint16_t port, uint16_t peer_port,
                         const std::string& local_extra = "", const std::string& route_extra = "") {
  const bool a = site == 'a';
  const std::string text =
      std::string("[local]\ndevice = \"mem0\"\naddress = \"198.18.") + (a ? "1" : "2") +
      ".1\"\nprefix_len = 24\ninsecure = true\n" + local_extra + "\n" +
      "[[wan.link]]\nname = \"wan0\"\nbackend = \"udp\"\nbind = \"127.0.0.1:" +
      std::to_string(port) + "\"\nrate = \"1gbit\"\nrtt = \"1ms\"\n\n" +
      "[[peer]]\nname = \"site-" + (a ? "b" : "a") +
      "\"\nendpoint = \"127.0.0.1:" + std::to_string(peer_port) + "\"\n\n" +
      "[[route]]\nprefix = \"198.18." + (a ? "2" : "1") + ".0/24\"\npeer = \"site-" +
      (a ? "b" : "a") + "\"\n" + route_extra + "\n[metrics]\nenabled = false\n";
  return parse_config(text, std::string("gw-") + site + ".toml");
}

// A pair of UDP ports on 127.0.0.1 for gateways A and B (base, base + 1),
// from the test's pid, and another pair for each of the next two tests in
// the same process: a closed io_uring socket lets go of its port a moment
// later, so the next test must not bind the same one.
uint16_t gateway_ports() {
  static int uses = 0;
  return static_cast<uint16_t>(40000 + (getpid() % 4000) * 6 + 2 * (uses++ % 3));
}

// `n` frames of one flow from site A's host to site B's, 40-1439 bytes,
// frame i ending in i (4 bytes, host order).
std::vector<std::vector<uint8_t>> numbered_frames(uint32_t n) {
  std::vector<std::vector<uint8_t>> sent;
  for (uint32_t i = 0; i < n; ++i) {
    auto f = frame4(kHostA, kHostB, 17, 40000, 9, 0, 0, kMacA, kHostMacA, 40 + (i * 97) % 1400);
    std::memcpy(f.data() + f.size() - 4, &i, 4);
    sent.push_back(std::move(f));
  }
  return sent;
}

// Every frame of `sent` came out, in its order, with its IP packet intact.
void expect_same_packets(const std::vector<std::vector<uint8_t>>& out,
                         const std::vector<std::vector<uint8_t>>& sent) {
  ASSERT_EQ(out.size(), sent.size());
  for (size_t i = 0; i < sent.size(); ++i) {
    ASSERT_EQ(std::vector<uint8_t>(out[i].begin() + 14, out[i].end()),
              std::vector<uint8_t>(sent[i].begin() + 14, sent[i].end()))
        << "frame " << i;
  }
}

// Gateways A and B over UDP on 127.0.0.1, each with a MemorySiteIo site port.
struct TwoGateways {
  uint16_t base = gateway_ports();
  MemorySiteIo site_a{g_pool, "mem-a", kMacA};
  MemorySiteIo site_b{g_pool, "mem-b", kMacB};
  MonotonicClock clock;
  Worker a{config_for('a', base, static_cast<uint16_t>(base + 1)), site_a, clock};
  Worker b{config_for('b', static_cast<uint16_t>(base + 1), base), site_b, clock};

  /// One pass: up to `burst` more of `frames` into site A (from `*next` on,
  /// while its ring takes them), both gateways polled, B's ARP requests for
  /// its host answered, and every other frame B sent handed to `on_frame`.
  template <typename F>
  void pass(const std::vector<std::vector<uint8_t>>& frames, size_t* next, int burst,
            F&& on_frame) {
    for (int k = 0; k < burst && *next < frames.size(); ++k) {
      if (!site_a.inject(frames[*next])) break;
      ++*next;
    }
    const TimePoint now = clock.now();
    a.poll(now);
    b.poll(now);
    for (auto& f : site_b.take_sent()) {
      if (f[12] == 0x08 && f[13] == 0x06) {
        EXPECT_TRUE(site_b.inject(arp(2, kHostMacB, kHostB, kGwB, kMacB)));
      } else {
        on_frame(std::move(f));
      }
    }
  }
};

// Two gateways over UDP on 127.0.0.1: a frame from site A's host comes out
// of gateway B toward site B's host, byte for byte in its IP packet, once B
// has resolved the host by ARP; a frame with no route is dropped and counted.
TEST(Forwarding, AFrameCrossesTwoGatewaysAndBResolvesItsHost) {
  NEED_EAL();
  TwoGateways g;
  const auto sent = frame4(kHostA, kHostB, 17, 40000, 9, 0, 0, kMacA, kHostMacA, 200);
  ASSERT_TRUE(g.site_a.inject(sent));
  ASSERT_TRUE(g.site_a.inject(frame4(kHostA, 0xC6120901, 17, 40000, 9, 0, 0, kMacA, kHostMacA)));
  std::vector<std::vector<uint8_t>> out;
  bool answered = false;
  for (int i = 0; i < 20000 && out.empty(); ++i) {
    const TimePoint now = g.clock.now();
    g.a.poll(now);
    g.b.poll(now);
    for (auto& f : g.site_b.take_sent()) {
      if (f[12] == 0x08 && f[13] == 0x06) {  // B asks for its host: answer
        EXPECT_EQ(f[14 + 7], 1) << "an ARP request";
        ASSERT_TRUE(g.site_b.inject(arp(2, kHostMacB, kHostB, kGwB, kMacB)));
        answered = true;
      } else {
        out.push_back(std::move(f));
      }
    }
    usleep(100);
  }
  EXPECT_TRUE(answered) << "gateway B never asked for its host";
  ASSERT_EQ(out.size(), 1u) << "nothing came out of gateway B";
  const std::vector<uint8_t>& f = out.front();
  EXPECT_EQ(std::vector<uint8_t>(f.begin(), f.begin() + 6),
            std::vector<uint8_t>(kHostMacB.begin(), kHostMacB.end()));
  EXPECT_EQ(std::vector<uint8_t>(f.begin() + 6, f.begin() + 12),
            std::vector<uint8_t>(kMacB.begin(), kMacB.end()));
  EXPECT_EQ(std::vector<uint8_t>(f.begin() + 14, f.end()),
            std::vector<uint8_t>(sent.begin() + 14, sent.end()));
  EXPECT_EQ(g.a.counters().drops[static_cast<size_t>(Drop::kNoRoute)], 1u);
  EXPECT_EQ(g.a.counters().flows_created, 1u);
  // What the control socket shows: the flow (rendered on the calling
  // thread from the published records) and the worker's counters.
  g.a.publish(g.clock.now());
  const auto flows = g.a.snapshot("flows", Duration::zero());
  ASSERT_EQ(flows.size(), 1u);
  EXPECT_EQ(flows[0]["kind"], "udp");
  EXPECT_EQ(flows[0]["src"], "198.18.1.10");
  EXPECT_EQ(flows[0]["packets"], 1u);
  const auto status = g.a.snapshot("status", Duration::zero());
  EXPECT_EQ(status["worker"]["rx_packets"], 2u);
  EXPECT_EQ(status["worker"]["active_flows"], 1u);
}

// The flow cache (Worker::flow_hint): a train of frames of one QP is
// classified once; a frame of another QP, or the same QP from another UDP
// source port, is not taken for the cached flow; a reload that removes the
// route and an expiry that frees the flow's slot both clear the cache.
TEST(Forwarding, TheFlowCacheTakesATrainOfOneFlowAndNothingElse) {
  NEED_EAL();
  TwoGateways g;
  auto roce = [](uint16_t sport, uint32_t qp) {
    return frame4(kHostA, kHostB, 17, sport, 4791, qp, 0, kMacA, kHostMacA, 64);
  };
  auto run = [&](const std::vector<std::vector<uint8_t>>& frames, TimePoint now) {
    for (const auto& f : frames) EXPECT_TRUE(g.site_a.inject(f));
    g.a.poll(now);
  };
  const WorkerCounters& c = g.a.counters();
  const TimePoint t0 = g.clock.now();
  run({roce(50000, 0x11), roce(50000, 0x11), roce(50000, 0x11), roce(50000, 0x11),
       roce(50000, 0x12), roce(50001, 0x11),
       frame4(kHostA, kHostB, 17, 50000, 9, 0, 0, kMacA, kHostMacA)},
      t0);
  EXPECT_EQ(c.flows_created, 3u);    // QP 0x11, QP 0x12, UDP port 9
  EXPECT_EQ(c.flow_cache_hits, 3u);  // frames 2-4
  g.a.publish(t0);
  std::map<uint64_t, uint64_t> packets;  // QP -> packets carried
  for (const auto& f : g.a.snapshot("flows", Duration::zero())) {
    packets[f.value("dest_qp", 0u)] += f["packets"].get<uint64_t>();
  }
  EXPECT_EQ(packets[0x11], 5u);
  EXPECT_EQ(packets[0x12], 1u);

  // The route goes: the next frame of the cached flow meets no route.
  GatewayConfig cfg = config_for('a', g.base, static_cast<uint16_t>(g.base + 1));
  GatewayConfig moved = cfg;
  moved.routes[0].prefix = *parse_prefix("198.18.7.0/24");
  g.a.reload(moved);
  run({roce(50000, 0x11)}, t0);
  EXPECT_EQ(c.drops[static_cast<size_t>(Drop::kNoRoute)], 1u);
  g.a.reload(cfg);
  run({roce(50000, 0x12), roce(50000, 0x12)}, t0);
  EXPECT_EQ(c.flow_cache_hits, 4u);

  // Every flow expires: the cached QP's next frame is a new flow, not the
  // freed slot the cache pointed at.
  const TimePoint later = t0 + cfg.wan.flow_idle_timeout + Duration::from_s(1);
  g.a.poll(later);
  EXPECT_EQ(g.a.counters().flows_expired, 3u);
  run({roce(50000, 0x12)}, later);
  EXPECT_EQ(c.flows_created, 4u);
  EXPECT_EQ(c.flow_cache_hits, 4u);
  g.a.publish(later);
  EXPECT_EQ(g.a.snapshot("status", Duration::zero())["worker"]["active_flows"], 1u);
}

// Records come out of gateway B straight from the datagrams they arrived in
// (Worker::take_in_order, one copy into the site mbuf) while its port keeps
// up, and through the stream's buffer while it does not (a port that takes
// nothing for a while): 2400 numbered frames of many sizes on one flow leave
// B intact and in their order either way.
TEST(Forwarding, RecordsGoStraightFromTheDatagramAndInOrderWhenThePortFallsBehind) {
  NEED_EAL();
  TwoGateways g;
  constexpr uint32_t kFrames = 2400;
  const auto sent = numbered_frames(kFrames);
  std::vector<std::vector<uint8_t>> out;
  size_t injected = 0;
  for (int step = 0; step < 40000 && out.size() < kFrames; ++step) {
    // The port takes nothing while frames 200-1999 are being sent: B's
    // queue toward it (1024 frames) and the records it may hold in their
    // mbufs (512) fill, and the rest stays in the stream's buffer.
    g.site_b.set_tx_budget(injected >= 200 && injected < 2000 ? 0 : 1u << 20);
    g.pass(sent, &injected, 8, [&](std::vector<uint8_t>&& f) { out.push_back(std::move(f)); });
    usleep(50);
  }
  expect_same_packets(out, sent);
  g.b.publish(g.clock.now());
  const auto peers = g.b.snapshot("peers", Duration::zero());
  const uint64_t received = peers[0]["stream_bytes_received"].get<uint64_t>();
  const uint64_t in_place = peers[0]["stream_bytes_read_in_place"].get<uint64_t>();
  EXPECT_GT(in_place, 0u) << peers.dump();
  EXPECT_LT(in_place, received) << peers.dump();
  EXPECT_EQ(peers[0]["delivered_packets"], kFrames);
}

// 700 flows with 4 frames each, the flows interleaved and the frames
// 700-1400 bytes, so that most streams hold a record split over two
// datagrams at once: more than the 512 site mbufs a worker may hold in
// records in place, so some streams keep theirs in the stream's buffer.
// Every frame arrives intact, and each flow's in its order.
TEST(Forwarding, ManyFlowsWithSplitRecordsArriveInOrderPastTheMbufBound) {
  NEED_EAL();
  TwoGateways g;
  constexpr uint32_t kFlows = 700, kPerFlow = 4;
  std::vector<std::vector<uint8_t>> sent;
  for (uint32_t k = 0; k < kPerFlow; ++k) {
    for (uint32_t fl = 0; fl < kFlows; ++fl) {
      const uint32_t len = 700 + (fl * 131 + k * 97) % 700;
      auto f = frame4(kHostA, kHostB, 17, static_cast<uint16_t>(20000 + fl), 9, 0, 0, kMacA,
                      kHostMacA, len);
      const uint32_t tag = fl << 8 | k;
      std::memcpy(f.data() + f.size() - 4, &tag, 4);
      sent.push_back(std::move(f));
    }
  }
  std::map<uint32_t, std::vector<uint32_t>> order;  // flow -> frame numbers seen
  std::map<uint32_t, std::vector<uint8_t>> by_tag;
  for (const auto& f : sent) {
    uint32_t tag = 0;
    std::memcpy(&tag, f.data() + f.size() - 4, 4);
    by_tag[tag] = std::vector<uint8_t>(f.begin() + 14, f.end());
  }
  size_t injected = 0, got = 0;
  uint64_t bad = 0;
  for (int step = 0; step < 40000 && got < sent.size(); ++step) {
    g.pass(sent, &injected, 16, [&](std::vector<uint8_t>&& f) {
      uint32_t tag = 0;
      std::memcpy(&tag, f.data() + f.size() - 4, 4);
      const auto it = by_tag.find(tag);
      if (it == by_tag.end() || std::vector<uint8_t>(f.begin() + 14, f.end()) != it->second) {
        ++bad;
      }
      order[tag >> 8].push_back(tag & 0xff);
      ++got;
    });
    usleep(50);
  }
  EXPECT_EQ(got, sent.size());
  EXPECT_EQ(bad, 0u);
  for (const auto& [flow, seen] : order) {
    std::vector<uint32_t> want(kPerFlow);
    std::iota(want.begin(), want.end(), 0u);
    EXPECT_EQ(seen, want) << "flow " << flow;
  }
  g.b.publish(g.clock.now());
  const auto peers = g.b.snapshot("peers", Duration::zero());
  EXPECT_GT(peers[0]["stream_bytes_read_in_place"].get<uint64_t>(), 0u) << peers.dump();
}

// A site port that takes a few frames at a time, often none, behind 16
// flows: B's queue toward it keeps filling while records wait in their mbufs
// (taken straight from datagrams) and in the streams. Every record B's
// transport acknowledged reaches the host, intact and in its flow's order:
// none is dropped as local_tx_full (delivering the waiting records could
// fill the queue just before a delivery that did not check it again).
TEST(Forwarding, APortThatTakesLittleAtATimeLosesNoAcknowledgedRecord) {
  NEED_EAL();
  TwoGateways g;
  constexpr uint32_t kFlows = 16, kFrames = 6000;
  std::vector<std::vector<uint8_t>> sent;
  for (uint32_t i = 0; i < kFrames; ++i) {
    const uint32_t fl = (i * 7) % kFlows;
    auto f = frame4(kHostA, kHostB, 17, static_cast<uint16_t>(30000 + fl), 9, 0, 0, kMacA,
                    kHostMacA, 40 + (i * 131) % 1400);
    const uint32_t tag = fl << 16 | i;
    std::memcpy(f.data() + f.size() - 4, &tag, 4);
    sent.push_back(std::move(f));
  }
  std::map<uint32_t, uint32_t> last;  // flow -> last frame number seen
  uint64_t got = 0, bad = 0, reordered = 0;
  size_t injected = 0;
  uint32_t seed = 1;
  auto backlog = [&] { return g.a.counters().drops[static_cast<size_t>(Drop::kBacklog)]; };
  // B knows its host before the first record (a host's ARP request for it),
  // so no record waits for the answer.
  ASSERT_TRUE(g.site_b.inject(arp(1, kHostMacB, kHostB, kGwB, kMacB)));
  g.b.poll(g.clock.now());
  g.site_b.take_sent();  // B's answer
  for (int step = 0; step < 60000 && (injected < kFrames || got + backlog() < kFrames); ++step) {
    seed = seed * 1103515245u + 12345u;
    const uint32_t r = (seed >> 16) % 100;
    g.site_b.set_tx_budget(r < 40 ? 0 : r % 24);  // none, or up to 23 frames this pass
    g.pass(sent, &injected, 24, [&](std::vector<uint8_t>&& f) {
      uint32_t tag = 0;
      std::memcpy(&tag, f.data() + f.size() - 4, 4);
      const uint32_t i = tag & 0xffff;
      if (i >= kFrames || std::vector<uint8_t>(f.begin() + 14, f.end()) !=
                              std::vector<uint8_t>(sent[i].begin() + 14, sent[i].end())) {
        ++bad;
        return;
      }
      const auto it = last.find(tag >> 16);
      if (it != last.end() && it->second >= i) ++reordered;
      last[tag >> 16] = i;
      ++got;
    });
    usleep(20);
  }
  const WorkerCounters& b = g.b.counters();
  EXPECT_EQ(b.drops[static_cast<size_t>(Drop::kLocalTxFull)], 0u);
  EXPECT_EQ(b.drops[static_cast<size_t>(Drop::kNeighborPending)], 0u);
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(reordered, 0u);
  // What A did not drop for backlog (its send buffer full while B held
  // back), B delivered.
  EXPECT_EQ(got + backlog(), kFrames);
  EXPECT_GT(got, kFrames / 4);
  g.b.publish(g.clock.now());
  const auto peers = g.b.snapshot("peers", Duration::zero());
  EXPECT_GT(peers[0]["stream_bytes_read_in_place"].get<uint64_t>(), 0u) << peers.dump();
}

// Records for a host whose MAC is unresolved wait in their stream, not in a
// queue that overflows: 600 frames reach gateway B (in place and through the
// stream's buffer) while its host does not answer, B asks again while they
// wait (every 100 ms; the waiting streams send nothing that would ask), and
// when the host answers every frame is delivered, in order, none dropped.
// B used to queue 8 and drop the rest as neighbor_pending: acknowledged
// records lost.
TEST(Forwarding, RecordsForAnUnresolvedHostWaitInTheirStreamUntilItAnswers) {
  NEED_EAL();
  TwoGateways g;
  constexpr uint32_t kFrames = 600;
  const auto sent = numbered_frames(kFrames);
  std::vector<std::vector<uint8_t>> out;
  size_t injected = 0;
  int asked_while_silent = 0;
  TimePoint all_in;
  bool answering = false;
  for (int step = 0; step < 40000 && out.size() < kFrames; ++step) {
    for (int k = 0; k < 8 && injected < kFrames && g.site_a.inject(sent[injected]); ++k) {
      ++injected;
    }
    const TimePoint now = g.clock.now();
    g.a.poll(now);
    g.b.poll(now);
    if (injected == kFrames && all_in.is_zero()) all_in = now;
    // Silent until every frame has been in for 300 ms.
    if (!answering && !all_in.is_zero() && now - all_in >= Duration::from_ms(300)) {
      answering = true;
      g.b.publish(now);  // what an operator sees meanwhile
      const auto st = g.b.snapshot("status", Duration::zero());
      EXPECT_EQ(st["neighbors_unresolved"], 1u);
      EXPECT_GE(st["streams_waiting_for_host"].get<uint64_t>(), 1u);
    }
    for (auto& f : g.site_b.take_sent()) {
      if (f[12] == 0x08 && f[13] == 0x06) {
        if (answering) {
          ASSERT_TRUE(g.site_b.inject(arp(2, kHostMacB, kHostB, kGwB, kMacB)));
        } else if (!all_in.is_zero()) {
          ++asked_while_silent;
        }
      } else {
        out.push_back(std::move(f));
      }
    }
    if (!answering) {
      ASSERT_TRUE(out.empty()) << "a frame left B before its host answered";
    }
    usleep(50);
  }
  EXPECT_GE(asked_while_silent, 2) << "B did not ask again while records waited";
  expect_same_packets(out, sent);
  EXPECT_EQ(g.b.counters().drops[static_cast<size_t>(Drop::kNeighborPending)], 0u);
  g.b.publish(g.clock.now());
  const auto st = g.b.snapshot("status", Duration::zero());
  EXPECT_EQ(st["neighbors_unresolved"], 0u);
  EXPECT_EQ(st["streams_waiting_for_host"], 0u);
}

// A host that never answers fails after NeighborTable::kResolveTimeout:
// what waited for it is dropped and counted (undeliverable, not lost in
// silence), so its stream goes on; the frames for the host that answers,
// on the same streams, all arrive, each flow's in order.
TEST(Forwarding, AHostThatNeverAnswersFailsAndTheOthersGoOn) {
  NEED_EAL();
  TwoGateways g;
  constexpr uint32_t kDeadHost = 0xC612020B;  // 198.18.2.11: never answers
  constexpr uint32_t kFrames = 400;
  std::vector<std::vector<uint8_t>> sent;
  uint32_t to_dead = 0;
  for (uint32_t i = 0; i < kFrames; ++i) {
    const bool dead = i % 3 == 0;
    to_dead += dead ? 1 : 0;
    // Two flows (source ports), each with frames for both hosts.
    auto f = frame4(kHostA, dead ? kDeadHost : kHostB, 17, static_cast<uint16_t>(40000 + i % 2), 9,
                    0, 0, kMacA, kHostMacA, 40 + (i * 97) % 1400);
    std::memcpy(f.data() + f.size() - 4, &i, 4);
    sent.push_back(std::move(f));
  }
  std::vector<uint32_t> got;
  size_t injected = 0;
  const auto& drops = g.b.counters().drops;
  const TimePoint start = g.clock.now();
  while (g.clock.now() - start < Duration::from_s(6) &&
         got.size() + drops[static_cast<size_t>(Drop::kNeighborPending)] < kFrames) {
    for (int k = 0; k < 8 && injected < kFrames && g.site_a.inject(sent[injected]); ++k) {
      ++injected;
    }
    const TimePoint now = g.clock.now();
    g.a.poll(now);
    g.b.poll(now);
    for (auto& f : g.site_b.take_sent()) {
      if (f[12] == 0x08 && f[13] == 0x06) {
        const uint32_t target = static_cast<uint32_t>(f[14 + 24]) << 24 | f[14 + 25] << 16 |
                                f[14 + 26] << 8 | f[14 + 27];
        if (target == kHostB) {
          ASSERT_TRUE(g.site_b.inject(arp(2, kHostMacB, kHostB, kGwB, kMacB)));
        }
        continue;
      }
      uint32_t i = 0;
      std::memcpy(&i, f.data() + f.size() - 4, 4);
      ASSERT_LT(i, kFrames);
      ASSERT_EQ(std::vector<uint8_t>(f.begin() + 14, f.end()),
                std::vector<uint8_t>(sent[i].begin() + 14, sent[i].end()));
      if (!got.empty()) {
        for (size_t k = got.size(); k-- > 0;) {
          if (got[k] % 2 == i % 2) {
            EXPECT_LT(got[k], i) << "flow " << i % 2 << " out of order";
            break;
          }
        }
      }
      got.push_back(i);
    }
    usleep(200);
  }
  EXPECT_EQ(got.size(), kFrames - to_dead);
  EXPECT_EQ(drops[static_cast<size_t>(Drop::kNeighborPending)], to_dead);
  g.b.publish(g.clock.now());
  const auto st = g.b.snapshot("status", Duration::zero());
  EXPECT_EQ(st["neighbors_unresolved"], 1u);  // failed, asked once a second
  EXPECT_EQ(st["streams_waiting_for_host"], 0u);
}

// Receive livelock: a peer that never acknowledges (nobody listens on its
// port), so one flow fills the send buffer. Once a burst meets a full
// buffer the worker leaves the site port alone: the frames wait in the port's
// ring instead of being taken and dropped one by one. With time stopped the
// ring keeps them however often the worker polls; after kRxHoldMax it takes
// one more burst, and holds again.
TEST(Forwarding, AFullSendBufferLeavesFramesInTheSiteRing) {
  NEED_EAL();
  const uint16_t base = gateway_ports();
  MemorySiteIo site_a(g_pool, "mem-a", kMacA);
  test::FakeClock clock;
  Worker a(config_for('a', base, static_cast<uint16_t>(base + 1)), site_a, clock);
  // One pass with nothing waiting: the link counts as draining from now on
  // (the clock stands still, so it never looks stalled, where admission
  // keeps room for new flows and a frame might still be taken).
  a.poll(clock.now());
  constexpr uint32_t kFrames = 1500;  // 1.5 MB of 1000-byte frames: several send buffers
  for (uint32_t i = 0; i < kFrames; ++i) {
    ASSERT_TRUE(site_a.inject(frame4(kHostA, kHostB, 17, 40000, 9, 0, 0, kMacA, kHostMacA, 1000)));
  }
  for (int i = 0; i < 200; ++i) a.poll(clock.now());
  const auto backlog = [&] { return a.counters().drops[static_cast<size_t>(Drop::kBacklog)]; };
  const uint64_t carried = a.counters().local_rx_packets - backlog();
  EXPECT_EQ(a.counters().rx_holds, 1u);
  EXPECT_GT(carried, 100u) << "the buffer took what it could first";
  EXPECT_GT(backlog(), 0u);
  EXPECT_LE(backlog(), 2u * 32u) << "frames taken only to be dropped";
  EXPECT_EQ(site_a.rx_pending() + a.counters().local_rx_packets, kFrames);
  EXPECT_GT(site_a.rx_pending(), kFrames / 3) << "the rest waits in the ring";
  const size_t pending = site_a.rx_pending();
  clock.advance(Worker::kRxHoldMax + Duration::from_us(1));
  for (int i = 0; i < 50; ++i) a.poll(clock.now());
  EXPECT_EQ(a.counters().rx_holds, 2u);
  EXPECT_LT(site_a.rx_pending(), pending) << "after the hold's limit a burst is taken";
  EXPECT_GE(site_a.rx_pending() + 32u * 4u, pending) << "but not the whole ring";
  a.publish(clock.now());
  const auto st = a.snapshot("status", Duration::zero());
  EXPECT_EQ(st["worker"]["rx_holds"], 2u) << st["worker"].dump();
}

// Site `n` (1, 2, 3: 198.18.n.0/24) on one UDP link at `port`, with a
// peer and a route per entry of `peers` (site number, its port).
GatewayConfig site_config(int n, uint16_t port, const std::vector<std::pair<int, uint16_t>>& peers,
                          const std::string& key_dir) {
  const bool secure = !key_dir.empty();
  std::string text = "[local]\ndevice = \"mem0\"\naddress = \"198.18." + std::to_string(n) +
                     ".1\"\nprefix_len = 24\n";
  text += secure ? "private_key_file = \"" + key_dir + "/" + std::to_string(n) + ".key\"\n"
                 : "insecure = true\n";
  text += "\n[[wan.link]]\nname = \"wan0\"\nbind = \"127.0.0.1:" + std::to_string(port) +
          "\"\nrate = \"1gbit\"\nrtt = \"1ms\"\n\n";
  for (const auto& [m, peer_port] : peers) {
    text += "[[peer]]\nname = \"site-" + std::to_string(m) +
            "\"\nendpoint = \"127.0.0.1:" + std::to_string(peer_port) + "\"\n";
    if (secure) {
      text += "public_key = \"" +
              crypto::key_to_base64(crypto::public_key(
                  crypto::load_private_key_file(key_dir + "/" + std::to_string(m) + ".key"))) +
              "\"\n";
    }
    text += "\n[[route]]\nprefix = \"198.18." + std::to_string(m) + ".0/24\"\npeer = \"site-" +
            std::to_string(m) + "\"\n\n";
  }
  text += "[metrics]\nenabled = false\n";
  return parse_config(text, "gw-" + std::to_string(n) + ".toml");
}

MacBytes gw_mac(int n) { return {0x02, 0, 0, 0, static_cast<uint8_t>(n), 0x01}; }
MacBytes host_mac(int n) { return {0x02, 0, 0, 0, static_cast<uint8_t>(n), 0x10}; }
uint32_t host_ip(int n) { return 0xC6120000u | (static_cast<uint32_t>(n) << 8) | 10; }

// Writes private keys 1.key .. N.key into `dir` (mode 0600).
void write_keys(const std::string& dir, int n) {
  for (int k = 1; k <= n; ++k) {
    const std::string path = dir + "/" + std::to_string(k) + ".key";
    std::ofstream(path) << crypto::key_to_base64(crypto::generate_private_key()) << "\n";
    std::filesystem::permissions(
        path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  }
}

// Three sites in a triangle where gateway 1 reaches sites 2 and 3 through
// one socket (its only link): every host's packets reach both other hosts,
// byte for byte, and a datagram for no known connection is counted, on
// plaintext links (sorted by connection id) and encrypted ones (by source).
void three_sites(bool secure) {
  const auto base = static_cast<uint16_t>(30000 + (getpid() % 3000) * 3);
  std::string key_dir;
  std::unique_ptr<test::TempDir> dir;
  if (secure) {
    dir = std::make_unique<test::TempDir>("three-sites");
    key_dir = dir->path();
    write_keys(key_dir, 3);
  }
  const uint16_t p1 = base, p2 = base + 1, p3 = base + 2;
  std::vector<std::unique_ptr<MemorySiteIo>> io;
  for (int n = 1; n <= 3; ++n) {
    io.push_back(std::make_unique<MemorySiteIo>(g_pool, "mem-" + std::to_string(n), gw_mac(n)));
  }
  MonotonicClock clock;
  std::vector<std::unique_ptr<Worker>> gw;
  gw.push_back(
      std::make_unique<Worker>(site_config(1, p1, {{2, p2}, {3, p3}}, key_dir), *io[0], clock));
  gw.push_back(
      std::make_unique<Worker>(site_config(2, p2, {{1, p1}, {3, p3}}, key_dir), *io[1], clock));
  gw.push_back(
      std::make_unique<Worker>(site_config(3, p3, {{1, p1}, {2, p2}}, key_dir), *io[2], clock));
  // Each site's host sends to both others; 3 frames a direction.
  std::map<int, std::vector<std::vector<uint8_t>>> sent;  // by destination site
  for (int from = 1; from <= 3; ++from) {
    for (int to = 1; to <= 3; ++to) {
      if (to == from) continue;
      for (uint32_t k = 0; k < 3; ++k) {
        auto f = frame4(host_ip(from), host_ip(to), 17, static_cast<uint16_t>(40000 + from), 9, 0,
                        0, gw_mac(from), host_mac(from), 100 + 10 * k + to);
        ASSERT_TRUE(io[from - 1]->inject(f));
        sent[to].push_back(f);
      }
    }
  }
  std::map<int, std::vector<std::vector<uint8_t>>> got;
  auto all_in = [&] {
    for (int n = 1; n <= 3; ++n) {
      if (got[n].size() < sent[n].size()) return false;
    }
    return true;
  };
  for (int i = 0; i < 40000 && !all_in(); ++i) {
    const TimePoint now = clock.now();
    for (auto& g : gw) g->poll(now);
    for (int n = 1; n <= 3; ++n) {
      for (auto& f : io[n - 1]->take_sent()) {
        if (f[12] == 0x08 && f[13] == 0x06) {  // the gateway asks for its host
          ASSERT_TRUE(
              io[n - 1]->inject(arp(2, host_mac(n), host_ip(n),
                                    0xC6120001u | (static_cast<uint32_t>(n) << 8), gw_mac(n))));
        } else {
          got[n].push_back(std::move(f));
        }
      }
    }
    usleep(100);
  }
  for (int n = 1; n <= 3; ++n) {
    ASSERT_EQ(got[n].size(), sent[n].size()) << "site " << n;
    // Per source a flow, in order; compare the IP packets as multisets.
    std::multiset<std::string> want, have;
    for (const auto& f : sent[n]) want.insert(ip_packet(f));
    for (const auto& f : got[n]) have.insert(ip_packet(f));
    EXPECT_EQ(have, want) << "site " << n;
  }
  for (auto& g : gw) EXPECT_EQ(g->counters().drops[static_cast<size_t>(Drop::kNoRoute)], 0u);
  // Every gateway sees both peers over its one link.
  gw[0]->publish(clock.now());
  const auto links = gw[0]->snapshot("links", Duration::zero());
  ASSERT_EQ(links.size(), 2u);
  EXPECT_EQ(links[0]["bind"], links[1]["bind"]);
  EXPECT_EQ(links[0]["shared_by"], 2u);
  EXPECT_GT(links[1]["rx_packets"].get<uint64_t>(), 0u);
  // A stranger on gateway 1's socket is dropped and counted.
  io::UdpUringOptions o;
  o.bind = io::UdpEndpoint::parse("127.0.0.1:" + std::to_string(base + 2900));
  o.peer = io::UdpEndpoint::parse("127.0.0.1:" + std::to_string(p1));
  io::UdpUringIo stranger(o);
  std::vector<uint8_t> junk(64, 0);
  junk[0] = 1;
  const io::TxDatagram t{junk.data(), static_cast<uint32_t>(junk.size())};
  ASSERT_EQ(stranger.send_burst(std::span(&t, 1), clock.now()), 1u);
  const char* reason = secure ? "unknown_source" : "unknown_connection";
  uint64_t dropped = 0;
  for (int i = 0; i < 2000 && dropped == 0; ++i) {
    gw[0]->poll(clock.now());
    gw[0]->publish(clock.now());
    dropped = gw[0]->snapshot("links", Duration::zero())[0]["demux_drops"][reason];
    usleep(200);
  }
  EXPECT_EQ(dropped, 1u);
}

TEST(Forwarding, ThreeSitesTwoPeersOnOneSocketPlaintext) {
  NEED_EAL();
  three_sites(false);
}

TEST(Forwarding, ThreeSitesTwoPeersOnOneSocketEncrypted) {
  NEED_EAL();
  three_sites(true);
}

// Site `n`'s gateway over two links (127.0.0.1:port and :port + 2) to its
// peer at peer_port and peer_port + 2: one connection, a path per link.
GatewayConfig two_link_config(int n, uint16_t port, uint16_t peer_port,
                              const std::string& key_dir) {
  const int m = 3 - n;
  auto at = [](uint16_t p) { return "\"127.0.0.1:" + std::to_string(p) + "\""; };
  auto key = [&](int k) { return key_dir + "/" + std::to_string(k) + ".key"; };
  const std::string security =
      key_dir.empty() ? "insecure = true\n" : "private_key_file = \"" + key(n) + "\"\n";
  const std::string peer_key =
      key_dir.empty()
          ? ""
          : "public_key = \"" +
                crypto::key_to_base64(crypto::public_key(crypto::load_private_key_file(key(m)))) +
                "\"\n";
  const std::string text =
      "[local]\ndevice = \"mem0\"\naddress = \"198.18." + std::to_string(n) +
      ".1\"\nprefix_len = 24\n" + security + "\n[[wan.link]]\nname = \"wan0\"\nbind = " + at(port) +
      "\nrate = \"1gbit\"\nrtt = \"1ms\"\n\n[[wan.link]]\nname = \"wan1\"\nbind = " +
      at(static_cast<uint16_t>(port + 2)) + "\nrate = \"500mbit\"\nrtt = \"2ms\"\n\n" +
      "[[peer]]\nname = \"site-" + std::to_string(m) + "\"\nendpoint = " + at(peer_port) +
      "\nlinks = [\"wan0\", \"wan1\"]\nendpoints = [" + at(peer_port) + ", " +
      at(static_cast<uint16_t>(peer_port + 2)) + "]\n" + peer_key +
      "\n[[route]]\nprefix = \"198.18." + std::to_string(m) + ".0/24\"\npeer = \"site-" +
      std::to_string(m) + "\"\n\n[metrics]\nenabled = false\n";
  return parse_config(text, "gw-" + std::to_string(n) + ".toml");
}

// A peer over two links: every frame arrives once, intact, and both paths
// carried datagrams each way (rowanctl links: one entry per path, up); on
// encrypted links every path has its own session, and the peer is one
// process to all of them (no transport reset).
void two_links(bool secure) {
  // Each variant its own ports: a closed io_uring socket may linger briefly.
  const auto base = static_cast<uint16_t>(50000 + (getpid() % 1500) * 8 + (secure ? 4 : 0));
  std::unique_ptr<test::TempDir> dir;
  std::string key_dir;
  if (secure) {
    dir = std::make_unique<test::TempDir>("two-links");
    key_dir = dir->path();
    write_keys(key_dir, 2);
  }
  MemorySiteIo site_a(g_pool, "mem-a", gw_mac(1)), site_b(g_pool, "mem-b", gw_mac(2));
  MonotonicClock clock;
  Worker a(two_link_config(1, base, static_cast<uint16_t>(base + 1), key_dir), site_a, clock);
  Worker b(two_link_config(2, static_cast<uint16_t>(base + 1), base, key_dir), site_b, clock);
  constexpr uint32_t kFrames = 2400;
  std::multiset<std::string> want, have;
  std::vector<std::vector<uint8_t>> frames;
  for (uint32_t k = 0; k < kFrames; ++k) {
    auto f = frame4(host_ip(1), host_ip(2), 17, static_cast<uint16_t>(41000 + k % 8), 9, 0, 0,
                    gw_mac(1), host_mac(1), 1000 + k % 50);
    f[60] = static_cast<uint8_t>(k);
    f[61] = static_cast<uint8_t>(k >> 8);
    want.insert(ip_packet(f));
    frames.push_back(std::move(f));
  }
  size_t next = 0;
  for (int i = 0; i < 40000 && have.size() < kFrames; ++i) {
    for (int j = 0; j < 32 && next < frames.size(); ++j) ASSERT_TRUE(site_a.inject(frames[next++]));
    const TimePoint now = clock.now();
    a.poll(now);
    b.poll(now);
    for (auto& f : site_b.take_sent()) {
      if (f[12] == 0x08 && f[13] == 0x06) {
        ASSERT_TRUE(site_b.inject(arp(2, host_mac(2), host_ip(2), 0xC6120201u, gw_mac(2))));
      } else {
        have.insert(ip_packet(f));
      }
    }
    usleep(50);
  }
  EXPECT_EQ(have, want);
  // Whether the frames above needed the second path depends on how fast
  // loopback turns the first one around: the scheduler sends on the path of
  // earliest delivery, and an unloaded first path may take them all. A path
  // left idle is kept measured by keepalive PINGs (every 100 ms of
  // silence), so within a second each link has sent and been answered.
  const auto link_used = [&](size_t i) {
    a.publish(clock.now());
    const auto l = a.snapshot("links", Duration::zero());
    return l.size() == 2 && l[i]["packets_sent"].get<uint64_t>() > 0 &&
           l[i]["packets_received"].get<uint64_t>() > 0;
  };
  for (int i = 0; i < 20000 && !(link_used(0) && link_used(1)); ++i) {
    const TimePoint now = clock.now();
    a.poll(now);
    b.poll(now);
    usleep(50);
  }
  a.publish(clock.now());
  const auto links = a.snapshot("links", Duration::zero());
  ASSERT_EQ(links.size(), 2u) << links.dump();
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(links[i]["path"], i);
    EXPECT_EQ(links[i]["name"], i == 0 ? "wan0" : "wan1");
    EXPECT_EQ(links[i]["state"], "up");
    EXPECT_GT(links[i]["packets_sent"].get<uint64_t>(), 0u) << links.dump();
    EXPECT_GT(links[i]["packets_received"].get<uint64_t>(), 0u) << links.dump();
  }
  const auto peers = a.snapshot("peers", Duration::zero());
  ASSERT_EQ(peers[0]["paths"].size(), 2u) << peers.dump();
  EXPECT_EQ(peers[0]["paths"][1]["link"], "wan1");
  if (secure) {
    EXPECT_EQ(peers[0]["transport_resets"], 0u) << peers.dump();
    for (size_t i = 0; i < 2; ++i) EXPECT_EQ(links[i]["session"], "up") << links.dump();
  }
}

TEST(Forwarding, APeerOverTwoLinksUsesBothPathsPlaintext) {
  NEED_EAL();
  two_links(false);
}

TEST(Forwarding, APeerOverTwoLinksUsesBothPathsEncrypted) {
  NEED_EAL();
  two_links(true);
}

// 802.1Q site frames (vlan.h) between two gateways: what gateway B sends
// its host, and which ARP requests it tagged, for frames injected at A.
struct VlanRun {
  std::vector<std::vector<uint8_t>> out;      // frames toward B's host (ARP aside)
  std::vector<std::vector<uint8_t>> asks;     // B's ARP requests
  std::vector<std::vector<uint8_t>> a_local;  // what A sent its own site
  WorkerCounters a, b;
};

// `then` is injected at A once the first `want` frames reached B's host (B
// has resolved its host by then), and its frames are waited for too.
VlanRun run_vlan(const std::vector<std::vector<uint8_t>>& at_a, size_t want,
                 const std::string& b_local = "", const std::string& b_route = "",
                 const std::vector<std::vector<uint8_t>>& then = {}) {
  // Ports of their own for each run (a closed socket's port may stay taken
  // for a moment).
  static int runs = 0;
  const auto base = static_cast<uint16_t>(20000 + (getpid() % 1000) * 8 + 2 * (runs++ % 4));
  MemorySiteIo site_a(g_pool, "mem-va", kMacA), site_b(g_pool, "mem-vb", kMacB);
  MonotonicClock clock;
  Worker a(config_for('a', base, static_cast<uint16_t>(base + 1)), site_a, clock);
  Worker b(config_for('b', static_cast<uint16_t>(base + 1), base, b_local, b_route), site_b, clock);
  for (const auto& f : at_a) EXPECT_TRUE(site_a.inject(f));
  VlanRun r;
  bool then_sent = then.empty();
  for (int i = 0; i < 20000 && (r.out.size() < want || !then_sent); ++i) {
    if (!then_sent && r.out.size() >= want) {
      for (const auto& f : then) EXPECT_TRUE(site_a.inject(f));
      want += then.size();
      then_sent = true;
    }
    const TimePoint now = clock.now();
    a.poll(now);
    b.poll(now);
    for (auto& f : site_a.take_sent()) r.a_local.push_back(std::move(f));
    for (auto& f : site_b.take_sent()) {
      L2Header l2;
      EXPECT_EQ(parse_l2(f.data(), static_cast<uint32_t>(f.size()), l2), L2Verdict::kOk);
      if (l2.type == 0x0806) {  // B asks for its host: answer on the VLAN it asked on
        auto reply = arp(2, kHostMacB, kHostB, kGwB, kMacB);
        if (l2.tag.present) reply = frames::tagged(reply, l2.tag.vid());
        EXPECT_TRUE(site_b.inject(reply));
        r.asks.push_back(std::move(f));
      } else {
        r.out.push_back(std::move(f));
      }
    }
    usleep(100);
  }
  // A little longer: nothing more may come.
  for (int i = 0; i < 50; ++i) {
    a.poll(clock.now());
    b.poll(clock.now());
    for (auto& f : site_a.take_sent()) r.a_local.push_back(std::move(f));
    for (auto& f : site_b.take_sent()) r.out.push_back(std::move(f));
    usleep(100);
  }
  r.a = a.counters();
  r.b = b.counters();
  return r;
}

// A RoCEv2 frame from A's host to B's host with DSCP `dscp` (ECT(0)).
std::vector<uint8_t> roce_dscp(uint32_t qp, uint8_t dscp, uint16_t sport = 0xC001) {
  auto f = frame4(kHostA, kHostB, 17, sport, 4791, qp, 7, kMacA, kHostMacA, 64);
  f[15] = static_cast<uint8_t>(dscp << 2 | 2);
  return f;
}
std::vector<uint8_t> ip_of(const std::vector<uint8_t>& f, uint32_t l3) {
  return {f.begin() + l3, f.end()};
}

// The default ([local] vlan = "sender"): a tagged frame (PCP 5, VID 100,
// DSCP 26) reaches B's host with the same tag and its IP packet byte for
// byte (DSCP and ECN intact); B asked for its host on VID 100. An untagged
// frame stays untagged. Both are counted.
TEST(Vlan, TaggedFrameKeepsPcpVidAndDscpUntaggedStaysUntagged) {
  NEED_EAL();
  const auto plain = roce_dscp(0x21, 26);
  const auto tagged_f = frames::tagged(roce_dscp(0x22, 26, 0xC002), VlanTag::make(5, 100).tci);
  const VlanRun r = run_vlan({tagged_f, plain}, 2);
  ASSERT_EQ(r.out.size(), 2u);
  int tagged_seen = 0;
  for (const auto& f : r.out) {
    L2Header l2;
    ASSERT_EQ(parse_l2(f.data(), static_cast<uint32_t>(f.size()), l2), L2Verdict::kOk);
    EXPECT_EQ(std::vector<uint8_t>(f.begin(), f.begin() + 6),
              std::vector<uint8_t>(kHostMacB.begin(), kHostMacB.end()));
    if (l2.tag.present) {
      ++tagged_seen;
      EXPECT_EQ(l2.tag, VlanTag::make(5, 100));
      EXPECT_EQ(ip_of(f, l2.l3_off), ip_of(tagged_f, 18));
    } else {
      EXPECT_EQ(ip_of(f, 14), ip_of(plain, 14));
    }
  }
  EXPECT_EQ(tagged_seen, 1);
  // B asked for its host (once: the second packet waits for the answer),
  // on VID 100 at priority 0 when the tagged packet asked.
  ASSERT_FALSE(r.asks.empty());
  for (const auto& f : r.asks) {
    L2Header l2;
    ASSERT_EQ(parse_l2(f.data(), static_cast<uint32_t>(f.size()), l2), L2Verdict::kOk);
    if (l2.tag.present) {
      EXPECT_EQ(l2.tag, VlanTag::make(0, 100));
    }
  }
  EXPECT_EQ(r.a.vlan_rx, 1u);
  EXPECT_EQ(r.b.vlan_tx, 1u);
  EXPECT_EQ(r.a.drops[static_cast<size_t>(Drop::kUnsupportedL2)], 0u);
}

// A tagged packet for a host B has already resolved goes out with that
// host's MAC and B's own in their places, the tag after them (the frame was
// once built before the tag moved its start, so a resolved host got a frame
// with its MAC 4 bytes in: a real NIC drops it, only the pending path was
// right).
TEST(Vlan, TaggedPacketToAResolvedHostHasItsMacs) {
  NEED_EAL();
  const auto first = frames::tagged(roce_dscp(0x23, 26, 0xC003), VlanTag::make(5, 100).tci);
  const auto second = frames::tagged(roce_dscp(0x23, 26, 0xC003), VlanTag::make(5, 100).tci);
  const auto untagged = roce_dscp(0x24, 26, 0xC004);
  const VlanRun r = run_vlan({first}, 1, "", "", {second, untagged});
  ASSERT_EQ(r.out.size(), 3u);
  for (const auto& f : r.out) {
    EXPECT_EQ(std::vector<uint8_t>(f.begin(), f.begin() + 6),
              std::vector<uint8_t>(kHostMacB.begin(), kHostMacB.end()));
    EXPECT_EQ(std::vector<uint8_t>(f.begin() + 6, f.begin() + 12),
              std::vector<uint8_t>(kMacB.begin(), kMacB.end()));
    L2Header l2;
    ASSERT_EQ(parse_l2(f.data(), static_cast<uint32_t>(f.size()), l2), L2Verdict::kOk);
    if (l2.tag.present) {
      EXPECT_EQ(l2.tag, VlanTag::make(5, 100));
      EXPECT_EQ(ip_of(f, l2.l3_off), ip_of(second, 18));
    } else {
      EXPECT_EQ(ip_of(f, 14), ip_of(untagged, 14));
    }
  }
  EXPECT_EQ(r.b.vlan_tx, 2u);
}

// B's [local] vlan = 200: every packet gets VID 200, with the sender's PCP,
// or DSCP >> 3 when it came untagged (DSCP 46: PCP 5); a [[route]] vlan =
// "untagged" wins for packets from its prefix.
TEST(Vlan, SiteAndRouteVlanPolicies) {
  NEED_EAL();
  const auto tagged_f = frames::tagged(roce_dscp(0x31, 10), VlanTag::make(3, 100).tci);
  const auto plain = roce_dscp(0x32, 46, 0xC002);
  VlanRun r = run_vlan({tagged_f, plain}, 2, "vlan = 200\n");
  ASSERT_EQ(r.out.size(), 2u);
  std::set<uint16_t> tcis;
  for (const auto& f : r.out) {
    L2Header l2;
    ASSERT_EQ(parse_l2(f.data(), static_cast<uint32_t>(f.size()), l2), L2Verdict::kOk);
    ASSERT_TRUE(l2.tag.present);
    EXPECT_EQ(l2.tag.vid(), 200);
    tcis.insert(l2.tag.tci);
  }
  EXPECT_EQ(tcis, (std::set<uint16_t>{VlanTag::make(3, 200).tci, VlanTag::make(5, 200).tci}));
  EXPECT_EQ(r.b.vlan_tx, 2u);
  r = run_vlan({tagged_f}, 1, "vlan = 200\n", "vlan = \"untagged\"\n");
  ASSERT_EQ(r.out.size(), 1u);
  EXPECT_EQ(load_be16(r.out[0].data() + 12), 0x0800);
  EXPECT_EQ(ip_of(r.out[0], 14), ip_of(tagged_f, 18));
}

// Two tags (stacked 802.1Q, or an 802.1ad service tag) and a cut tag are
// dropped under their own reasons; nothing crosses. A tagged ARP request
// for gateway A is answered on its VLAN, with its tag.
TEST(Vlan, StackedAndTruncatedTagsAreCountedDropsTaggedArpIsAnswered) {
  NEED_EAL();
  const auto f = roce_dscp(0x41, 26);
  const auto stacked = frames::tagged(frames::tagged(f, 100), 200);
  const auto qinq = frames::tagged(frames::tagged(f, 100), 200, kTpidQinQ);
  const std::vector<uint8_t> cut = {kMacA[0], kMacA[1], kMacA[2], kMacA[3], kMacA[4], kMacA[5],
                                    2,        0,        0,        0,        0x0A,     0x10,
                                    0x81,     0x00,     0x20,     0x64};
  const auto ask =
      frames::tagged(arp(1, kHostMacA, kHostA, 0xC6120101, kMacA), VlanTag::make(6, 100).tci);
  const VlanRun r = run_vlan({stacked, qinq, cut, ask}, 0);
  EXPECT_TRUE(r.out.empty());
  EXPECT_EQ(r.a.drops[static_cast<size_t>(Drop::kVlanStacked)], 2u);
  EXPECT_EQ(r.a.drops[static_cast<size_t>(Drop::kVlanTruncated)], 1u);
  ASSERT_EQ(r.a_local.size(), 1u) << "the ARP reply";
  L2Header l2;
  const auto& reply = r.a_local[0];
  ASSERT_EQ(parse_l2(reply.data(), static_cast<uint32_t>(reply.size()), l2), L2Verdict::kOk);
  EXPECT_EQ(l2.tag, VlanTag::make(6, 100));
  EXPECT_EQ(l2.type, 0x0806);
  EXPECT_EQ(reply[l2.l3_off + 7], 2) << "an ARP reply";
  EXPECT_EQ(r.a.arp_replies, 1u);
}

// The flow table (tagged open addressing, backward-shift deletion): every
// flow is found again after others come and go, a full table says so.
TEST(FlowTable, FindsEveryFlowAcrossAddsAndExpiries) {
  FlowTable t(512);
  auto key = [](uint32_t i) {
    FlowKey k;
    k.src.version = k.dst.version = 4;
    k.src.bytes = {198, 18, 1, static_cast<uint8_t>(i)};
    k.dst.bytes = {198, 18, 2, static_cast<uint8_t>(i >> 8)};
    k.kind = i % 3 == 0 ? FlowKind::kRoce : FlowKind::kUdp;
    k.qp = i % 3 == 0 ? i : 0;
    k.sport = static_cast<uint16_t>(i % 3 == 0 ? 0 : 1000 + i);
    k.dport = 4791;
    k.proto = 17;
    return k;
  };
  const TimePoint t0 = TimePoint::zero() + Duration::from_ms(1);
  const TimePoint t1 = t0 + Duration::from_ms(10);
  bool created = false;
  for (uint32_t i = 0; i < 512; ++i) {
    Flow* f = t.find_or_add(key(i), i % 2 == 0 ? t0 : t1, &created);
    ASSERT_NE(f, nullptr) << i;
    EXPECT_TRUE(created);
  }
  EXPECT_EQ(t.find_or_add(key(9999), t1, &created), nullptr) << "a full table takes no more";
  EXPECT_EQ(t.expire(t0 + Duration::from_ms(1)), 256u);  // the even ones
  for (uint32_t i = 0; i < 512; ++i) {
    Flow* f = t.find(key(i));
    if (i % 2 == 0) {
      EXPECT_EQ(f, nullptr) << i;
    } else {
      ASSERT_NE(f, nullptr) << i;
      EXPECT_EQ(f->key, key(i));
    }
  }
  for (uint32_t i = 1000; i < 1256; ++i) ASSERT_NE(t.find_or_add(key(i), t1, &created), nullptr);
  EXPECT_EQ(t.size(), 512u);
  for (uint32_t i = 1; i < 512; i += 2) EXPECT_NE(t.find(key(i)), nullptr) << i;
}

}  // namespace
}  // namespace rowan::gw
