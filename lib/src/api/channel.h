// The message channel behind rowan_connect/rowan_listen/rowan_channel_*:
// length-prefixed messages on stream 0 of one transport::Connection, driven
// by transport::Driver over an io::UdpUringIo (the gateway's transport and
// congestion controllers, no second implementation).
//
// Handshake (its own datagrams, before the transport starts; the codec is
// channel_handshake.h):
//   client, from an ephemeral UDP port P:  HELLO{nonce, cc, rate, rtt} -> server listen port
//   server opens a new socket on port D;   ACCEPT{nonce, connection id, D, rate, rtt} -> P
//   Both ends size their transport (windows, buffers) from the same rate and
//   RTT — the ones in ACCEPT — because a connection assumes its peer's
//   initial flow-control window equals its own.
//   both then run the transport between P and D with that connection id.
//   A lost ACCEPT is recovered by the client repeating HELLO (the server
//   answers a repeated nonce from the same address with the same ACCEPT).
//
// Link security (rowan_listen_secure/rowan_connect_secure): a crypto::SecureIo
// with the caller's static keys wraps the channel's UDP socket, so every
// transport datagram is sealed (AES-256-GCM, anti-replay, rekeying) exactly
// as on rowand's WAN links. HELLO and ACCEPT carry flags (byte 63, bit 0:
// secure); a server rejects a hello whose flag differs from its own, and a
// secure client returns only once the key handshake completed.
//
// Paths (rowan_connect_paths): a channel may run over several (local,
// remote) UDP address pairs, one io::UdpUringIo socket per path, each its
// transport path (transport::Driver sends each datagram on its path's
// socket). HELLO on path 0 names the path count; each further path then
// sends JOIN from its own address to the server's listening port at that
// path's server address (channel_handshake.h); the listener, which learns
// the address each datagram arrived at (IP_PKTINFO), opens the path's socket
// on that address, answers from it, and returns the channel from accept()
// once every path joined. With link security each path runs its own
// session. A JOIN for no channel being set up, or from a second address for
// one path, is dropped and counted (rowan_listener::dropped()).
//
// Message framing on the stream: 8-byte header (u32 little-endian length,
// u32 reserved zero), then the bytes.
//
// Liveness: a channel that has heard nothing from its peer for a third of
// idle_timeout_ms sends a keepalive (a transport PING, which the peer's
// transport acknowledges); after idle_timeout_ms of silence the channel fails
// with ROWAN_ERR_TIMEOUT, so a server notices a client that went away (or a
// hello whose client never came) and frees the channel. Both ends only answer
// while their application polls.
//
// Threading: one thread at a time per channel/listener (the C API's rule).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../../include/rowan/rowan.h"
#include "api/channel_handshake.h"
#include "base/clock.h"
#include "crypto/keys.h"
#include "crypto/secure_io.h"
#include "io/udp_uring.h"
#include "transport/connection.h"
#include "transport/driver.h"

namespace rowan::api {

inline constexpr size_t kMessageHeader = 8;

/// Defaults applied to a copy of the caller's options.
struct ChannelParams {
  std::string cc;  ///< empty: transport default
  double rate_bps = 1e9;
  double rtt_s = 0.1;
  uint32_t max_datagram = 1472;
  uint32_t max_queued_sends = 1024;
  int handshake_timeout_ms = 5000;
  int idle_timeout_ms = 15000;  ///< 0: no keepalives, never times out
  bool secure = false;          ///< link security with the keys below
  crypto::Key private_key{};
  crypto::Key peer_public{};
};

/// Keepalives go out after this fraction of the idle timeout without news.
inline constexpr int64_t kKeepalivesPerIdleTimeout = 3;
ChannelParams channel_params(const rowan_channel_options* o);

/// Paths per channel (the public ROWAN_MAX_CHANNEL_PATHS).
inline constexpr size_t kMaxChannelPaths = ROWAN_MAX_CHANNEL_PATHS;

/// One path a client asks for: addresses as text, its BDP basis (0: params').
struct ClientPath {
  std::string local;   ///< "ADDR" or "ADDR:PORT"; empty: the wildcard address
  std::string remote;  ///< the server's listening address on this path
  double rate_bps = 0;
  double rtt_s = 0;
};

/// Client side of the handshake, then the channel. `rtt_given`: keep
/// params.rtt_s instead of the handshake's measurement. Returns a status;
/// `error` gets the detail.
int connect_channel(const std::string& server, const ChannelParams& params, bool rtt_given,
                    rowan_channel** out, std::string* error);
/// The same over paths.size() paths (1 .. kMaxChannelPaths).
int connect_channel_paths(const std::vector<ClientPath>& paths, const ChannelParams& params,
                          bool rtt_given, rowan_channel** out, std::string* error);

/// A path's socket: bound to `bind`, connected to `peer`. Throws std::system_error.
std::unique_ptr<io::UdpUringIo> open_path_socket(const io::UdpEndpoint& bind,
                                                 const io::UdpEndpoint& peer,
                                                 uint32_t max_datagram);
/// The address and port `socket` is bound to.
io::UdpEndpoint local_address(const io::UdpUringIo& socket);

}  // namespace rowan::api

