// Ring geometry for DPDK's net_af_packet PMD when frames are larger than its
// defaults hold. The PMD's PACKET_MMAP ring has 2048-byte frame slots unless
// told otherwise (framesz, blocksz), so a jumbo frame from a 4200-byte-MTU
// site LAN arrives truncated; and the PMD refuses a slot larger than its mbufs'
// data room. rowand (its local port, DPDK WAN links) and rowan-wanem (its two
// ports) size both from the largest frame they must carry.
//
// The PMD addresses slots as one array (slot i at i * framesz), so a block
// must hold a whole number of slots and be a whole number of pages: framesz is
// rounded up to 256 bytes, which keeps a block at most 16 slots.
//
// Threading: pure functions.
#pragma once

#include <cstdint>
#include <string>

namespace rowan::io {

/// The largest Ethernet frame an IP MTU gives: the header and one VLAN tag.
constexpr uint32_t ethernet_frame(uint32_t ip_mtu) noexcept { return ip_mtu + 14 + 4; }

struct AfPacketRing {
  uint32_t framesz = 0;    ///< slot size: frame, TPACKET_V2 header and alignment
  uint32_t blocksz = 0;    ///< whole pages, a whole number of slots
  uint32_t data_room = 0;  ///< the mbuf data room the PMD needs for such slots
};

/// Slot geometry for frames of up to `max_frame` bytes (Ethernet header
/// included); all zero when the PMD's defaults already hold them.
AfPacketRing af_packet_ring(uint32_t max_frame) noexcept;

/// `device` with framesz and blocksz appended when it is a net_af_packet vdev
/// that sets neither and its default slots are too small for `max_frame`;
/// any other device string is returned as it is. `*data_room` is raised to
/// what the PMD needs (left alone otherwise).
std::string af_packet_device(const std::string& device, uint32_t max_frame, uint32_t* data_room);

}  // namespace rowan::io
