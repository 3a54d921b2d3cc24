/*
 * librowan — the application interface of rowan (RDMA over WAN).
 *
 * Three services, all C (C99 or later), no exceptions and no C++ types across
 * the boundary; every object is an opaque handle created and destroyed by the
 * library:
 *
 *  - Path telemetry (rowan_telemetry_*): reads the local rowand's view of each
 *    peer gateway and route (RTT, bottleneck bandwidth, BDP, loss and
 *    retransmission rates, mode, state) from its control socket, once or as a
 *    subscription (callback on a background thread and a pollable fd).
 *  - WAN-sized RDMA attributes (rowan_qp_attrs_*): the RC QP attributes a host
 *    should use to reach a remote site, computed from the path. Applying them
 *    to an ibv_qp or rdma_cm_id lives in <rowan/rowan_verbs.h>.
 *  - A message channel (rowan_connect/rowan_listen/rowan_channel_*): reliable,
 *    congestion-controlled messages to a peer application over UDP through
 *    io_uring, using rowan's WAN transport and congestion controllers.
 *
 * Errors: every function that can fail returns a rowan_status (0 on success,
 * a negative ROWAN_ERR_* otherwise); rowan_strerror() names a status and
 * rowan_last_error() gives the detail of the calling thread's last failure.
 *
 * Threading: a telemetry handle may be used from any thread (it locks); a
 * channel or listener belongs to one thread at a time (callbacks run on the
 * thread that calls rowan_channel_poll/flush/close).
 */
#ifndef ROWAN_ROWAN_H
#define ROWAN_ROWAN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define ROWAN_API __attribute__((visibility("default")))
#else
#define ROWAN_API
#endif

#define ROWAN_VERSION_MAJOR 0
#define ROWAN_VERSION_MINOR 1
#define ROWAN_VERSION_PATCH 0

/* ---- Status codes ------------------------------------------------------ */

typedef enum rowan_status {
  ROWAN_OK = 0,
  ROWAN_ERR_INVALID = -1,      /* a bad argument (NULL handle, bad address, bad option) */
  ROWAN_ERR_NOMEM = -2,        /* out of memory */
  ROWAN_ERR_UNREACHABLE = -3,  /* no daemon on the control socket / no answer from the peer */
  ROWAN_ERR_TIMEOUT = -4,      /* the operation did not finish in the time given */
  ROWAN_ERR_PROTOCOL = -5,     /* a malformed reply or handshake */
  ROWAN_ERR_NOT_FOUND = -6,    /* no such peer, route or index */
  ROWAN_ERR_AGAIN = -7,        /* the send queue is full: poll and retry */
  ROWAN_ERR_CLOSED = -8,       /* the channel is closed (by either side) */
  ROWAN_ERR_MSGSIZE = -9,      /* a message does not fit the posted buffer / limit */
  ROWAN_ERR_SYSTEM = -10,      /* an operating-system call failed (see rowan_last_error) */
  ROWAN_ERR_UNSUPPORTED = -11, /* not supported here (e.g. device lacks a capability) */
  ROWAN_ERR_DAEMON = -12,      /* rowand answered with an error */
  ROWAN_ERR_INTERNAL = -13     /* a bug in librowan; please report */
} rowan_status;

/* Static text naming a status (never NULL). */
ROWAN_API const char* rowan_strerror(int status);
/* Detail of the calling thread's last failure ("" when none); valid until the
 * thread's next librowan call. */
ROWAN_API const char* rowan_last_error(void);
/* "MAJOR.MINOR.PATCH" of the loaded library. */
ROWAN_API const char* rowan_version(void);

/* ---- Path telemetry ---------------------------------------------------- */

typedef enum rowan_peer_state {
  ROWAN_PEER_UNKNOWN = 0,
  ROWAN_PEER_UP = 1,      /* datagrams from the peer gateway arrive */
  ROWAN_PEER_WAITING = 2, /* never heard from yet */
  ROWAN_PEER_DOWN = 3     /* heard from, but not recently */
} rowan_peer_state;

