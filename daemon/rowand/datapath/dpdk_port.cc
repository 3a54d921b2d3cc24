#include "datapath/dpdk_port.h"

#include <rte_eal.h>
#include <rte_errno.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>

namespace rowan::gw {
namespace {

std::runtime_error dpdk_error(const std::string& what, int err) {
  return std::runtime_error(what + ": " + rte_strerror(err < 0 ? -err : err));
}

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

void cleanup_eal() { rte_eal_cleanup(); }

Port::Port(const std::string& device, uint16_t rx_ring, uint16_t tx_ring, uint32_t mbuf_size,
           uint32_t nb_mbufs)
    : name_(device_name(device)) {
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
  rc = rte_eth_dev_configure(id_, 1, 1, &conf);
  if (rc != 0) throw dpdk_error("rte_eth_dev_configure " + name_, rc);
  rc = rte_eth_dev_adjust_nb_rx_tx_desc(id_, &rx_ring, &tx_ring);
  if (rc != 0) throw dpdk_error("rte_eth_dev_adjust_nb_rx_tx_desc " + name_, rc);
  const auto socket = static_cast<unsigned>(rte_eth_dev_socket_id(id_));
  rc = rte_eth_rx_queue_setup(id_, 0, rx_ring, socket, nullptr, pool_);
  if (rc != 0) throw dpdk_error("rte_eth_rx_queue_setup " + name_, rc);
  rc = rte_eth_tx_queue_setup(id_, 0, tx_ring, socket, nullptr);
  if (rc != 0) throw dpdk_error("rte_eth_tx_queue_setup " + name_, rc);
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
    rte_eth_dev_stop(id_);
    rte_eth_dev_close(id_);
  }
  if (pool_ != nullptr) rte_mempool_free(pool_);
}

PortStats Port::stats() const {
  rte_eth_stats s{};
  rte_eth_stats_get(id_, &s);
  return {s.ipackets, s.opackets, s.ibytes, s.obytes, s.imissed, s.ierrors, s.oerrors, s.rx_nombuf};
}

}  // namespace rowan::gw
