// An IPv4 or IPv6 address, as the codec parses it from packets and the
// config from text: the one address type of the packet path (RoCEv2 flows,
// routes, neighbours, links).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace rowan::roce {

struct IpAddr {
  uint8_t version = 0;              ///< 4 or 6 (0: none)
  std::array<uint8_t, 16> bytes{};  ///< IPv4 in the first 4 bytes, the rest zero
  bool operator==(const IpAddr&) const = default;
};

/// Returns an IpAddr for dotted IPv4 or colon IPv6 text; version 0 if invalid.
IpAddr parse_ip_addr(std::string_view text);
/// Writes the textual form into `out` (at least 46 bytes); returns its length
/// (0, and an empty string, for version 0).
size_t format_ip_addr(const IpAddr& a, char* out, size_t cap);
/// The textual form ("198.18.1.10", "2001:2::10"); empty for version 0.
std::string to_string(const IpAddr& a);

}  // namespace rowan::roce