typedef enum rowan_route_mode {
  ROWAN_MODE_UNKNOWN = 0,
  ROWAN_MODE_DIRECT = 1,      /* no gateway function: hosts see the WAN's delay and loss */
  ROWAN_MODE_PASSTHROUGH = 2, /* gateways carry packets reliably: WAN delay, no loss */
  ROWAN_MODE_SPLIT = 3        /* gateways terminate RC: local ACKs, READ/atomics end to end */
} rowan_route_mode;

#define ROWAN_NAME_MAX 64

/* One peer gateway (and the mode of the first route that uses it). Rates are
 * bits per second, times seconds, sizes bytes; a value the daemon does not
 * know yet is 0. */
typedef struct rowan_path_info {
  char peer[ROWAN_NAME_MAX];     /* peer name from rowand's config */
  char endpoint[ROWAN_NAME_MAX]; /* the peer gateway's WAN address:port */
  char cc[32];                   /* congestion controller on the gateway link */
  rowan_peer_state state;
  rowan_route_mode mode;
  double min_rtt_s;
  double srtt_s;
  double rttvar_s;
  double btlbw_bps;       /* estimated bottleneck bandwidth (see docs/librowan.md) */
  double link_rate_bps;   /* the link's configured rate */
  double link_rtt_s;      /* the link's configured RTT */
  double pacing_rate_bps; /* the gateway's current pacing rate toward the peer */
  uint64_t bdp_bytes;     /* btlbw x min RTT (configured rate x RTT until measured) */
  uint64_t cwnd_bytes;
  uint64_t bytes_in_flight;
  double loss_rate;       /* lost / sent packets, over the last refresh interval */
  double retransmit_rate; /* retransmitted / sent packets, over the last interval */
  uint64_t packets_sent;  /* cumulative counters from the daemon */
  uint64_t lost_packets;
  uint64_t retransmitted_packets;
  uint64_t delivered_bytes;
} rowan_path_info;

/* One route: a remote prefix, the peer gateway that serves it, its mode. */
typedef struct rowan_route_info {
  char prefix[ROWAN_NAME_MAX]; /* "198.18.2.0/24" */
  char peer[ROWAN_NAME_MAX];
  rowan_route_mode mode;
} rowan_route_info;

typedef struct rowan_telemetry rowan_telemetry;

/* Opens a telemetry handle on rowand's control socket. `socket_path` NULL
 * means $ROWAN_CONTROL_SOCKET, else /run/rowan/control.sock. Does not contact
 * the daemon (rowan_telemetry_refresh does). */
ROWAN_API int rowan_telemetry_open(const char* socket_path, rowan_telemetry** out);
/* The same for a site's daemon: /run/rowan/<site>/control.sock. */
ROWAN_API int rowan_telemetry_open_site(const char* site, rowan_telemetry** out);
/* Stops a subscription (if any) and frees the handle. NULL is ignored. */
ROWAN_API void rowan_telemetry_close(rowan_telemetry* t);

/* Asks the daemon now (peers, links, status) and replaces the snapshot.
 * ROWAN_ERR_UNREACHABLE when no daemon answers within `timeout_ms` (<= 0:
 * 5000), ROWAN_ERR_DAEMON/ROWAN_ERR_PROTOCOL on a bad answer. */
ROWAN_API int rowan_telemetry_refresh(rowan_telemetry* t, int timeout_ms);

/* Reading the latest snapshot. */
ROWAN_API size_t rowan_telemetry_peer_count(const rowan_telemetry* t);
ROWAN_API int rowan_telemetry_peer(const rowan_telemetry* t, size_t index, rowan_path_info* out);
ROWAN_API int rowan_telemetry_find_peer(const rowan_telemetry* t, const char* peer,
                                        rowan_path_info* out);
/* The path toward a remote host address ("198.18.2.10"): longest-prefix match
 * over the routes; ROWAN_ERR_NOT_FOUND when no route covers it. */
ROWAN_API int rowan_telemetry_path_to(const rowan_telemetry* t, const char* address,
                                      rowan_path_info* out);
