// Ethernet frames for the daemon's data-path tests (shard, distributor,
// forwarding): IPv4 UDP/TCP with a RoCEv2 BTH on UDP/4791, and ARP.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace rowan::gw::frames {

using MacBytes = std::array<uint8_t, 6>;

inline void put_mac(uint8_t* p, const MacBytes& m) {
  for (int i = 0; i < 6; ++i) p[i] = m[i];
}
inline void put_ip(uint8_t* p, uint32_t a) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(a >> (24 - 8 * i));
}

/// IPv4 + UDP (proto 17) or TCP-sized ports (proto 6) with `payload` bytes
/// after a 12-byte BTH (destination QP `qp`, PSN `psn`).
inline std::vector<uint8_t> frame4(uint32_t src, uint32_t dst, uint8_t proto, uint16_t sport,
                                   uint16_t dport, uint32_t qp = 0, uint32_t psn = 0,
                                   const MacBytes& to = {}, const MacBytes& from = {},
                                   uint32_t payload = 4) {
  std::vector<uint8_t> f(14 + 20 + 8 + 12 + payload, 0);
  put_mac(f.data(), to);
  put_mac(f.data() + 6, from);
  f[12] = 0x08;
  uint8_t* ip = f.data() + 14;
  ip[0] = 0x45;
  const auto total = static_cast<uint16_t>(f.size() - 14);
  ip[2] = static_cast<uint8_t>(total >> 8);
  ip[3] = static_cast<uint8_t>(total);
  ip[8] = 64;
  ip[9] = proto;
  put_ip(ip + 12, src);
  put_ip(ip + 16, dst);
  uint8_t* l4 = ip + 20;
  l4[0] = static_cast<uint8_t>(sport >> 8);
  l4[1] = static_cast<uint8_t>(sport);
  l4[2] = static_cast<uint8_t>(dport >> 8);
  l4[3] = static_cast<uint8_t>(dport);
  const auto udp_len = static_cast<uint16_t>(total - 20);
  l4[4] = static_cast<uint8_t>(udp_len >> 8);
  l4[5] = static_cast<uint8_t>(udp_len);
  uint8_t* bth = l4 + 8;
  bth[0] = 0x04;  // RC SEND only
  bth[2] = 0xFF;  // P_Key
  bth[3] = 0xFF;
  bth[5] = static_cast<uint8_t>(qp >> 16);
  bth[6] = static_cast<uint8_t>(qp >> 8);
  bth[7] = static_cast<uint8_t>(qp);
  bth[9] = static_cast<uint8_t>(psn >> 16);
  bth[10] = static_cast<uint8_t>(psn >> 8);
  bth[11] = static_cast<uint8_t>(psn);
  return f;
}

/// `f` with an 802.1Q tag (TPID `tpid`, TCI `tci`) after its MACs.
inline std::vector<uint8_t> tagged(std::vector<uint8_t> f, uint16_t tci, uint16_t tpid = 0x8100) {
  const uint8_t tag[4] = {static_cast<uint8_t>(tpid >> 8), static_cast<uint8_t>(tpid),
                          static_cast<uint8_t>(tci >> 8), static_cast<uint8_t>(tci)};
  f.insert(f.begin() + 12, tag, tag + 4);
  return f;
}

/// An ARP packet: op 1 (request) or 2 (reply).
inline std::vector<uint8_t> arp(uint16_t op, const MacBytes& sha, uint32_t spa, uint32_t tpa,
                                const MacBytes& to) {
  std::vector<uint8_t> f(60, 0);
  put_mac(f.data(), to);
  put_mac(f.data() + 6, sha);
  f[12] = 0x08;
  f[13] = 0x06;
  uint8_t* a = f.data() + 14;
  a[1] = 1;     // Ethernet
  a[2] = 0x08;  // IPv4
  a[4] = 6;
  a[5] = 4;
  a[7] = static_cast<uint8_t>(op);
  put_mac(a + 8, sha);
  put_ip(a + 14, spa);
  put_ip(a + 24, tpa);
  return f;
}

}  // namespace rowan::gw::frames
