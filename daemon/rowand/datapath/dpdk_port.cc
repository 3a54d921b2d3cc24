// rte_intr_instance_alloc() and its setters (cleanup_eal) are still marked
// experimental in DPDK 22.11.
#define ALLOW_EXPERIMENTAL_API 1

#include "datapath/dpdk_port.h"

#include <rte_alarm.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_interrupts.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <stdexcept>

namespace rowan::gw {
namespace {

std::runtime_error dpdk_error(const std::string& what, int err) {
  return std::runtime_error(what + ": " + rte_strerror(err < 0 ? -err : err));
}

// A net_memif vdev (its name, without the arguments, starts so).
bool is_memif(const std::string& name) { return name.rfind("net_memif", 0) == 0; }

}  // namespace

std::string device_name(const std::string& spec) { return spec.substr(0, spec.find(',')); }

bool is_vdev(const std::string& spec) { return spec.rfind("net_", 0) == 0; }

std::vector<std::string> eal_args(const EalConfig& eal, const std::vector<std::string>& devices) {
  std::vector<std::string> a{"rowand"};
  a.push_back("--lcores=" + eal.lcores);
  a.push_back("--file-prefix=" +
              (eal.file_prefix.empty() ? "rowand-" + std::to_string(getpid()) : eal.file_prefix));
  if (!eal.huge_dir.empty()) a.push_back("--huge-dir=" + eal.huge_dir);
  if (eal.no_huge) a.push_back("--no-huge");
  if (eal.in_memory) a.push_back("--in-memory");
  // "-m" and its value as two arguments: the EAL reads "-m=256" as atoi("=256") = 0.
  if (eal.memory_mb > 0) {
    a.push_back("-m");
    a.push_back(std::to_string(eal.memory_mb));
  }
  bool any_pci = false;
  for (const auto& d : devices) {
    if (is_vdev(d)) {
      a.push_back("--vdev=" + d);
    } else {
      a.push_back("-a");
      a.push_back(d);
      any_pci = true;
    }
  }
  if (!any_pci) a.push_back("--no-pci");
  a.push_back("--log-level=lib.eal:warning");
  for (const auto& x : eal.extra_args) a.push_back(x);
  return a;
}

void init_eal(const EalConfig& eal, const std::vector<std::string>& devices) {
  std::vector<std::string> args = eal_args(eal, devices);
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  if (rte_eal_init(static_cast<int>(args.size()), argv.data()) < 0) {
    throw dpdk_error("rte_eal_init", rte_errno);
  }
}

bool on_interrupt_thread(const std::function<void()>& fn, Duration limit) {
  // The EAL runs alarm callbacks on its interrupt thread, between the device
  // callbacks it runs there, one event at a time.
  struct Call {
    const std::function<void()>* fn;
    std::atomic<bool> done{false};
  } call{&fn};
  auto run = [](void* arg) {
    auto* c = static_cast<Call*>(arg);
    (*c->fn)();
    c->done.store(true);
  };
  if (rte_eal_alarm_set(1, run, &call) != 0) return false;
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(limit.ns());
  while (!call.done.load()) {
    // The callback must not outlive `call`: cancel it, or wait until it ran.
    if (std::chrono::steady_clock::now() >= until && rte_eal_alarm_cancel(run, &call) > 0) {
      return false;
    }
    usleep(100);
  }
  return true;
}

void cleanup_eal() {
  // DPDK 22.11's rte_eal_cleanup() unmaps the memory while the EAL's
  // interrupt thread still runs, and that thread's list of interrupt sources
  // can still point into it: net_memif frees a server port's listener handle
  // on close without unregistering it. The thread read it, and died, when
  // anything woke it during the cleanup (rowand crashed in rte_intr_fd_get
  // at a third of bench/pps-memif's DPDK WAN shutdowns). So the thread is
  // parked first, for good, in the callback of an interrupt source of our
  // own (an eventfd; not an alarm, whose source rte_eal_cleanup() waits to
  // unregister). It gets there after whatever it runs now, a callback's
  // pending unregistrations and their frees included. The process exits with
  // it parked; the handle lives in the C heap, which the cleanup leaves.
  static std::atomic<bool> parked{false};
  rte_intr_handle* h = rte_intr_instance_alloc(RTE_INTR_INSTANCE_F_PRIVATE);
  const int fd = eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK);  // readable from the start
  if (h != nullptr && fd >= 0 && rte_intr_fd_set(h, fd) == 0 &&
      rte_intr_type_set(h, RTE_INTR_HANDLE_EXT) == 0 &&
      rte_intr_callback_register(
          h,
          [](void*) {
            parked.store(true);
            for (;;) pause();
          },
          nullptr) == 0) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (!parked.load() && std::chrono::steady_clock::now() < until) usleep(100);
  }
  rte_eal_cleanup();
}

uint16_t queue_pairs_for(QueueMode mode, uint32_t workers, uint16_t max_rx, uint16_t max_tx) {
  if (mode != QueueMode::kAuto || workers < 2) return 1;
  return max_rx >= workers && max_tx >= workers ? static_cast<uint16_t>(workers) : 1;
}

uint32_t workers_for(uint32_t lcores) { return lcores <= 2 ? 1 : lcores - 1; }

