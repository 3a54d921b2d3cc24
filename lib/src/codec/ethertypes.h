// Ethernet frame types (IEEE 802 EtherType values) the project's codecs,
// tools and gateway read and write.
#pragma once

#include <cstdint>

namespace rowan {

inline constexpr uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr uint16_t kEtherTypeArp = 0x0806;
inline constexpr uint16_t kEtherTypeVlan = 0x8100;  ///< IEEE 802.1Q tag
inline constexpr uint16_t kEtherTypeIpv6 = 0x86DD;
inline constexpr uint16_t kEtherTypeQinQ = 0x88A8;  ///< IEEE 802.1ad service tag

}  // namespace rowan
