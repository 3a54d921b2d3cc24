// Big-endian loads and stores on byte buffers (the network's order: RoCEv2,
// the WAN transport), and little-endian ones (librowan's channel handshake
// and message headers). memcpy-based, so unaligned access is well defined;
// compilers turn each into one load (plus a bswap for big-endian).
#pragma once

#include <cstdint>
#include <cstring>

namespace rowan::wire {

inline uint16_t load_be16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return __builtin_bswap16(v);
}
inline uint32_t load_be24(const uint8_t* p) {
  return (static_cast<uint32_t>(p[0]) << 16) | (static_cast<uint32_t>(p[1]) << 8) | p[2];
}
inline uint32_t load_be32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return __builtin_bswap32(v);
}
inline uint64_t load_be64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return __builtin_bswap64(v);
}
inline void store_be16(uint8_t* p, uint16_t v) {
  v = __builtin_bswap16(v);
  std::memcpy(p, &v, sizeof v);
}
inline void store_be24(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 16);
  p[1] = static_cast<uint8_t>(v >> 8);
  p[2] = static_cast<uint8_t>(v);
}
inline void store_be32(uint8_t* p, uint32_t v) {
  v = __builtin_bswap32(v);
  std::memcpy(p, &v, sizeof v);
}
inline void store_be64(uint8_t* p, uint64_t v) {
  v = __builtin_bswap64(v);
  std::memcpy(p, &v, sizeof v);
}

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the _le helpers assume a little-endian host");
inline uint16_t load_le16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline uint32_t load_le32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline uint64_t load_le64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store_le16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, sizeof v); }
inline void store_le32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, sizeof v); }
inline void store_le64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, sizeof v); }

}  // namespace rowan::wire
