#include "codec/arp.h"

#include <cstring>

#include "codec/bytes.h"
#include "codec/ethertypes.h"

namespace rowan::arp {
namespace {

// Offsets within the ARP message (RFC 826, Ethernet/IPv4): hardware and
// protocol types and address lengths, operation, sender and target addresses.
enum Offset : uint32_t { kHtype = 0, kPtype = 2, kHlen = 4, kPlen = 5, kOp = 6 };
enum AddressOffset : uint32_t { kSha = 8, kSpa = 14, kTha = 18, kTpa = 24 };
constexpr uint16_t kHtypeEthernet = 1;

roce::IpAddr ipv4_at(const uint8_t* p) {
  roce::IpAddr a{4, {}};
  std::memcpy(a.bytes.data(), p, 4);
  return a;
}

}  // namespace

std::optional<Message> parse(const uint8_t* eth, uint32_t len) noexcept {
  if (len < kEthLen + kArpLen) return std::nullopt;
  const uint8_t* a = eth + kEthLen;
  if (wire::load_be16(a + kHtype) != kHtypeEthernet ||
      wire::load_be16(a + kPtype) != kEtherTypeIpv4 || a[kHlen] != 6 || a[kPlen] != 4) {
    return std::nullopt;
  }
  Message m;
  m.op = wire::load_be16(a + kOp);
  std::memcpy(m.sender_mac.data(), a + kSha, 6);
  m.sender_ip = ipv4_at(a + kSpa);
  std::memcpy(m.target_mac.data(), a + kTha, 6);
  m.target_ip = ipv4_at(a + kTpa);
  return m;
}

void make_reply(uint8_t* eth, const Mac& mac, const roce::IpAddr& ip) noexcept {
  uint8_t* a = eth + kEthLen;
  std::memcpy(eth, eth + 6, 6);  // to the requester
  std::memcpy(eth + 6, mac.data(), 6);
  wire::store_be16(a + kOp, kOpReply);
  std::memcpy(a + kTha, a + kSha, 10);  // target := sender (MAC and IP)
  std::memcpy(a + kSha, mac.data(), 6);
  std::memcpy(a + kSpa, ip.bytes.data(), 4);
}

void write_request(uint8_t* eth, const Mac& mac, const roce::IpAddr& ip,
                   const roce::IpAddr& target) noexcept {
  std::memset(eth, 0, kFrameLen);
  std::memcpy(eth, kBroadcast.data(), 6);
  std::memcpy(eth + 6, mac.data(), 6);
  wire::store_be16(eth + 12, kEtherTypeArp);
  uint8_t* a = eth + kEthLen;
  wire::store_be16(a + kHtype, kHtypeEthernet);
  wire::store_be16(a + kPtype, kEtherTypeIpv4);
  a[kHlen] = 6;
  a[kPlen] = 4;
  wire::store_be16(a + kOp, kOpRequest);
  std::memcpy(a + kSha, mac.data(), 6);
  std::memcpy(a + kSpa, ip.bytes.data(), 4);
  std::memcpy(a + kTpa, target.bytes.data(), 4);  // target MAC stays zero
}

}  // namespace rowan::arp