struct rowan_channel {
 public:
  /// Throws std::system_error (socket, ring) or cc::CcParamError (cc name).
  rowan_channel(const rowan::api::ChannelParams& p, const rowan::io::UdpEndpoint& bind,
                const rowan::io::UdpEndpoint& peer, uint64_t connection_id);
  /// Over sockets[i] for path i (sockets.size() == paths.size() >= 1), each
  /// path's rate and RTT from paths[i]. Throws as above.
  rowan_channel(const rowan::api::ChannelParams& p,
                std::vector<std::unique_ptr<rowan::io::UdpUringIo>> sockets,
                const std::vector<rowan::transport::PathConfig>& paths, uint64_t connection_id);
  /// Tests: runs over `io` (not owned) on `clock`; poll() never sleeps (a
  /// FakeClock test calls poll(0) and advances the clock itself).
  rowan_channel(const rowan::api::ChannelParams& p, rowan::io::PacketIo& io,
                const rowan::Clock& clock, const rowan::io::UdpEndpoint& peer,
                uint64_t connection_id);
  /// Tests: path i over ios[i] (not owned) with paths[i]'s rate and RTT.
  rowan_channel(const rowan::api::ChannelParams& p, std::vector<rowan::io::PacketIo*> ios,
                const std::vector<rowan::transport::PathConfig>& paths, const rowan::Clock& clock,
                const rowan::io::UdpEndpoint& peer, uint64_t connection_id);
  ~rowan_channel();
  rowan_channel(const rowan_channel&) = delete;
  rowan_channel& operator=(const rowan_channel&) = delete;

  int send(const void* buf, size_t len, rowan_send_cb cb, void* user);
  int post_recv(void* buf, size_t cap, rowan_recv_cb cb, void* user);
  int poll(int timeout_ms);
  int flush(int timeout_ms);
  void close();
  void fill_stats(rowan_channel_stats* out) const;
  size_t path_count() const { return ios_.size(); }
  /// `index` below path_count().
  void fill_path_stats(size_t index, rowan_channel_path_stats* out) const;
  uint64_t id() const { return id_; }
  const rowan::io::UdpEndpoint& peer() const { return peer_; }
  /// The UDP port path 0's socket is bound to.
  int local_port() const;
  int fd() const { return udp_.empty() ? -1 : udp_[0]->fd(); }
  /// Without link security: true. With it: every path has a session key to send on.
  bool secure_ready() const;
  /// Keepalive PINGs sent so far.
  uint64_t keepalives_sent() const { return keepalives_sent_; }
  rowan::transport::Connection& connection() { return *conn_; }

 private:
  struct PendingSend {
    const uint8_t* buf;
    size_t len;
    rowan_send_cb cb;
    void* user;
    uint8_t header[rowan::api::kMessageHeader];
    uint64_t written;  // header + body bytes handed to the transport
    uint64_t end;      // stream offset of the message's last byte + 1
  };
  struct PostedRecv {
    uint8_t* buf;
    size_t cap;
    rowan_recv_cb cb;
    void* user;
  };
  void init_transport(uint64_t connection_id,
                      const std::vector<rowan::transport::PathConfig>& paths);
  /// Sleeps up to `d` for a datagram on any path's socket.
  void wait(rowan::Duration d);
  /// One pass of transport work at `now`; returns callbacks run and sets *next.
  int step(rowan::TimePoint now, rowan::TimePoint* next);
  /// Queues a PING when the peer has been quiet for a keepalive interval;
  /// returns when the next one would be due (infinite when disabled).
  rowan::TimePoint keepalive(rowan::TimePoint now);
  void push_sends(rowan::TimePoint now);
  int pull_recvs(rowan::TimePoint now);
  int complete_sends();
  int fail_all(int status);
  bool peer_done() const;