ROWAN_API size_t rowan_telemetry_route_count(const rowan_telemetry* t);
ROWAN_API int rowan_telemetry_route(const rowan_telemetry* t, size_t index, rowan_route_info* out);
/* Monotonic seconds of the snapshot (0 before the first refresh). */
ROWAN_API double rowan_telemetry_time(const rowan_telemetry* t);

/* Called on the subscription thread after each refresh that changed the
 * snapshot (or failed: status < 0). It may read `t`; it must not close it. */
typedef void (*rowan_telemetry_cb)(rowan_telemetry* t, int status, void* user);

/* Starts a background thread that refreshes every `interval_ms` (>= 10), then
 * calls `cb` (may be NULL) and makes rowan_telemetry_fd() readable whenever a
 * refresh changes the snapshot or fails. One subscription per handle
 * (ROWAN_ERR_INVALID for a second). */
ROWAN_API int rowan_telemetry_subscribe(rowan_telemetry* t, uint32_t interval_ms,
                                        rowan_telemetry_cb cb, void* user);
ROWAN_API void rowan_telemetry_unsubscribe(rowan_telemetry* t);
/* An eventfd that is readable after an update; for poll/epoll. */
ROWAN_API int rowan_telemetry_fd(const rowan_telemetry* t);
/* Clears the fd's readiness; returns the number of updates since the last
 * call. */
ROWAN_API uint64_t rowan_telemetry_consume(rowan_telemetry* t);

/* ---- WAN-sized RC QP attributes --------------------------------------- */

/* The path a QP will use. */
typedef struct rowan_qp_path {
  double rtt_s;            /* path round trip (min RTT); required, > 0 */
  double rate_bps;         /* bottleneck rate; required, > 0 */
  rowan_route_mode mode;   /* the route's mode (UNKNOWN is treated as DIRECT) */
  double local_rtt_s;      /* RTT host <-> local gateway (split mode); 0: 100 us */
  double loss_rate;        /* loss the host sees (direct mode); 0..1 */
  uint32_t link_mtu;       /* host interface MTU in bytes; 0: 1500 */
  uint32_t message_bytes;  /* typical message (work request) size; 0: 65536 */
  int uses_read_or_atomic; /* nonzero when the QP issues RDMA READ or atomics */
} rowan_qp_path;

typedef struct rowan_qp_attrs {
  uint8_t timeout;            /* local ACK timeout exponent: 4.096 us x 2^timeout */
  uint8_t retry_cnt;          /* transport retries (0..7) */
  uint8_t rnr_retry;          /* RNR retries (7 = infinite) */
  uint8_t min_rnr_timer;      /* responder's RNR NAK timer code (IB spec table) */
  uint8_t max_rd_atomic;      /* outstanding READ/atomic as requester */
  uint8_t max_dest_rd_atomic; /* outstanding READ/atomic as responder */
  uint8_t path_mtu;           /* enum ibv_mtu value: 1=256 ... 5=4096 */
  uint8_t reserved;
  uint32_t path_mtu_bytes; /* the same in bytes */
  uint32_t max_send_wr;    /* send queue depth covering the BDP */
  uint32_t max_recv_wr;    /* receive queue depth covering the BDP */
  double ack_timeout_s;    /* what `timeout` encodes */
  uint64_t bdp_bytes;      /* rate x RTT the queue depth covers */
} rowan_qp_attrs;

/* Computes the attributes for `path` (see docs/librowan.md for the rules).
 * Pure computation; ROWAN_ERR_INVALID on a missing RTT or rate. */
ROWAN_API int rowan_qp_attrs_compute(const rowan_qp_path* path, rowan_qp_attrs* out);
/* The same from a telemetry snapshot: `peer_or_address` is a peer name or a
 * remote host address (route lookup). `message_bytes` 0: 65536. */
ROWAN_API int rowan_qp_attrs_for(const rowan_telemetry* t, const char* peer_or_address,
                                 uint32_t message_bytes, int uses_read_or_atomic,
                                 rowan_qp_attrs* out);

/* ---- Message channel ---------------------------------------------------- */

typedef struct rowan_channel rowan_channel;
typedef struct rowan_listener rowan_listener;

