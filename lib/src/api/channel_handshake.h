// The channel handshake's datagram (channel.h describes the exchange): 64
// bytes, little-endian fields.
//
//   0  magic u32 ("RWCH")     4  version u8          5  type u8 (1 HELLO, 2 ACCEPT, 3 REJECT,
//                                                         4 JOIN)
//   6  data port u16          8  nonce u64          16  connection id u64
//  24  rate bit/s u64        32  RTT ns u64         40  cc name (22 bytes, NUL-padded)
//  62  path u8: HELLO/ACCEPT the channel's path count (0 from a peer without
//      paths: one), JOIN and its ACCEPT the joining path's index
//  63  flags u8 (bit 0: secure)
//
// A channel over several paths (rowan_connect_paths): HELLO on path 0 says
// how many; the server's ACCEPT echoes the count (0 from a server without
// multipath support). The client then sends, from each further path's local
// address to that path's server address (listening port), JOIN{HELLO's nonce,
// connection id, path index, the path's rate and RTT}; the server opens a
// socket for the path on the address the JOIN arrived at and answers ACCEPT
// {nonce, connection id, its port, rate, RTT, index} from that address.
//
// Threading: plain functions on caller-owned buffers.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rowan::api {

inline constexpr uint32_t kHandshakeMagic = 0x48435752;  // "RWCH" little-endian
inline constexpr uint8_t kHandshakeVersion = 1;
inline constexpr size_t kHandshakeSize = 64;
inline constexpr uint8_t kHandshakeFlagSecure = 1;

enum class HandshakeType : uint8_t { kHello = 1, kAccept = 2, kReject = 3, kJoin = 4 };

struct Handshake {
  HandshakeType type = HandshakeType::kHello;
  uint64_t nonce = 0;
  uint64_t connection_id = 0;
  uint64_t rate_bps = 0;   ///< the transport's BDP basis: rate ...
  uint64_t rtt_ns = 0;     ///< ... and RTT (HELLO: 0 = the server's default)
  uint16_t data_port = 0;  ///< ACCEPT: the server's port for the transport
  uint8_t flags = 0;       ///< kHandshakeFlagSecure
  uint8_t path = 0;        ///< HELLO/ACCEPT: path count (0: one); JOIN: the path's index
  char cc[23] = {};
};

void encode_handshake(const Handshake& h, uint8_t out[kHandshakeSize]);
/// False when `data` is not a handshake of our version.
bool decode_handshake(const uint8_t* data, size_t len, Handshake* h);

}  // namespace rowan::api
