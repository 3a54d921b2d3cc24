// The DPDK WAN backend ([[wan.link]] backend = "dpdk"): a PacketIo that
// carries the transport's datagrams as Ethernet + IPv4 + UDP frames on a DPDK
// port (a NIC, or a vdev such as net_af_packet / net_af_xdp on the WAN-side
// interface when there is none). It owns the link's IPv4 address on that port:
// it answers ARP for it, resolves the next hop (the peer itself when it is
// on-link, else `next_hop`) by ARP, and accepts only UDP datagrams from the
// peer's address and port to its own. SecureIo wraps it like the UDP backend.
//
//   send_burst: one mbuf per datagram from the port's pool (bulk), headers
//               written in front of the payload, IPv4 header and UDP
//               checksums in software, ECN in the TOS byte, one tx_burst.
//   recv_burst: rx_burst of at most as many frames as there are buffers;
//               ARP is answered in place; every other frame is checked
//               (MACs, ethertype, IPv4 header and checksum, no fragments, UDP
//               ports, source, UDP checksum, lengths) and its payload copied
//               to the caller's buffer, or lent in its mbuf when the caller
//               asked (lend_rx), or dropped and counted by reason.
//
// No allocation, lock or logging per packet. IPv4 only: an IPv6 link needs
// neighbour discovery on the WAN port, which this backend does not do.
//
// Several workers (DpdkWanPort): the link's port opens one RX/TX queue pair
// per worker, and worker w's DpdkWanIo owns queue w and UDP port base + w
// (as the UDP backend binds base + w), talking to the peer's base + w. What
// lands on queue w for another worker's port goes to that worker's steering
// ring (multi-producer, its consumer the owner) and is taken from there
// before its own queue:
//   - net_memif: queue w of one side is queue w of the other (no steering);
//   - a NIC with rte_flow (mlx5, ice, i40e): a rule per worker sends UDP to
//     base + w to queue w; what the rules miss is steered;
//   - net_af_packet (qpairs = N, the kernel's fanout hash), or RSS alone:
//     about (N - 1) / N of the datagrams are steered.
// The next hop's MAC is the port's, learned by whichever queue hears its ARP
// (one atomic word); each worker asks on its own queue while unresolved.
//
// Threading: constructed on the main thread after the EAL is up (the port's
// vdev must have been given to init_eal); then owned by the packet lcore like
// any PacketIo. A DpdkWanPort outlives its DpdkWanIos.
#pragma once

#include <rte_ring.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codec/roce.h"
#include "datapath/dpdk_port.h"
#include "io/packet_io.h"

namespace rowan::gw {

/// Why the WAN port dropped a frame or a datagram; names in kWanDropNames.
enum class WanDrop : uint8_t {
  kRunt,            ///< shorter than its headers claim, or than an Ethernet header
  kNotForUs,        ///< unicast to another MAC, or IPv4 to another address
  kUnsupportedL2,   ///< an ethertype other than IPv4/ARP (VLAN, IPv6, ...)
  kMalformedIp,     ///< bad version, IHL or total length
  kBadIpChecksum,   ///< IPv4 header checksum wrong
  kFragment,        ///< an IPv4 fragment (the transport never fragments)
  kNotUdp,          ///< IPv4 but not UDP
  kWrongPort,       ///< UDP to a port other than the link's
  kWrongSource,     ///< UDP from anyone but the peer's address and port
  kBadUdpChecksum,  ///< UDP checksum wrong
  kTruncated,       ///< payload larger than the receive buffer
  kMalformedArp,    ///< ARP that is not Ethernet/IPv4 or is short
  kTxUnresolved,    ///< datagram sent while the next hop's MAC is unknown
  kTxOversize,      ///< datagram larger than the link's MTU allows
  kSteerFull,       ///< for another worker's port, whose steering ring was full
  kCount
};
extern const char* const kWanDropNames[];

struct DpdkWanOptions {
  std::string device;                    ///< PCI address or vdev spec (given to init_eal too)
  roce::IpAddr address;                  ///< the gateway's own IPv4 address on the WAN port
  uint8_t prefix_len = 24;               ///< its subnet: a peer inside it is on-link
  uint16_t port = 47910;                 ///< own UDP port (queue w: port + w)
  roce::IpAddr peer;                     ///< the peer gateway's address ...
  uint16_t peer_port = 47910;            ///< ... and UDP port (queue w: peer_port + w)
  std::optional<roce::IpAddr> next_hop;  ///< router toward the peer when it is not on-link
  uint32_t mtu = 1500;                   ///< IP MTU of the link
  uint16_t rx_ring = 1024;
  uint16_t tx_ring = 1024;
  uint32_t nb_mbufs = 8191;
  Duration arp_retry = Duration::from_ms(200);  ///< while unresolved
  Duration arp_refresh = Duration::from_s(30);  ///< re-ask a resolved next hop this often
};

/// Counters beyond IoStats: drops by reason and ARP.
struct DpdkWanStats {
  std::array<uint64_t, static_cast<size_t>(WanDrop::kCount)> drops{};
  uint64_t arp_requests_sent = 0;
  uint64_t arp_replies_sent = 0;
  uint64_t arp_learned = 0;  ///< times the next hop's MAC was (re)learned
  uint64_t steered_out = 0;  ///< datagrams handed to another worker's ring
  uint64_t steered_in = 0;   ///< datagrams taken from this worker's ring
};

/// A WAN link's DPDK port with a queue pair per worker, and what the
/// workers share on it: the next hop's MAC and the steering rings.
class DpdkWanPort {
 public:
  /// Opens the port with `queues` queue pairs (Port's constructor) and,
  /// with more than one, a steering ring per queue and, where the PMD takes
  /// them, a flow rule per queue. Throws std::runtime_error, or
  /// std::invalid_argument for a non-IPv4 address or an off-link peer
  /// without next_hop.
  DpdkWanPort(const DpdkWanOptions& opts, uint16_t queues = 1);
  ~DpdkWanPort();
  DpdkWanPort(const DpdkWanPort&) = delete;
  DpdkWanPort& operator=(const DpdkWanPort&) = delete;