typedef struct rowan_channel_options {
  const char* cc;        /* congestion controller name; NULL: "rowan" (server: client's choice) */
  double rate_bps;       /* expected path rate, sizes buffers and windows; 0: 1e9 */
  double rtt_s;          /* expected RTT; 0: measured by the handshake (server: 0.1) */
  uint32_t max_datagram; /* UDP payload bytes; 0: 1472 */
  uint32_t max_queued_sends; /* messages queued at once; 0: 1024 */
  int handshake_timeout_ms;  /* rowan_connect; 0: 5000 */
  int idle_timeout_ms;       /* silence from the peer before the channel fails; 0: 15000,
                              < 0: never. After a third of it without news the channel
                              sends a keepalive, which the peer answers when it polls:
                              an end that does not poll for two thirds of it looks gone. */
} rowan_channel_options;

/* Fills `o` with the defaults (all zero / NULL). */
ROWAN_API void rowan_channel_options_init(rowan_channel_options* o);

/* Server: binds a UDP socket ("0.0.0.0:5201", "[::]:5201"; port 0 picks one). */
ROWAN_API int rowan_listen(const char* bind_address, const rowan_channel_options* o,
                           rowan_listener** out);
/* Waits up to `timeout_ms` (< 0: forever) for a client's hello and returns
 * the new channel (its own UDP socket). ROWAN_ERR_TIMEOUT when none came. */
ROWAN_API int rowan_accept(rowan_listener* l, int timeout_ms, rowan_channel** out);
/* The listening socket (readable when a hello is waiting), and its port. */
ROWAN_API int rowan_listener_fd(const rowan_listener* l);
ROWAN_API int rowan_listener_port(const rowan_listener* l);
ROWAN_API void rowan_listener_close(rowan_listener* l);

/* Client: handshakes with the server at "198.18.2.10:5201" and returns the
 * channel. ROWAN_ERR_UNREACHABLE when no server answers in time. */
ROWAN_API int rowan_connect(const char* server_address, const rowan_channel_options* o,
                            rowan_channel** out);

/* Completion of a send: status ROWAN_OK once the peer's transport
 * acknowledged every byte of the message; ROWAN_ERR_CLOSED when the channel
 * closed first. `buf` is the caller's buffer, free to reuse from now on. */
typedef void (*rowan_send_cb)(rowan_channel* ch, void* user, const void* buf, size_t len,
                              int status);
/* Completion of a receive: a whole message of `len` bytes is in `buf`
 * (status ROWAN_OK); ROWAN_ERR_MSGSIZE when the message (len bytes) was
 * larger than the buffer and was dropped; ROWAN_ERR_CLOSED when the channel
 * closed before a message came (len 0). */
typedef void (*rowan_recv_cb)(rowan_channel* ch, void* user, void* buf, size_t len, int status);

/* Queues a message (0 .. 2^32-1 bytes). The library reads `buf` directly
 * (no copy of its own) until the completion, so it must stay valid and
 * unchanged. ROWAN_ERR_AGAIN when max_queued_sends messages are pending. */
ROWAN_API int rowan_channel_send(rowan_channel* ch, const void* buf, size_t len, rowan_send_cb cb,
                                 void* user);
/* Posts a receive buffer; each arriving message fills the oldest posted
 * buffer. Without a posted buffer, data waits in the transport and flow
 * control holds the sender back. */
ROWAN_API int rowan_channel_post_recv(rowan_channel* ch, void* buf, size_t capacity,
                                      rowan_recv_cb cb, void* user);
/* Runs the channel for up to `timeout_ms` (0: one pass, < 0: until something
 * happens): receives, timers, sends, and callbacks. Returns the number of
 * callbacks run (>= 0, returning as soon as one ran), ROWAN_ERR_CLOSED when
 * the peer closed and everything received was delivered, ROWAN_ERR_TIMEOUT
 * when the peer stayed silent for idle_timeout_ms (keepalives unanswered:
 * it went away; pending sends and receives complete with ROWAN_ERR_CLOSED
 * and the channel only awaits rowan_channel_close). */
