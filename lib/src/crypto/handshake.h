// The rowan link handshake: one round trip between two gateways that know each
// other's static X25519 public keys, after Noise IK (the pattern WireGuard
// uses) with HKDF-SHA256 chaining and AES-256-GCM. docs/link-security.md has
// the message layouts and the reasoning; in short:
//
//   initiation  I→R: e, es, s, ss, {timestamp}     (authenticates I to R)
//   response    R→I: e, ee, se, {}                 (authenticates R to I)
//
// Both sides then split the chaining key into two AES-256 keys, one per
// direction. Every static and ephemeral DH result is mixed into the chaining
// key, the transcript hash `h` (headers included) is each AEAD's associated
// data, and ephemeral keys give forward secrecy.
//
// Control path: these functions allocate (OpenSSL contexts) and are called a
// few times per rekey, never per data packet.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "crypto/keys.h"

namespace rowan::crypto {

inline constexpr uint8_t kMsgInitiation = 1;
inline constexpr uint8_t kMsgResponse = 2;
inline constexpr uint8_t kMsgData = 4;

inline constexpr size_t kInitiationSize = 120;  ///< 8 header + 32 e + 48 {s} + 32 {ts, inc}
inline constexpr size_t kResponseSize = 68;     ///< 12 header + 32 e + 24 {inc}
inline constexpr size_t kDataHeaderSize = 16;   ///< type, flags, 0, receiver index, counter

/// This gateway's identity towards one peer.
struct Identity {
  Key private_key{};
  Key public_key{};
  Key peer_public{};
  Key static_dh{};  ///< X25519(private_key, peer_public), computed once
  /// Fills public_key and static_dh; false when peer_public is a low-order point.
  bool init(const Key& priv, const Key& peer_pub);
};

/// Chaining key and transcript hash between the messages.
struct HandshakeState {
  Key ck{};
  Key h{};
  Key ephemeral_private{};
  Key ephemeral_public{};
  Key peer_ephemeral{};
  uint32_t local_index = 0;
  uint32_t remote_index = 0;
  void wipe() noexcept;
};

/// Keys of an established session.
struct SessionKeys {
  Key send{};
  Key recv{};
  void wipe() noexcept;
};

enum class HandshakeResult : uint8_t { kOk, kBadAuth, kUnknownPeer, kReplay };

/// Writes an initiation with sender index `local_index`, `timestamp`
/// (nanoseconds of wall time, strictly increasing across restarts) and this
/// process's `incarnation` (random per start; a peer that sees it change knows
/// we restarted) to `out` (kInitiationSize bytes). Keeps the state for the
/// response.
bool create_initiation(const Identity& id, uint32_t local_index, uint64_t timestamp,
                       uint64_t incarnation, HandshakeState& st, uint8_t* out);

/// Checks an initiation (kInitiationSize bytes). kOk only when it decrypts,
/// names `id.peer_public` as its sender and its timestamp exceeds
/// `last_timestamp`; then fills `st` (remote_index set), `timestamp` and the
/// initiator's `incarnation`.
HandshakeResult consume_initiation(const Identity& id, const uint8_t* msg, uint64_t last_timestamp,
                                   HandshakeState& st, uint64_t& timestamp, uint64_t& incarnation);

/// Writes the response to a consumed initiation (kResponseSize bytes) and
/// derives the responder's session keys.
bool create_response(const Identity& id, uint32_t local_index, uint64_t incarnation,
                     HandshakeState& st, uint8_t* out, SessionKeys& keys);

/// Checks a response (kResponseSize bytes) to the initiation `st` was made for
/// and derives the initiator's session keys and the responder's `incarnation`.
HandshakeResult consume_response(const Identity& id, const uint8_t* msg, HandshakeState& st,
                                 SessionKeys& keys, uint64_t& incarnation);

inline uint32_t load_be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}
inline uint64_t load_be64(const uint8_t* p) {
  return (uint64_t{load_be32(p)} << 32) | load_be32(p + 4);
}
inline void store_be32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}
inline void store_be64(uint8_t* p, uint64_t v) {
  store_be32(p, static_cast<uint32_t>(v >> 32));
  store_be32(p + 4, static_cast<uint32_t>(v));
}

}  // namespace rowan::crypto