  const DpdkWanOptions& options() const noexcept { return opts_; }
  Port& port() noexcept { return port_; }
  const Port& port() const noexcept { return port_; }
  uint16_t queues() const noexcept { return port_.queues(); }
  /// Queue q's steering ring (null with one queue).
  rte_ring* ring(uint16_t q) const noexcept { return q < rings_.size() ? rings_[q] : nullptr; }
  /// How many of the queues a flow rule steers to (0: the PMD took none).
  uint16_t flow_rules() const noexcept { return flow_rules_; }

  /// The next hop's MAC and when it was last learned (false: not yet).
  bool next_hop(std::array<uint8_t, 6>& mac, TimePoint& learned) const noexcept;
  void learn(const std::array<uint8_t, 6>& mac, TimePoint now) noexcept;

 private:
  void add_flow_rules();

  DpdkWanOptions opts_;
  Port port_;
  std::vector<rte_ring*> rings_;
  std::vector<void*> flows_;  ///< rte_flow handles, one per steered queue
  uint16_t flow_rules_ = 0;
  /// The MAC in the low 48 bits, bit 48 set once known; and its time.
  std::atomic<uint64_t> next_mac_{0};
  std::atomic<int64_t> learned_ns_{0};
};

/// A site's dpdk WAN ports by link name, each with a queue pair per worker:
/// opened by the first worker that asks (workers are built one after
/// another on the main thread), then shared.
class DpdkWanPorts {
 public:
  explicit DpdkWanPorts(uint16_t queues) : queues_(queues == 0 ? 1 : queues) {}
  /// The port of link `name`, opened with `opts` (base ports) if it is not yet.
  DpdkWanPort& open(const std::string& name, const DpdkWanOptions& opts);
  uint16_t queues() const noexcept { return queues_; }

 private:
  uint16_t queues_;
  std::vector<std::pair<std::string, std::unique_ptr<DpdkWanPort>>> ports_;
};

class DpdkWanIo final : public io::PacketIo {
 public:
  /// Opens a port of its own with one queue (DpdkWanPort). Throws as it does.
  explicit DpdkWanIo(const DpdkWanOptions& opts);
  /// Queue `queue` of a shared port: UDP port options().port + queue, to the
  /// peer's options().peer_port + queue.
  DpdkWanIo(DpdkWanPort& shared, uint16_t queue);
  ~DpdkWanIo() override;

