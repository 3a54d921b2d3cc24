#include "io/af_packet_ring.h"

#include <algorithm>
#include <numeric>

namespace rowan::io {
namespace {

constexpr uint32_t kPage = 4096;
// The PMD's default slot (framesz=2048).
constexpr uint32_t kDefaultFrameSz = 2048;
// Where the kernel puts a frame in a TPACKET_V2 slot: its Ethernet header
// starts 66 bytes in (the 32-byte header and the 20-byte sockaddr_ll, rounded
// up to 16 with 16 bytes for the MAC header, less its 14); 80 leaves a margin.
constexpr uint32_t kSlotOverhead = 80;
// The PMD checks framesz - (TPACKET2_HDRLEN - sizeof(sockaddr_ll)) against the
// mbuf data room.
constexpr uint32_t kPmdHeader = 32;

}  // namespace

AfPacketRing af_packet_ring(uint32_t max_frame) noexcept {
  if (max_frame + kSlotOverhead <= kDefaultFrameSz) return {};
  AfPacketRing r;
  r.framesz = (max_frame + kSlotOverhead + 255) / 256 * 256;
  r.blocksz = r.framesz / std::gcd(r.framesz, kPage) * kPage;  // lcm(framesz, page)
  r.data_room = r.framesz - kPmdHeader;
  return r;
}

std::string af_packet_device(const std::string& device, uint32_t max_frame, uint32_t* data_room) {
  if (device.rfind("net_af_packet", 0) != 0) return device;
  if (device.find(",framesz=") != std::string::npos ||
      device.find(",blocksz=") != std::string::npos) {
    return device;  // the operator's geometry
  }
  const AfPacketRing r = af_packet_ring(max_frame);
  if (r.framesz == 0) return device;
  if (data_room != nullptr) *data_room = std::max(*data_room, r.data_room);
  return device + ",framesz=" + std::to_string(r.framesz) + ",blocksz=" + std::to_string(r.blocksz);
}

}  // namespace rowan::io
