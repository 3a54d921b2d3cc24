// Prefixes and socket addresses: parsing, containment and text forms.
#include "net/net_addr.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

namespace rowan::gw {

namespace {

bool same_bits(const roce::IpAddr& a, const roce::IpAddr& b, unsigned bits) {
  const unsigned full = bits / 8;
  if (std::memcmp(a.bytes.data(), b.bytes.data(), full) != 0) return false;
  const unsigned rest = bits % 8;
  if (rest == 0) return true;
  const auto mask = static_cast<uint8_t>(0xFFu << (8 - rest));
  return (a.bytes[full] & mask) == (b.bytes[full] & mask);
}

unsigned max_len(const roce::IpAddr& a) { return a.version == 4 ? 32 : 128; }

std::optional<unsigned> parse_uint(std::string_view s, unsigned max) {
  if (s.empty() || s.size() > 6) return std::nullopt;
  unsigned v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  if (v > max) return std::nullopt;
  return v;
}

// An address in a prefix's or socket address's text; "?" for none.
std::string addr_text(const roce::IpAddr& a) {
  std::string s = roce::to_string(a);
  return s.empty() ? std::string("?") : s;
}

}  // namespace

std::optional<roce::IpAddr> parse_ip(std::string_view text) {
  if (text.empty() || text.find('\0') != std::string_view::npos) return std::nullopt;
  roce::IpAddr a = roce::parse_ip_addr(text);
  if (a.version != 4 && a.version != 6) return std::nullopt;
  return a;
}

Prefix network_of(const Prefix& p) {
  Prefix out = p;
  if (p.addr.version != 4 && p.addr.version != 6) return out;
  for (unsigned bit = p.len; bit < max_len(p.addr); ++bit) {
    out.addr.bytes[bit / 8] = static_cast<uint8_t>(out.addr.bytes[bit / 8] & ~(0x80u >> (bit % 8)));
  }
  return out;
}

bool Prefix::contains(const roce::IpAddr& a) const {
  return a.version == addr.version && same_bits(addr, a, len);
}

bool Prefix::overlaps(const Prefix& o) const {
  return o.addr.version == addr.version && same_bits(addr, o.addr, std::min(len, o.len));
}

// fmt rather than std::string's operator+: GCC 12 at -O3 reports a false
// -Wrestrict inside the inlined operator+ (GCC bug 105329).
std::string Prefix::to_string() const { return fmt::format("{}/{}", addr_text(addr), len); }

std::string SockAddr::to_string() const {
  if (addr.version == 6) return fmt::format("[{}]:{}", addr_text(addr), port);
  return fmt::format("{}:{}", addr_text(addr), port);
}

std::optional<Prefix> parse_prefix(std::string_view text) {
  const size_t slash = text.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  auto addr = parse_ip(text.substr(0, slash));
  if (!addr) return std::nullopt;
  auto len = parse_uint(text.substr(slash + 1), max_len(*addr));
  if (!len) return std::nullopt;
  Prefix p{*addr, static_cast<uint8_t>(*len)};
  // Host bits must be zero: "198.18.1.5/24" is almost always a typo.
  if (network_of(p).addr != p.addr) return std::nullopt;
  return p;
}

std::optional<SockAddr> parse_sockaddr(std::string_view text, uint16_t default_port) {
  std::string_view host = text;
  std::optional<std::string_view> port;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = text.substr(1, close - 1);
    const std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return std::nullopt;
      port = rest.substr(1);
    }
    auto a = parse_ip(host);
    if (!a || a->version != 6) return std::nullopt;
  } else if (std::count(text.begin(), text.end(), ':') == 1) {
    const size_t colon = text.find(':');
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  auto a = parse_ip(host);
  if (!a) return std::nullopt;
  SockAddr s{*a, default_port};
  if (port) {
    auto p = parse_uint(*port, 65535);
    if (!p) return std::nullopt;
    s.port = static_cast<uint16_t>(*p);
  }
  if (s.port == 0) return std::nullopt;
  return s;
}

}  // namespace rowan::gw