  rowan::MonotonicClock own_clock_;
  const rowan::Clock& clock_;
  rowan::api::ChannelParams params_;
  rowan::io::UdpEndpoint peer_;                // path 0's
  std::vector<rowan::io::UdpEndpoint> peers_;  // each path's (empty over test PacketIos)
  uint64_t id_;
  std::vector<std::unique_ptr<rowan::io::UdpUringIo>> udp_;       // per path; none over a test's
  std::vector<std::unique_ptr<rowan::crypto::SecureIo>> secure_;  // link security over udp_[i]
  std::vector<rowan::io::PacketIo*> ios_;                         // what path i runs over
  std::unique_ptr<rowan::transport::Connection> conn_;
  std::unique_ptr<rowan::transport::Driver> driver_;
  std::deque<PendingSend> sends_;
  size_t unwritten_ = 0;  // index of the first send not wholly written
  uint64_t written_total_ = 0;
  std::deque<PostedRecv> recvs_;
  uint8_t rx_header_[rowan::api::kMessageHeader] = {};
  size_t rx_header_got_ = 0;
  uint64_t rx_len_ = 0;
  uint64_t rx_got_ = 0;
  uint64_t last_rx_packets_ = 0;
  rowan::TimePoint last_rx_time_;
  rowan::TimePoint last_ping_;
  uint64_t keepalives_sent_ = 0;
  uint64_t messages_sent_ = 0, messages_received_ = 0, bytes_sent_ = 0, bytes_received_ = 0;
  bool failed_ = false;
  int fail_status_ = ROWAN_OK;
};

struct rowan_listener {
 public:
  /// Throws std::system_error / std::invalid_argument.
  rowan_listener(const std::string& bind, const rowan::api::ChannelParams& p);
  ~rowan_listener();
  rowan_listener(const rowan_listener&) = delete;
  rowan_listener& operator=(const rowan_listener&) = delete;

  /// ROWAN_OK and *out, ROWAN_ERR_TIMEOUT, or an error.
  int accept(int timeout_ms, rowan_channel** out);
  int fd() const { return fd_; }
  int port() const;
  /// Handshake datagrams dropped: not a handshake, a JOIN for no channel
  /// being set up or for a path another address joined, a multipath HELLO
  /// beyond kMaxPendingSetups, a set-up that timed out.
  uint64_t dropped() const { return dropped_; }

 private:
  /// Multipath set-ups waiting for their paths at once; a HELLO beyond is dropped.
  static constexpr size_t kMaxPendingSetups = 64;
  /// A channel over several paths whose paths have not all joined yet.
  struct Pending {
    rowan::api::ChannelParams params;
    uint64_t nonce = 0;
    std::vector<std::unique_ptr<rowan::io::UdpUringIo>> sockets;  // null: not joined yet
    std::vector<rowan::transport::PathConfig> paths;
    std::vector<std::string> from;  // the client address each path joined from
    size_t joined = 0;
    rowan::TimePoint expires;
  };
  /// What we answered, and the address we answered from (JOINs).
  struct Answer {
    rowan::api::Handshake reply;
    sockaddr_storage local{};
    bool has_local = false;
  };
  /// A HELLO: answers it; *out when its channel is complete.
  int on_hello(const rowan::api::Handshake& h, const rowan::io::UdpEndpoint& client,
               const sockaddr_storage* local, rowan::TimePoint now, rowan_channel** out);
  /// A JOIN: opens its path; *out when that completes the channel.
  int on_join(const rowan::api::Handshake& h, const rowan::io::UdpEndpoint& client,
              const sockaddr_storage* local, rowan_channel** out);
  void answer(const Answer& a, const rowan::io::UdpEndpoint& client) const;
  void expire(rowan::TimePoint now);

  rowan::api::ChannelParams params_;
  rowan::io::UdpEndpoint bind_;
  int fd_ = -1;
  // Recent hellos and joins by (client address text, nonce, type) → our answer.
  std::map<std::tuple<std::string, uint64_t, uint8_t>, Answer> answered_;
  std::map<uint64_t, Pending> pending_;  // by connection id
  uint64_t dropped_ = 0;
};
