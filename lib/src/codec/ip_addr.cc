#include "codec/ip_addr.h"

#include <arpa/inet.h>

#include <cstring>

namespace rowan::roce {

IpAddr parse_ip_addr(std::string_view text) {
  IpAddr a;
  char tmp[64];
  if (text.size() >= sizeof tmp) return a;
  std::memcpy(tmp, text.data(), text.size());
  tmp[text.size()] = '\0';
  if (inet_pton(AF_INET, tmp, a.bytes.data()) == 1) {
    a.version = 4;
  } else if (inet_pton(AF_INET6, tmp, a.bytes.data()) == 1) {
    a.version = 6;
  }
  return a;
}

size_t format_ip_addr(const IpAddr& a, char* out, size_t cap) {
  if (cap == 0) return 0;
  out[0] = '\0';
  if (a.version != 4 && a.version != 6) return 0;
  if (inet_ntop(a.version == 4 ? AF_INET : AF_INET6, a.bytes.data(), out,
                static_cast<socklen_t>(cap)) == nullptr) {
    return 0;
  }
  return std::strlen(out);
}

std::string to_string(const IpAddr& a) {
  char buf[INET6_ADDRSTRLEN];
  return {buf, format_ip_addr(a, buf, sizeof buf)};
}

}  // namespace rowan::roce
