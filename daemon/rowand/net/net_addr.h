// The addresses rowand's configuration names: an IP prefix (routes, subnets)
// and an address with a UDP port (WAN binds, peer endpoints, the metrics
// listener), with their text forms. The IP address itself is roce::IpAddr.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "codec/ip_addr.h"

namespace rowan::gw {

/// An IPv4/IPv6 prefix, e.g. 198.18.2.0/24.
struct Prefix {
  roce::IpAddr addr;
  uint8_t len = 0;
  bool operator==(const Prefix&) const = default;
  /// True when `a` (same version) falls inside the prefix.
  bool contains(const roce::IpAddr& a) const;
  bool overlaps(const Prefix& o) const;
  std::string to_string() const;
};

/// An address and UDP port, e.g. 198.19.0.2:47910 or [2001:2::2]:47910.
struct SockAddr {
  roce::IpAddr addr;
  uint16_t port = 0;
  std::string to_string() const;
  bool operator==(const SockAddr&) const = default;
};

inline constexpr uint16_t kDefaultWanPort = 47910;

/// The prefix with its host bits cleared (198.18.1.1/24 -> 198.18.1.0/24).
Prefix network_of(const Prefix& p);
/// Parses "198.18.2.0/24" or "2001:2::/48" (host bits must be zero).
std::optional<Prefix> parse_prefix(std::string_view text);
/// Parses "198.19.0.2:47910", "[2001:2::2]:47910", or a bare address (then
/// `default_port`). Port 0 is rejected.
std::optional<SockAddr> parse_sockaddr(std::string_view text, uint16_t default_port);

/// Parses an IPv4 or IPv6 address; nothing else (no port, no NUL byte).
std::optional<roce::IpAddr> parse_ip(std::string_view text);

}  // namespace rowan::gw