ROWAN_API int rowan_channel_poll(rowan_channel* ch, int timeout_ms);
/* Polls until every queued send completed (ROWAN_OK), or `timeout_ms`
 * passed (ROWAN_ERR_TIMEOUT), or the channel failed. */
ROWAN_API int rowan_channel_flush(rowan_channel* ch, int timeout_ms);
/* Sends a close to the peer, completes pending sends and receives with
 * ROWAN_ERR_CLOSED, and frees the channel. NULL is ignored. */
ROWAN_API void rowan_channel_close(rowan_channel* ch);

typedef struct rowan_channel_stats {
  uint64_t messages_sent;     /* completed sends */
  uint64_t messages_received; /* completed receives */
  uint64_t bytes_sent;        /* message bytes acknowledged by the peer */
  uint64_t bytes_received;    /* message bytes delivered */
  uint64_t packets_sent;      /* datagrams */
  uint64_t packets_received;
  uint64_t retransmitted_packets;
  uint64_t lost_packets;
  uint64_t wire_bytes_sent; /* UDP payload bytes, headers and retransmissions included */
  double retransmit_ratio;  /* retransmitted / sent packets */
  double min_rtt_s;
  double srtt_s;
  double rttvar_s;
  uint64_t cwnd_bytes;
  double pacing_rate_bps;
  uint64_t bytes_in_flight;
  char cc[32];
} rowan_channel_stats;

ROWAN_API int rowan_channel_stats_get(const rowan_channel* ch, rowan_channel_stats* out);
/* The connection id agreed in the handshake. */
ROWAN_API uint64_t rowan_channel_id(const rowan_channel* ch);
/* The peer's address as text ("198.18.1.10:40112") into buf (NUL-terminated,
 * truncated to len). */
ROWAN_API int rowan_channel_peer(const rowan_channel* ch, char* buf, size_t len);

/* ---- Channels over several paths --------------------------------------- */
/*
 * A channel may run over several paths (e.g. one per long-haul link): each
 * path is a pair of UDP addresses with a socket of its own, and has its own
 * packet numbers, RTT, loss detection, congestion controller and pacer; one
 * message stream spans them, each packet going on the path that delivers it
 * first (docs/wan-transport.md, "Paths"). A path whose ACKs stop is declared
 * down and what it had in flight is resent on the others; it comes back up
 * when it answers again. Both ends must reach each other on each path's
 * addresses; the server must listen on the wildcard address ("0.0.0.0:PORT")
 * or on every address the paths use.
 */
#define ROWAN_MAX_CHANNEL_PATHS 8

typedef struct rowan_channel_path {
  const char* local_address;  /* "198.18.1.11" or "198.18.1.11:0" (port 0: any);
                                 NULL or "": the wildcard address */
  const char* remote_address; /* the server's listening address on this path,
                                 "198.18.2.11:5201" */
  double rate_bps;            /* the path's expected rate; 0: the options' rate_bps */
  double rtt_s;               /* the path's expected RTT; 0: the options' rtt_s */
} rowan_channel_path;

/* rowan_connect over `count` paths (1 .. ROWAN_MAX_CHANNEL_PATHS, one address
 * family): the handshake runs on paths[0], then each further path joins it
 * from its own address. ROWAN_ERR_UNREACHABLE when the server does not answer
 * on some path within handshake_timeout_ms, ROWAN_ERR_UNSUPPORTED when the
 * server's librowan takes one path only. The options' rate and RTT are the
 * defaults of the paths'. */
ROWAN_API int rowan_connect_paths(const rowan_channel_path* paths, size_t count,
                                  const rowan_channel_options* o, rowan_channel** out);

