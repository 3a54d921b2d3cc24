// A PacketIo over a kernel UDP socket driven through io_uring (liburing), for
// gateways without a DPDK NIC on the WAN side (and for librowan's message
// channel). Receives are kept posted in the ring (recvmsg with the ECN/TOS
// control message and the kernel's receive timestamp, SO_TIMESTAMPNS, handed
// out as RxDatagram::rx_time); sends copy each datagram into a preallocated
// ring of send memory and are submitted once per burst. No allocation after
// construction.
//
// Segmentation offload (udp(7), UDP_SEGMENT / UDP_GRO):
// - send: a run of consecutive datagrams of a burst, all of one size (the
//   last may be shorter), goes as one sendmsg of one buffer with a
//   UDP_SEGMENT control message: the kernel builds one skb and cuts it into
//   datagrams at gso_size as late as it can (on loopback, or to a GRO
//   socket, never). At most kGsoMaxSegments datagrams and kGsoMaxBytes
//   bytes per run. A lone datagram, or one of another size, goes alone.
// - receive: the socket sets UDP_GRO, so the kernel may hand one receive a
//   train of datagrams (a GSO send from loopback, or what GRO coalesced on
//   the NIC); the UDP_GRO control message gives the segment size, and
//   recv_burst hands them out one datagram each, in order, with the
//   train's ECN mark and timestamp.
// - fallback: a kernel without UDP_SEGMENT (getsockopt at construction) or a
//   socket/route that refuses a GSO send (EIO, EINVAL, EOPNOTSUPP,
//   ENOPROTOOPT in its completion) turns GSO off for this socket once,
//   counts it (UdpStats::gso_fallbacks), and re-sends the refused run one
//   datagram per sendmsg. A kernel that refuses UDP_GRO leaves receives
//   one datagram each (UdpStats::gro_unsupported).
//
// Threading: one thread owns it (PacketIo's rule).
#pragma once

#include <liburing.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <string>
#include <vector>

#include "io/packet_io.h"

namespace rowan::io {

struct UdpEndpoint {
  sockaddr_storage addr{};
  socklen_t len = 0;
  /// Parses "198.19.0.2:47910" or "[2001:2::2]:47910"; throws std::invalid_argument.
  static UdpEndpoint parse(const std::string& text);
  std::string to_string() const;
  bool same(const sockaddr_storage& a) const;
};

struct UdpUringOptions {
  UdpEndpoint bind;  ///< local address and port
  /// Where datagrams go; only datagrams from it are accepted. Empty (len 0):
  /// an unconnected socket shared by several peers, which accepts every
  /// source and is used through recv_burst_from/send_burst_to
  /// (daemon/rowand/datapath/wan_link_mux.h).
  UdpEndpoint peer;
  uint32_t max_datagram = 1472;  ///< UDP payload bytes (MTU − IP − UDP)
  /// Receives kept posted. Each one waiting on an empty socket is an entry
  /// in the socket's wait queue, and every sent datagram's free (sock_wfree)
  /// walks that queue with interrupts off: 256 posted receives made it 29 %
  /// of a passthrough gateway's CPU and capped its WAN sender at ~110 Mbit/s
  /// (bench/results/pt-udp-ceiling/latest.md). One burst's worth is enough: the
  /// socket buffer holds the rest until the next reap re-posts them.
  uint32_t rx_slots = 32;
  uint32_t tx_slots = 256;      ///< sends in flight at most
  int socket_buffer = 8 << 20;  ///< SO_RCVBUF/SO_SNDBUF bytes
  bool gso = true;              ///< coalesce equal-size sends (UDP_SEGMENT)
  bool gro = true;              ///< accept coalesced receives (UDP_GRO)
};

/// The kernel's limits on one GSO send (udp(7); net/ipv4/udp.c).
inline constexpr uint32_t kGsoMaxSegments = 64;
/// IP's 16-bit total length less the IPv4 and UDP headers.
inline constexpr uint32_t kGsoMaxBytes = 65535 - 20 - 8;
/// Bytes of one receive buffer when UDP_GRO is on: the largest train.
inline constexpr uint32_t kGroBufferBytes = 65536;

/// Extra counters of this backend.
struct UdpStats {
  uint64_t rx_wrong_source = 0;  ///< datagrams from anyone but the peer (dropped)
  uint64_t rx_errors = 0;
  uint64_t tx_errors = 0;       ///< sendmsg failures (e.g. unreachable), datagram lost
  uint64_t rx_timestamped = 0;  ///< datagrams delivered with a kernel receive timestamp
  /// Datagrams that arrived after the `now` recv_burst was called with: the
  /// caller's clock read was stale by the time they were reaped (a
  /// preempted or sleeping event loop); stamped with `now`, their RTT
  /// samples would read below the path.
  uint64_t rx_after_now = 0;
  Duration rx_after_now_max;      ///< the largest such gap
  uint64_t tx_gso_sends = 0;      ///< sendmsg calls that carried several datagrams
  uint64_t tx_gso_datagrams = 0;  ///< datagrams that went in those
  /// Times GSO was turned off: the kernel lacks UDP_SEGMENT (at
  /// construction) or refused a GSO send; 0 or 1 per socket.
  uint64_t gso_fallbacks = 0;
  uint64_t rx_gro_trains = 0;     ///< receives that held several datagrams
  uint64_t rx_gro_datagrams = 0;  ///< datagrams split out of those
  uint64_t gro_unsupported = 0;   ///< 1 when the kernel refused UDP_GRO
};

class UdpUringIo final : public PacketIo {
 public:
  /// Creates, binds and sets up the ring; throws std::system_error.
  explicit UdpUringIo(const UdpUringOptions& opts);
  ~UdpUringIo() override;

