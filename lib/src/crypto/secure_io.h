// SecureIo: a PacketIo that encrypts and authenticates every datagram of a
// WAN link with AES-256-GCM under keys from the rowan handshake
// (handshake.h), wrapping the real backend (udp_uring, loopback). The
// transport above it is unchanged: it sees a PacketIo whose max_datagram is
// 32 bytes smaller and that delivers only authentic, fresh datagrams.
//
//   data datagram = type 4 | flags 0 | 0 u16 | receiver index u32 | counter u64
//                   | AES-256-GCM(payload) | tag (16)
//
// The 16-byte header is the AEAD's associated data; the nonce is the counter,
// which starts at 0 for every session key and only increases, so no nonce is
// ever used twice with one key. Handshake datagrams are sent and consumed
// inside SecureIo; data flows only once a session exists.
//
// Sessions (WireGuard's keypair rotation): `current` sends; `next` is a session
// this side answered and uses for sending once the peer's first datagram on
// it arrives (key confirmation); `previous` is kept for receiving after a
// rotation until the next one (or reject_after_time), so datagrams in flight
// across a rekey are not lost. A new handshake starts when there is no
// session, on the rekey budget (time, bytes, packets), when the peer has been
// silent for rx_timeout while we sent, or after handshake_retry without a
// response. A restarted peer initiates and is answered like any rekey.
//
// Time is the `now` the caller passes (no clock reads). Per-packet work does
// not allocate; handshakes (a few per rekey) do.
//
// Threading: one thread, like every PacketIo.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "base/units.h"
#include "crypto/aead.h"
#include "crypto/handshake.h"
#include "crypto/keys.h"
#include "crypto/replay_window.h"
#include "io/packet_io.h"

namespace rowan::crypto {

struct SecureIoOptions {
  Key private_key{};  ///< this gateway's static key
  Key peer_public{};  ///< the peer's static public key
  /// Wall-clock time minus the monotonic `now` (ns): handshake timestamps
  /// must increase across restarts of this process.
  Duration wall_offset;
  Duration rekey_after_time = Duration::from_s(120);
  Bytes rekey_after_bytes = Bytes{1} << 36;  ///< 64 GiB per session key
  uint64_t rekey_after_packets = uint64_t{1} << 40;
  Duration reject_after_time = Duration::from_s(180);  ///< no use of a session after this age
  Duration handshake_retry = Duration::from_s(1);
  Duration rx_timeout = Duration::from_s(10);  ///< re-handshake when the peer is silent this long
  /// Persistent keepalive (WireGuard's): an empty authenticated datagram when
  /// nothing was sent for this long, so an idle link still proves it is alive
  /// and silence means an outage. Zero: off.
  Duration keepalive = Duration::zero();
  uint32_t burst = 32;  ///< datagrams handled per inner burst
  /// The incarnation this side's handshakes announce; 0: a random one.
  /// Sessions that are paths of one connection share one, so the peer sees
  /// one process behind all of them (and a new value only when it restarts).
  uint64_t incarnation = 0;
};

/// Why a received datagram was dropped.
enum class SecureDrop : uint8_t {
  kTruncated,    ///< shorter than its message type's header and tag
  kOversize,     ///< longer than its message type allows or than the receive buffer
  kBadType,      ///< unknown message type
  kBadAuth,      ///< AEAD tag mismatch (forged, corrupted, wrong key)
  kReplay,       ///< counter (or handshake timestamp) seen before
  kStale,        ///< counter below the anti-replay window
  kUnknownPeer,  ///< an initiation from a static key that is not our peer
  kNoSession,    ///< receiver index names no live session
  kCount
};
const char* to_string(SecureDrop d);

struct SecureStats {
  std::array<uint64_t, static_cast<size_t>(SecureDrop::kCount)> drops{};
  uint64_t rx_data = 0;
  uint64_t rx_keepalives = 0;
  uint64_t tx_keepalives = 0;
  uint64_t tx_data = 0;
  uint64_t tx_sealed_in_place = 0;  ///< sealed where the caller wrote them (tx_buffer)
  uint64_t tx_sealed_pieces = 0;    ///< sealed with pieces read where they lie (takes_pieces)
  uint64_t tx_no_session = 0;       ///< datagrams the transport sent before any session (dropped)
  uint64_t tx_oversize = 0;
  uint64_t tx_crypto_errors = 0;
  uint64_t initiations_sent = 0;
  uint64_t responses_sent = 0;
  uint64_t handshakes_completed = 0;  ///< sessions confirmed (both roles)
  uint64_t rekeys = 0;                ///< handshakes started while a session existed
  uint64_t peer_restarts = 0;         ///< authenticated handshakes from a new peer incarnation
  TimePoint last_handshake;           ///< when the newest session was confirmed (zero: never)
  TimePoint last_rx;                  ///< last authenticated datagram (zero: never)
  uint64_t drops_total() const {
    uint64_t t = 0;
    for (uint64_t d : drops) t += d;
    return t;
  }
};

class SecureIo final : public io::PacketIo {
 public:
  static constexpr uint32_t kOverhead = kDataHeaderSize + kAeadTagSize;

  /// `inner` must outlive this object. Throws std::invalid_argument when the
  /// peer key is unusable (a low-order point).
  SecureIo(io::PacketIo& inner, const SecureIoOptions& opts, TimePoint now);
  ~SecureIo() override;

