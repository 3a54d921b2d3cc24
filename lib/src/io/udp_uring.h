// A PacketIo over a kernel UDP socket driven through io_uring (liburing), for
// gateways without a DPDK NIC on the WAN side (and for librowan's message
// channel). Receives are kept posted in the ring (recvmsg with the ECN/TOS
// control message and the kernel's receive timestamp, SO_TIMESTAMPNS, handed
// out as RxDatagram::rx_time); sends copy each datagram into a preallocated slot and are
// submitted once per burst. No allocation after construction.
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
  /// (daemon/rowand/wan_link_mux.h).
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
};

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
  Duration rx_after_now_max;  ///< the largest such gap
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

 private:
  struct Slot {
    msghdr msg{};
    iovec iov{};
    sockaddr_storage addr{};
    alignas(cmsghdr) uint8_t control[128]{};  // TOS/TCLASS and SCM_TIMESTAMPNS
    uint32_t len = 0;
    bool ready = false;  ///< rx: completed, waiting to be handed out
  };
  void post_recv(uint32_t i) noexcept;
  void reap() noexcept;

  UdpUringOptions opts_;
  int fd_ = -1;
  io_uring ring_{};
  bool ring_ok_ = false;
  std::vector<uint8_t> rx_mem_, tx_mem_;
  std::vector<Slot> rx_, tx_;
  std::vector<uint32_t> rx_ready_;  ///< FIFO of completed receive slots
  size_t rx_ready_head_ = 0;
  std::vector<uint32_t> tx_free_;
  uint32_t pending_submit_ = 0;
  int polled_fd_ = -1;  ///< the descriptor a posted poll watches (-1: none)
  IoStats stats_;
  UdpStats udp_stats_;
};

}  // namespace rowan::io
