// Packet helpers shared by rowand's data path (gateway*.cc, shard.cc,
// flow_table.cc, dpdk_wan_io.cc): Ethernet
// constants and IP header accessors. Internal to rowand; no state.
#pragma once

#include <cstdint>
#include <cstring>

#include "codec/bytes.h"
#include "codec/roce.h"

namespace rowan::gw::pkt {

using wire::load_be16;
using wire::store_be16;

constexpr uint16_t kEthIpv4 = 0x0800;
constexpr uint16_t kEthIpv6 = 0x86DD;
constexpr uint16_t kEthArp = 0x0806;
constexpr uint32_t kEthLen = 14;

// Basic IP sanity: version, header and total lengths within `len`. Returns the
// IP packet length (without Ethernet padding) or 0.
inline uint32_t ip_packet_len(const uint8_t* ip, uint32_t len) {
  if (len < 20) return 0;
  const uint8_t v = ip[0] >> 4;
  if (v == 4) {
    const uint32_t ihl = (ip[0] & 0xF) * 4U;
    const uint32_t total = load_be16(ip + 2);
    if (ihl < 20 || total < ihl || total > len) return 0;
    return total;
  }
  if (v == 6) {
    if (len < 40) return 0;
    const uint32_t total = 40U + load_be16(ip + 4);
    return total <= len ? total : 0;
  }
  return 0;
}

inline roce::IpAddr ip_src(const uint8_t* ip) {
  roce::IpAddr a;
  a.version = ip[0] >> 4;
  std::memcpy(a.bytes.data(), ip + (a.version == 4 ? 12 : 8), a.version == 4 ? 4 : 16);
  return a;
}
inline roce::IpAddr ip_dst(const uint8_t* ip) {
  roce::IpAddr a;
  a.version = ip[0] >> 4;
  std::memcpy(a.bytes.data(), ip + (a.version == 4 ? 16 : 24), a.version == 4 ? 4 : 16);
  return a;
}

// MurmurHash3's 64-bit finalizer: every input bit reaches every output bit
// (the flow table's and the workers' shard hashes).
inline uint64_t fmix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

}  // namespace rowan::gw::pkt