  size_t send_burst(std::span<const io::TxDatagram> pkts, TimePoint now) noexcept override;
  size_t recv_burst(std::span<io::RxDatagram> bufs, TimePoint now) noexcept override;
  /// Lends when the inner backend lends (packet_io.h lend_rx): each record
  /// is opened in place in the inner's memory and handed up from there.
  bool lend_rx(bool on) noexcept override {
    lend_rx_ = inner_.lend_rx(on) && on;
    return lend_rx_;
  }
  void rx_done() noexcept override { inner_.rx_done(); }
  /// Lends when the inner backend lends (packet_io.h tx_buffer): its buffer
  /// past the record header, so that the caller writes the plaintext where
  /// it is sealed in place and sent from. One the inner refuses gets its
  /// plaintext back (unsealed) before send_burst returns.
  uint8_t* tx_buffer(size_t i) noexcept override {
    uint8_t* b = inner_.tx_buffer(i);
    return b != nullptr ? b + kDataHeaderSize : nullptr;
  }
  /// The AEAD reads each piece where it lies and writes it sealed into the
  /// record: the payload's one pass on the way out is the encryption.
  bool takes_pieces() const noexcept override { return true; }
  TimePoint next_rx_time() const noexcept override { return inner_.next_rx_time(); }
  uint32_t max_datagram() const noexcept override { return inner_.max_datagram() - kOverhead; }
  const io::IoStats& stats() const noexcept override { return stats_; }

  /// Runs the handshake timers (also run by every send_burst/recv_burst).
  void poll(TimePoint now) noexcept;
  /// The earliest time poll has work (a retry or rekey), for event loops.
  TimePoint next_timer() const noexcept;

  const SecureStats& secure_stats() const { return sstats_; }
  /// A session to send on exists and the peer was heard within rx_timeout.
  bool peer_up(TimePoint now) const noexcept;
  bool has_session(TimePoint now) const noexcept;
  const Key& public_key() const { return id_.public_key; }
  /// The peer process's random start id from its last handshake (0: none yet).
  /// When it changes, secure_stats().peer_restarts counts up: the peer lost all
  /// state, so the caller should reset whatever it layered on the link.
  uint64_t peer_incarnation() const { return peer_incarnation_; }

 private:
  struct Session {
    bool valid = false;
    bool initiator = false;
    uint32_t local_index = 0;
    uint32_t remote_index = 0;
    uint64_t send_counter = 0;
    Bytes sent_bytes = 0;
    TimePoint created;
    TimePoint last_rx;
    ReplayWindow window;
    AesGcm send;
    AesGcm recv;
  };
  static constexpr int kNone = -1;

  bool usable(int slot, TimePoint now) const noexcept;
  int find_session(uint32_t local_index, TimePoint now) const noexcept;
  int free_slot() const noexcept;
  uint32_t new_index() noexcept;
  void install(int slot, const SessionKeys& keys, uint32_t local, uint32_t remote, bool initiator,
               TimePoint now);
  void start_handshake(TimePoint now) noexcept;
  void send_raw(const uint8_t* data, uint32_t len, TimePoint now) noexcept;
  void send_keepalive(TimePoint now) noexcept;
  bool seal_into(Session& s, const uint8_t* payload, uint32_t len, uint8_t* out) noexcept;
  /// seal_into() of a datagram with pieces: its buffer's bytes and the
  /// pieces, each read where it lies.
  bool seal_pieces(Session& s, const io::TxDatagram& p, uint8_t* out) noexcept;
  /// Writes a data record's header and takes its counter.
  uint64_t start_record(Session& s, uint8_t* out) noexcept;
  /// Decrypts a record sealed in place back into its plaintext.
  void unseal_in_place(Session& s, uint8_t* record, uint32_t len) noexcept;
  /// Handles one received datagram; returns the plaintext length delivered
  /// into `dst` (0 when consumed or dropped).
  uint32_t on_datagram(uint8_t* data, uint32_t len, io::RxDatagram& dst, TimePoint now) noexcept;
  void on_initiation(const uint8_t* data, TimePoint now) noexcept;
  void on_response(const uint8_t* data, TimePoint now) noexcept;
  void drop(SecureDrop why) noexcept { ++sstats_.drops[static_cast<size_t>(why)]; }

  io::PacketIo& inner_;
  SecureIoOptions opts_;
  Identity id_;
  std::array<Session, 3> slots_;
  int current_ = kNone;
  int previous_ = kNone;
  int next_ = kNone;
  bool pending_ = false;  ///< an initiation of ours awaits its response
  HandshakeState pending_state_;
  TimePoint pending_sent_;
  TimePoint last_tx_;    ///< last data datagram sent (a persistent keepalive counts)
  TimePoint last_sent_;  ///< last datagram of any kind sent on a session
  uint64_t last_peer_timestamp_ = 0;
  uint64_t incarnation_ = 0;       ///< ours, random per construction
  uint64_t peer_incarnation_ = 0;  ///< the peer's, 0 until its first handshake
  void learn_incarnation(uint64_t inc) noexcept;
  uint32_t index_seed_ = 0;
  uint32_t dgram_;  ///< inner max_datagram
  std::vector<uint8_t> tx_mem_, rx_mem_;
  std::vector<io::TxDatagram> tx_;
  std::vector<uint32_t> tx_origin_;    ///< caller index of each tx_ entry
  std::vector<uint8_t*> tx_in_place_;  ///< tx_ entry's record when sealed where the caller wrote it
  std::vector<io::RxDatagram> rx_;
  bool lend_rx_ = false;  ///< records are opened in place in the inner's memory
  io::IoStats stats_;
  SecureStats sstats_;
};

}  // namespace rowan::crypto