  size_t send_burst(std::span<const io::TxDatagram> pkts, TimePoint now) noexcept override;
  /// An mbuf of the port's pool, lent past its headers' room (packet_io.h):
  /// a datagram written there is framed in place, without a copy.
  uint8_t* tx_buffer(size_t i) noexcept override;
  size_t recv_burst(std::span<io::RxDatagram> bufs, TimePoint now) noexcept override;
  /// Lends received mbufs (packet_io.h lend_rx): a datagram's data points
  /// into its mbuf, held until rx_done.
  bool lend_rx(bool on) noexcept override;
  void rx_done() noexcept override;
  uint32_t max_datagram() const noexcept override { return opts_.mtu - kIpLen - kUdpLen; }
  const io::IoStats& stats() const noexcept override { return stats_; }
  const DpdkWanStats& wan_stats() const noexcept { return wan_; }
  PortStats port_stats() const { return port_.stats(); }
  const Port& port() const { return port_; }
  /// The queue pair this worker owns (0 with one).
  uint16_t queue() const noexcept { return queue_; }
  /// Whether the next hop's MAC is known.
  bool resolved() const noexcept;
  /// Idle back-off: the port has no completion to wait on, so this sleeps.
  static void wait(Duration timeout) noexcept;

  static constexpr uint32_t kEthLen = 14;
  static constexpr uint32_t kIpLen = 20;
  static constexpr uint32_t kUdpLen = 8;
  static constexpr uint32_t kHeaders = kEthLen + kIpLen + kUdpLen;

 private:
  static constexpr uint16_t kBurst = 32;
  /// Refreshes the next hop's MAC from the shared port: false while unknown.
  bool load_next_hop() noexcept;
  /// Checks one received frame: true with `b` filled (its mbuf then lent or
  /// freed); false when it was consumed otherwise (ARP, dropped, steered).
  bool take(rte_mbuf* m, io::RxDatagram& b, TimePoint burst_time, TimePoint now) noexcept;
  /// Another worker's queue when `eth` is UDP to its port, else -1.
  int steer_target(const uint8_t* eth, uint32_t len) const noexcept;
  void handle_arp(rte_mbuf* m, uint8_t* eth, uint32_t len, TimePoint now) noexcept;
  void send_arp_request(TimePoint now) noexcept;
  /// Writes Ethernet, IPv4 and UDP headers at `eth`, and the payload of
  /// `d` after them unless it is there already (a lent buffer).
  void build_frame(uint8_t* eth, const io::TxDatagram& d) noexcept;
  /// The lent mbuf whose payload is at `data`, taken back from its slot
  /// (`slot`), or null (`slot` -1) when `data` is the caller's own memory.
  rte_mbuf* take_lent(const uint8_t* data, int& slot) noexcept;
  /// Checks an IPv4 frame; returns the UDP payload (and its length) or null.
  const uint8_t* accept_ipv4(const uint8_t* eth, uint32_t len, uint32_t& payload_len,
                             io::Ecn& ecn) noexcept;
  void count(WanDrop why) noexcept { ++wan_.drops[static_cast<size_t>(why)]; }

  std::unique_ptr<DpdkWanPort> owned_;  ///< the one-queue constructor's port
  DpdkWanPort& shared_;
  uint16_t queue_ = 0;
  DpdkWanOptions opts_;  ///< the shared port's, with this queue's UDP ports
  Port& port_;
  rte_ring* ring_ = nullptr;  ///< this queue's steering ring (several queues)
  std::array<uint8_t, 6> mac_{};
  std::array<uint8_t, 4> own_{};   ///< own IPv4 address
  std::array<uint8_t, 4> peer_{};  ///< the peer's IPv4 address
  roce::IpAddr next_hop_ip_;       ///< the next hop (the peer when on-link)
  std::array<uint8_t, 6> next_mac_{};
  bool resolved_ = false;
  TimePoint learned_at_;
  TimePoint last_request_;
  bool requested_ = false;
  uint16_t ip_id_ = 0;
  /// Lent transmit mbufs by tx_buffer index (null: none lent there), and
  /// where take_lent's search starts (the next in a burst's order).
  std::array<rte_mbuf*, kBurst> lent_{};
  size_t lent_hint_ = 0;
  /// Received mbufs whose payload was lent (lend_rx), until rx_done: room
  /// for a caller that reads several bursts before it is done (SecureIo).
  static constexpr size_t kHoldMax = 8 * kBurst;
  bool lend_rx_ = false;
  std::array<rte_mbuf*, kHoldMax> held_{};
  size_t nheld_ = 0;
  io::IoStats stats_;
  DpdkWanStats wan_;
};

}  // namespace rowan::gw
