// Static X25519 keys of a rowan gateway (RFC 7748), as WireGuard uses them:
// every gateway holds one private key and knows each peer's public key.
// Keys travel as standard base64 of their 32 raw bytes (`wg genkey` format).
//
// Control path only: these functions allocate and may throw.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace rowan::crypto {

inline constexpr size_t kKeySize = 32;
using Key = std::array<uint8_t, kKeySize>;

/// Standard base64 (RFC 4648 §4, with padding) of `bytes`.
std::string base64_encode(std::span<const uint8_t> bytes);
/// Decodes base64 of exactly 32 bytes (44 characters, surrounding whitespace
/// ignored); nullopt on anything else.
std::optional<Key> key_from_base64(std::string_view text);
inline std::string key_to_base64(const Key& k) { return base64_encode(k); }

/// A fresh X25519 private key from the OpenSSL CSPRNG (clamped by X25519 itself).
Key generate_private_key();
/// The public key of `private_key`.
Key public_key(const Key& private_key);
/// X25519(private_key, peer_public); false when the result is all zero (a
/// low-order peer point), which callers must treat as a failed handshake.
bool x25519(const Key& private_key, const Key& peer_public, Key& out) noexcept;

/// Reads a base64 private key from `path`. Throws std::runtime_error naming the
/// file when it is missing, malformed, or readable by group or others (the
/// key must be readable only by the service user: chmod 600).
Key load_private_key_file(const std::string& path);

/// Wipes key material (not optimised away).
void wipe(std::span<uint8_t> bytes) noexcept;

}  // namespace rowan::crypto
