// One UDP socket shared by the connections of several peers on one
// [[wan.link]] (ARCHITECTURE.md "Sites"): the link binds once, and each peer
// gets a UdpLinkPort, a PacketIo that sends to that peer's endpoint and
// receives the datagrams the mux sorted to it.
//
// Sorting, per received datagram:
// - plaintext links (local.insecure): by the transport header's connection
//   id (transport/wire.h), which both gateways of a pair derive alike
//   (worker.h pair_connection_id);
// - encrypted links: the transport header is inside the AEAD, so by the
//   source address, the peer's endpoint (the connection id is derived from
//   it); SecureIo above the port then authenticates every datagram.
// A datagram nobody claims is dropped and counted under its reason
// (MuxDrop). A port whose queue is full drops and counts too.
//
// A port's recv_burst first hands out what the mux already queued for it,
// then reads one burst from the socket and sorts it: a peer's datagrams wait
// in its queue at most until that peer's driver runs, which is the same
// pass of the worker. A link used by one peer only keeps its own connected
// socket (worker.cc) and does not go through here.
//
// Threading: one worker (lcore) owns the mux and its ports, like every
// PacketIo. No allocation after add_port().
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "io/udp_uring.h"

namespace rowan::gw {

/// Why the mux dropped a received datagram; names in kMuxDropNames.
enum class MuxDrop : uint8_t {
  kUnknownConnection,  ///< plaintext: no port has the header's connection id (or no header)
  kUnknownSource,      ///< encrypted: no port's peer sent it
  kQueueFull,          ///< the owning port's queue was full
  kCount
};
extern const char* const kMuxDropNames[];

class UdpLinkMux;

/// One peer's view of a shared link.
class UdpLinkPort final : public io::PacketIo {
 public:
  /// Datagrams a port holds for its peer between two of its polls.
  static constexpr uint32_t kQueue = 256;

  size_t send_burst(std::span<const io::TxDatagram> pkts, TimePoint now) noexcept override;
  size_t recv_burst(std::span<io::RxDatagram> bufs, TimePoint now) noexcept override;
  uint32_t max_datagram() const noexcept override;
  const io::IoStats& stats() const noexcept override { return stats_; }
  const io::UdpEndpoint& peer() const noexcept { return peer_; }
  uint64_t connection_id() const noexcept { return connection_id_; }
  UdpLinkMux& mux() const noexcept { return mux_; }

 private:
  friend class UdpLinkMux;
  UdpLinkPort(UdpLinkMux& mux, const io::UdpEndpoint& peer, uint64_t connection_id,
              uint32_t max_datagram);
  /// Queues one datagram (the mux's sort); false when the queue is full.
  bool push(const io::RxDatagram& d) noexcept;

  struct Entry {
    uint32_t len = 0;
    io::Ecn ecn = io::Ecn::kNotEct;
    TimePoint rx_time;
  };
  UdpLinkMux& mux_;
  io::UdpEndpoint peer_;
  uint64_t connection_id_;
  uint32_t dgram_;
  std::vector<uint8_t> mem_;
  std::array<Entry, kQueue> q_{};
  uint32_t head_ = 0, len_ = 0;
  io::IoStats stats_;
};

class UdpLinkMux {
 public:
  enum class Key : uint8_t { kConnectionId, kSource };
  /// Binds `opts.bind` (opts.peer must be empty); throws std::system_error.
  UdpLinkMux(const io::UdpUringOptions& opts, Key key);
  UdpLinkMux(const UdpLinkMux&) = delete;
  UdpLinkMux& operator=(const UdpLinkMux&) = delete;

  /// A port for the peer at `peer` whose connection is `connection_id`
  /// (set-up only; the mux owns it). Throws std::invalid_argument when a port
  /// already has that endpoint or connection id.
  UdpLinkPort& add_port(const io::UdpEndpoint& peer, uint64_t connection_id);

  /// Reads one burst from the socket and sorts it into the ports' queues;
  /// datagrams for `into` fill `bufs` first (no queueing). Returns how many
  /// went into `bufs`.
  size_t pump(UdpLinkPort& into, std::span<io::RxDatagram> bufs, TimePoint now) noexcept;

  io::UdpUringIo& socket() noexcept { return sock_; }
  const io::UdpUringIo& socket() const noexcept { return sock_; }
  const std::vector<std::unique_ptr<UdpLinkPort>>& ports() const noexcept { return ports_; }
  const std::array<uint64_t, static_cast<size_t>(MuxDrop::kCount)>& drops() const noexcept {
    return drops_;
  }

 private:
  friend class UdpLinkPort;
  UdpLinkPort* owner(const io::RxDatagram& d, const io::UdpEndpoint& from) noexcept;

  io::UdpUringIo sock_;
  Key key_;
  std::vector<std::unique_ptr<UdpLinkPort>> ports_;
  std::vector<uint8_t> stage_mem_;
  std::vector<io::RxDatagram> stage_;
  std::vector<io::UdpEndpoint> from_;
  std::array<uint64_t, static_cast<size_t>(MuxDrop::kCount)> drops_{};
};

}  // namespace rowan::gw