  size_t send_burst(std::span<const TxDatagram> pkts, TimePoint now) noexcept override;
  size_t recv_burst(std::span<RxDatagram> bufs, TimePoint now) noexcept override;
  /// As recv_burst; `from[i]` is who sent `bufs[i]` (`from` holds bufs.size()).
  size_t recv_burst_from(std::span<RxDatagram> bufs, UdpEndpoint* from, TimePoint now) noexcept;
  /// Lends received datagrams where the kernel wrote them (packet_io.h
  /// lend_rx): a receive slot is posted again only at rx_done.
  bool lend_rx(bool on) noexcept override;
  void rx_done() noexcept override;
  /// As send_burst, to `to` rather than the options' peer.
  size_t send_burst_to(std::span<const TxDatagram> pkts, const UdpEndpoint& to,
                       TimePoint now) noexcept;
  uint32_t max_datagram() const noexcept override { return opts_.max_datagram; }
  const IoStats& stats() const noexcept override { return stats_; }
  const UdpStats& udp_stats() const noexcept { return udp_stats_; }
  /// Blocks up to `timeout` for a completion (an idle event loop's sleep),
  /// or, with `also_fd` >= 0, until that descriptor is readable (a poll in
  /// the same ring: e.g. the local port's doorbell, gateway/rx_waker.h).
  void wait(Duration timeout, int also_fd = -1) noexcept;
  int fd() const { return fd_; }
  /// The options' peer (len 0 for a shared socket).
  const UdpEndpoint& peer() const { return opts_.peer; }
  /// Several sockets' idle sleep (a channel over several paths): blocks up
  /// to `timeout` until any of `ios` has a completion to reap, by ppoll on
  /// their rings' descriptors (readable while a ring holds completions).
  /// Returns at once when one already has a datagram ready. At most 16 are
  /// watched.
  static void wait_any(std::span<UdpUringIo* const> ios, Duration timeout) noexcept;
  /// Whether sends still coalesce (false after a fallback or with opts.gso off).
  bool gso_enabled() const noexcept { return gso_; }
  /// Whether the socket accepts coalesced receives.
  bool gro_enabled() const noexcept { return gro_; }

 private:
  struct Slot {
    msghdr msg{};
    iovec iov{};
    sockaddr_storage addr{};
    // rx: TOS/TCLASS, SCM_TIMESTAMPNS and UDP_GRO; tx: UDP_SEGMENT.
    alignas(cmsghdr) uint8_t control[128]{};
    uint32_t len = 0;     ///< bytes (rx: as received; tx: the whole run)
    uint32_t seg = 0;     ///< datagram size of a train (rx: UDP_GRO, tx: gso_size); 0: one
    uint32_t off = 0;     ///< rx: bytes of the train handed out so far
    uint32_t count = 0;   ///< tx: datagrams in the run
    uint32_t bytes = 0;   ///< tx: bytes of send memory held, with any wasted tail
    bool ready = false;   ///< rx: completed, waiting to be handed out
    bool parsed = false;  ///< rx: control messages read into ecn/rx_time/seg
    bool done = false;    ///< tx: completed (memory released in FIFO order)
    Ecn ecn = Ecn::kNotEct;
    TimePoint rx_time;
  };
  void post_recv(uint32_t i) noexcept;
  void reap() noexcept;
  /// Reads a completed receive's control messages into the slot.
  void parse_rx(Slot& s, bool* have_offset, int64_t* mono_minus_real) noexcept;
  /// Largest run (bytes) send memory can take contiguously now.
  uint32_t tx_room() const noexcept;
  /// Queues one sendmsg of `len` bytes holding `count` datagrams of `seg`
  /// bytes (the last may be shorter) to `to`; the caller checked tx_room()
  /// and that a message slot is free. Returns where to copy the bytes.
  uint8_t* queue_send(uint32_t len, uint32_t count, uint32_t seg, const sockaddr_storage& to,
                      socklen_t to_len) noexcept;
  /// Releases completed sends' memory, oldest first.
  void release_sends() noexcept;
  /// Re-sends the runs a GSO refusal sent back, one datagram each.
  void resend_refused() noexcept;
  void submit() noexcept;

  UdpUringOptions opts_;
  int fd_ = -1;
  io_uring ring_{};
  bool ring_ok_ = false;
  std::vector<uint8_t> rx_mem_, tx_mem_;
  std::vector<Slot> rx_, tx_;
  std::vector<uint32_t> rx_ready_;  ///< FIFO of completed receive slots
  size_t rx_ready_head_ = 0;
  uint32_t rx_cap_ = 0;  ///< bytes of one receive buffer
  // Send memory: a byte ring, taken at tx_head_ and released in the order of
  // the message FIFO tx_[tx_first_ .. tx_first_ + tx_count_).
  uint32_t tx_head_ = 0, tx_used_ = 0;
  uint32_t tx_first_ = 0, tx_count_ = 0;
  std::vector<uint32_t> tx_refused_;  ///< runs a GSO refusal left to re-send
  bool gso_ = false, gro_ = false;
  uint32_t gso_max_bytes_ = kGsoMaxBytes;
  uint32_t pending_submit_ = 0;
  bool lend_rx_ = false;
  std::vector<uint32_t> rx_held_;  ///< consumed slots whose datagrams are lent, until rx_done
  int polled_fd_ = -1;             ///< the descriptor a posted poll watches (-1: none)
  IoStats stats_;
  UdpStats udp_stats_;
};

}  // namespace rowan::io
