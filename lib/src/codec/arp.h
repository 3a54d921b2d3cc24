// ARP for IPv4 over Ethernet (RFC 826): the message codec that every rowan
// port resolving IPv4 neighbours uses (the gateway's site port and its DPDK
// WAN port). Pure functions on frame bytes: no state, no allocation, no I/O;
// the callers keep their own tables and send what these functions write.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "codec/ip_addr.h"

namespace rowan::arp {

using Mac = std::array<uint8_t, 6>;

inline constexpr uint32_t kEthLen = 14;    ///< Ethernet header (no VLAN tag)
inline constexpr uint32_t kArpLen = 28;    ///< Ethernet/IPv4 ARP message
inline constexpr uint32_t kFrameLen = 60;  ///< a request, padded to the minimum Ethernet frame
inline constexpr uint16_t kOpRequest = 1;
inline constexpr uint16_t kOpReply = 2;
inline constexpr Mac kBroadcast = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

/// One Ethernet/IPv4 ARP message; the addresses are IPv4 `roce::IpAddr`s.
struct Message {
  uint16_t op = 0;  ///< kOpRequest, kOpReply, or another (callers ignore them)
  Mac sender_mac{};
  roce::IpAddr sender_ip;
  Mac target_mac{};
  roce::IpAddr target_ip;
};

/// The ARP message in the Ethernet frame `eth` of `len` bytes, whose EtherType
/// the caller has read as ARP. Nothing when the frame is short or the message
/// is not Ethernet (hardware type 1, length 6) over IPv4 (0x0800, length 4).
std::optional<Message> parse(const uint8_t* eth, uint32_t len) noexcept;

/// Turns the request in `eth` (parse() accepted it) into the reply that `mac`
/// and `ip` send back to its sender, in place: Ethernet addresses, operation,
/// target := sender, sender := (`mac`, `ip`). The frame keeps its length.
void make_reply(uint8_t* eth, const Mac& mac, const roce::IpAddr& ip) noexcept;

/// Writes into `eth` (kFrameLen bytes) the broadcast request from `mac`/`ip`
/// asking who has `target`, zero-padded to the minimum frame.
void write_request(uint8_t* eth, const Mac& mac, const roce::IpAddr& ip,
                   const roce::IpAddr& target) noexcept;

}  // namespace rowan::arp