typedef struct rowan_channel_path_stats {
  char local[ROWAN_NAME_MAX];  /* this end's address:port on the path */
  char remote[ROWAN_NAME_MAX]; /* the peer's address:port on the path */
  int up;                      /* 1: up, 0: declared down (failover) */
  uint32_t downs;              /* times declared down */
  uint64_t packets_sent;
  uint64_t wire_bytes_sent; /* UDP payload bytes, retransmissions included */
  uint64_t wire_bytes_acked;
  uint64_t packets_received;
  uint64_t wire_bytes_received;
  uint64_t lost_packets;
  uint64_t retransmitted_packets;
  double min_rtt_s;
  double srtt_s;
  uint64_t cwnd_bytes;
  double pacing_rate_bps;
  uint64_t bytes_in_flight;
  double rate_bps; /* the path's configured rate and RTT (from the handshake) */
  double rtt_s;
  uint64_t fec_repair_packets; /* forward error correction: REPAIR packets sent */
  uint64_t fec_repair_bytes;   /* and their wire bytes */
  uint64_t fec_recovered;      /* the peer's packets rebuilt from repair */
} rowan_channel_path_stats;

/* The channel's number of paths (1 for a channel from rowan_connect). */
ROWAN_API size_t rowan_channel_path_count(const rowan_channel* ch);
/* Path `index`'s figures; ROWAN_ERR_NOT_FOUND beyond the count. */
ROWAN_API int rowan_channel_path_stats_get(const rowan_channel* ch, size_t index,
                                           rowan_channel_path_stats* out);

/* ---- Link security for channels (optional) ----------------------------- */
/*
 * A channel opened with keys runs rowand's link security under its
 * transport (docs/link-security.md): static X25519 keys, a 1-RTT handshake,
 * every datagram sealed with AES-256-GCM and checked against replay, keys
 * rotated every 2 minutes. Only the holder of the private key behind
 * peer_public_key completes the handshake. The channel's own HELLO/ACCEPT
 * exchange stays plaintext (ports, connection id, rate, RTT, CC name).
 * Keys are raw 32-byte X25519 keys; `rowanctl genkey` and `rowanctl pubkey`
 * print base64 ones (the `wg genkey` format) that rowan_key_from_base64 reads.
 */
#define ROWAN_KEY_BYTES 32

typedef struct rowan_channel_keys {
  uint8_t private_key[ROWAN_KEY_BYTES];     /* this end's static private key */
  uint8_t peer_public_key[ROWAN_KEY_BYTES]; /* the one peer this end talks to */
} rowan_channel_keys;

/* A fresh private key (OpenSSL's random generator) and its public key. */
ROWAN_API int rowan_key_generate(uint8_t private_key[ROWAN_KEY_BYTES],
                                 uint8_t public_key[ROWAN_KEY_BYTES]);
/* The public key of `private_key`. */
ROWAN_API int rowan_key_public(const uint8_t private_key[ROWAN_KEY_BYTES],
                               uint8_t public_key[ROWAN_KEY_BYTES]);
/* Decodes base64 of 32 bytes (44 characters, surrounding whitespace
 * ignored) into `key`; ROWAN_ERR_INVALID for anything else. */
ROWAN_API int rowan_key_from_base64(const char* text, uint8_t key[ROWAN_KEY_BYTES]);

/* rowan_listen with link security: each accepted channel talks only to the
 * holder of keys->peer_public_key (a client with other keys never completes
 * the key handshake, so its channel times out); a hello without security is
 * rejected. */
ROWAN_API int rowan_listen_secure(const char* bind_address, const rowan_channel_options* o,
                                  const rowan_channel_keys* keys, rowan_listener** out);
/* rowan_connect with link security; returns once the key handshake
 * completed. ROWAN_ERR_PROTOCOL when it did not within handshake_timeout_ms
 * (wrong keys on either side) or when the server runs without security. */
ROWAN_API int rowan_connect_secure(const char* server_address, const rowan_channel_options* o,
                                   const rowan_channel_keys* keys, rowan_channel** out);

/* rowan_connect_paths with link security: each path runs its own key
 * handshake with the same keys; returns once every path's completed. */
ROWAN_API int rowan_connect_paths_secure(const rowan_channel_path* paths, size_t count,
                                         const rowan_channel_options* o,
                                         const rowan_channel_keys* keys, rowan_channel** out);

#ifdef __cplusplus
}
#endif

#endif /* ROWAN_ROWAN_H */
