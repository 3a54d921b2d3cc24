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
#include <utility>

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

/// Client side of the handshake, then the channel. `rtt_given`: keep
/// params.rtt_s instead of the handshake's measurement. Returns a status;
/// `error` gets the detail.
int connect_channel(const std::string& server, const ChannelParams& params, bool rtt_given,
                    rowan_channel** out, std::string* error);

}  // namespace rowan::api

struct rowan_channel {
 public:
  /// Throws std::system_error (socket, ring) or cc::CcParamError (cc name).
  rowan_channel(const rowan::api::ChannelParams& p, const rowan::io::UdpEndpoint& bind,
                const rowan::io::UdpEndpoint& peer, uint64_t connection_id);
  /// Tests: runs over `io` (not owned) on `clock`; poll() never sleeps (a
  /// FakeClock test calls poll(0) and advances the clock itself).
  rowan_channel(const rowan::api::ChannelParams& p, rowan::io::PacketIo& io,
                const rowan::Clock& clock, const rowan::io::UdpEndpoint& peer,
                uint64_t connection_id);
  ~rowan_channel();
  rowan_channel(const rowan_channel&) = delete;
  rowan_channel& operator=(const rowan_channel&) = delete;

  int send(const void* buf, size_t len, rowan_send_cb cb, void* user);
  int post_recv(void* buf, size_t cap, rowan_recv_cb cb, void* user);
  int poll(int timeout_ms);
  int flush(int timeout_ms);
  void close();
  void fill_stats(rowan_channel_stats* out) const;
  uint64_t id() const { return id_; }
  const rowan::io::UdpEndpoint& peer() const { return peer_; }
  /// The UDP port the data socket is bound to.
  int local_port() const;
  int fd() const { return udp_ ? udp_->fd() : -1; }
  /// Without link security: true. With it: a session key to send on exists.
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
  void init_transport(uint64_t connection_id);
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
  rowan::io::UdpEndpoint peer_;
  uint64_t id_;
  std::unique_ptr<rowan::io::UdpUringIo> udp_;       // null over a test's PacketIo
  std::unique_ptr<rowan::crypto::SecureIo> secure_;  // link security over udp_
  rowan::io::PacketIo* io_ = nullptr;
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

 private:
  rowan::api::ChannelParams params_;
  rowan::io::UdpEndpoint bind_;
  int fd_ = -1;
  // Recent hellos by (client address text, nonce) → the ACCEPT we sent.
  std::map<std::pair<std::string, uint64_t>, rowan::api::Handshake> answered_;
};