uint16_t Port::max_queue_pairs(const std::string& device) {
  uint16_t id = 0;
  if (rte_eth_dev_get_port_by_name(device_name(device).c_str(), &id) != 0) return 0;
  // net_memif reports 255 queue pairs whatever its peer has, and a memif
  // server refuses a client's rings beyond its own queue count: its queues
  // are the peer's choice, so they do not count.
  if (is_memif(device_name(device))) return 1;
  rte_eth_dev_info info{};
  if (rte_eth_dev_info_get(id, &info) != 0) return 0;
  return std::min(info.max_rx_queues, info.max_tx_queues);
}

Port::Port(const std::string& device, uint16_t rx_ring, uint16_t tx_ring, uint32_t mbuf_size,
           uint32_t nb_mbufs, uint16_t queues)
    : name_(device_name(device)), queues_(queues == 0 ? 1 : queues) {
  int rc = rte_eth_dev_get_port_by_name(name_.c_str(), &id_);
  if (rc != 0) throw std::runtime_error("no DPDK port '" + name_ + "' (device " + device + ")");
  const std::string pool_name = "mb_" + name_.substr(0, 20);
  pool_ = rte_pktmbuf_pool_create(pool_name.c_str(), nb_mbufs, 256, 0,
                                  static_cast<uint16_t>(mbuf_size + RTE_PKTMBUF_HEADROOM),
                                  static_cast<int>(rte_socket_id()));
  if (pool_ == nullptr) throw dpdk_error("mbuf pool for " + name_, rte_errno);
  rte_eth_conf conf{};
  rte_eth_dev_info info{};
  rc = rte_eth_dev_info_get(id_, &info);
  if (rc != 0) throw dpdk_error("rte_eth_dev_info_get " + name_, rc);
  if (info.max_rx_pktlen >= mbuf_size) conf.rxmode.mtu = mbuf_size - RTE_ETHER_HDR_LEN - 4;
  if (queues_ > info.max_rx_queues || queues_ > info.max_tx_queues) {
    throw std::runtime_error(name_ + " has " + std::to_string(info.max_rx_queues) + " RX and " +
                             std::to_string(info.max_tx_queues) + " TX queues, not " +
                             std::to_string(queues_));
  }
  // A symmetric Toeplitz key (0x6d5a repeated: both directions of a flow
  // hash alike), in the length the PMD takes; without one it keeps its own.
  std::array<uint8_t, 64> key{};
  if (queues_ > 1) {
    conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
    rss_hf_ = (RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP | RTE_ETH_RSS_TCP) & info.flow_type_rss_offloads;
    conf.rx_adv_conf.rss_conf.rss_hf = rss_hf_;
    if (info.hash_key_size > 0 && info.hash_key_size <= key.size()) {
      for (size_t i = 0; i < key.size(); ++i) key[i] = i % 2 == 0 ? 0x6d : 0x5a;
      conf.rx_adv_conf.rss_conf.rss_key = key.data();
      conf.rx_adv_conf.rss_conf.rss_key_len = info.hash_key_size;
    }
  }
  rc = rte_eth_dev_configure(id_, queues_, queues_, &conf);
  if (rc != 0 && queues_ > 1) {
    throw dpdk_error("rte_eth_dev_configure " + name_ + " with " + std::to_string(queues_) +
                         " queues and RSS (local.queues = \"distributor\" opens one)",
                     rc);
  }
  if (rc != 0) throw dpdk_error("rte_eth_dev_configure " + name_, rc);
  rc = rte_eth_dev_adjust_nb_rx_tx_desc(id_, &rx_ring, &tx_ring);
  if (rc != 0) throw dpdk_error("rte_eth_dev_adjust_nb_rx_tx_desc " + name_, rc);
  const auto socket = static_cast<unsigned>(rte_eth_dev_socket_id(id_));
  for (uint16_t q = 0; q < queues_; ++q) {
    rc = rte_eth_rx_queue_setup(id_, q, rx_ring, socket, nullptr, pool_);
    if (rc != 0) throw dpdk_error("rte_eth_rx_queue_setup " + name_, rc);
    rc = rte_eth_tx_queue_setup(id_, q, tx_ring, socket, nullptr);
    if (rc != 0) throw dpdk_error("rte_eth_tx_queue_setup " + name_, rc);
  }
  rc = rte_eth_dev_start(id_);
  if (rc != 0) throw dpdk_error("rte_eth_dev_start " + name_, rc);
  started_ = true;
  rte_eth_promiscuous_enable(id_);  // not all vdevs support it; harmless when they don't
  rte_ether_addr addr{};
  rte_eth_macaddr_get(id_, &addr);
  std::memcpy(mac_.data(), addr.addr_bytes, 6);
}

Port::~Port() {
  if (started_) {
    const uint16_t id = id_;
    auto close = [id] {
      rte_eth_dev_stop(id);
      rte_eth_dev_close(id);
    };
    // net_memif disconnects in its stop and close, and also on the EAL's
    // interrupt thread when its peer hangs up or says goodbye; the two are
    // not synchronized, so a peer that stops at the same moment had both
    // threads free the same control channel and regions (rowand died in
    // rte_free on that thread at most bench/pps-memif shutdowns). On that
    // thread the close cannot overlap the peer's.
    if (!is_memif(name_) || !on_interrupt_thread(close, Duration::from_s(2))) {
      close();
    }
  }
  if (pool_ != nullptr) rte_mempool_free(pool_);
}

PortStats Port::stats() const {
  rte_eth_stats s{};
  rte_eth_stats_get(id_, &s);
  return {s.ipackets, s.opackets, s.ibytes, s.obytes, s.imissed, s.ierrors, s.oerrors, s.rx_nombuf};
}

}  // namespace rowan::gw
