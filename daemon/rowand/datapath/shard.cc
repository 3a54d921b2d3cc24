#include "datapath/shard.h"

#include <algorithm>
#include <cstring>

#include "net/packet_util.h"
#include "net/vlan.h"

namespace rowan::gw {
namespace {

using namespace pkt;  // NOLINT: the packet helpers of packet_util.h

uint64_t fold(const uint8_t* a, uint32_t n) {
  uint64_t h = 0;
  for (uint32_t i = 0; i < n; i += 4) {
    uint32_t w;
    std::memcpy(&w, a + i, 4);
    h = fmix64(h ^ w);
  }
  return h;
}

bool is_split(const std::vector<ShardRoute>& routes, const roce::IpAddr& dst) {
  for (const ShardRoute& r : routes) {
    if (r.prefix.contains(dst)) return r.split;
  }
  return false;
}

}  // namespace

bool flow_hash(const uint8_t* ip, uint32_t len, const std::vector<ShardRoute>& routes,
               uint64_t* hash) noexcept {
  if (len < 20) return false;
  const uint8_t v = ip[0] >> 4;
  uint32_t l4 = 0, alen = 0, src = 0, dst = 0;
  uint8_t proto = 0;
  bool fragment = false;
  if (v == 4) {
    l4 = (ip[0] & 0xFU) * 4U;
    if (l4 < 20 || l4 > len) return false;
    proto = ip[9];
    fragment = (load_be16(ip + 6) & 0x3FFF) != 0;
    alen = 4, src = 12, dst = 16;
  } else if (v == 6) {
    if (len < 40) return false;
    l4 = 40;
    proto = ip[6];
    alen = 16, src = 8, dst = 24;
  } else {
    return false;
  }
  uint64_t a = fold(ip + src, alen);
  uint64_t b = fold(ip + dst, alen);
  uint64_t pa = 0, pb = 0;
  if (!fragment && (proto == 6 || proto == 17) && len >= l4 + 4) {
    pa = load_be16(ip + l4);
    pb = load_be16(ip + l4 + 2);
    if (proto == 17 && pb == roce::kRoceV2Port) {
      roce::IpAddr d;
      d.version = v;
      std::memcpy(d.bytes.data(), ip + dst, alen);
      if (is_split(routes, d)) pa = pb = 0;
    }
  }
  // Symmetric: order the (address, port) ends before combining them.
  a = fmix64(a ^ (pa << 48));
  b = fmix64(b ^ (pb << 48));
  const uint64_t lo = std::min(a, b), hi = std::max(a, b);
  *hash = fmix64(lo * 0x9E3779B97F4A7C15ULL ^ hi ^ proto);
  return true;
}

uint32_t shard_of(const uint8_t* frame, uint32_t len, uint32_t workers,
                  const std::vector<ShardRoute>& routes) noexcept {
  if (workers <= 1) return 0;
  if (len < kEthLen) return 0;
  // A tagged frame as the same frame untagged (the gateway strips the tag).
  L2Header l2;
  if (parse_l2(frame, len, l2) != L2Verdict::kOk) return 0;
  const uint16_t type = l2.type;
  if (type == kEthArp) return kAllWorkers;
  const uint8_t* ip = frame + l2.l3_off;
  const uint32_t iplen = len - l2.l3_off;
  if (type == kEthIpv6 && iplen >= 41 && ip[6] == 58 && (ip[40] == 135 || ip[40] == 136)) {
    return kAllWorkers;  // neighbour discovery
  }
  if (type != kEthIpv4 && type != kEthIpv6) return 0;
  uint64_t h = 0;
  if (!flow_hash(ip, iplen, routes, &h)) return 0;
  // Multiply-shift onto [0, workers): unbiased enough, no division.
  return static_cast<uint32_t>(((h >> 32) * workers) >> 32);
}

double jain_index(const std::vector<double>& x) {
  double s = 0, s2 = 0;
  for (double v : x) {
    s += v;
    s2 += v * v;
  }
  return s2 == 0 ? 1.0 : s * s / (static_cast<double>(x.size()) * s2);
}

}  // namespace rowan::gw
