#include "rx_waker.h"

#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rowan::gw {

std::string RxWaker::af_packet_iface(const std::string& device) {
  if (device.rfind("net_af_packet", 0) != 0) return "";
  size_t pos = device.find(',');
  while (pos != std::string::npos) {
    const size_t start = pos + 1;
    const size_t end = device.find(',', start);
    const std::string kv = device.substr(start, end == std::string::npos ? end : end - start);
    if (kv.rfind("iface=", 0) == 0) return kv.substr(6);
    pos = end;
  }
  return "";
}

RxWaker::RxWaker(const std::string& device) {
  const std::string iface = af_packet_iface(device);
  if (iface.empty()) {
    why_not_ = "not an af_packet port";
    return;
  }
  const unsigned ifindex = if_nametoindex(iface.c_str());
  if (ifindex == 0) {
    why_not_ = "no interface " + iface;
    return;
  }
  // Protocol 0 until bound: no frame is queued before the options are set.
  const int fd = ::socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    why_not_ = std::string("socket: ") + std::strerror(errno);
    return;
  }
  const int one = 1;
  const int zero = 0;  // the kernel rounds it up to its minimum (a few frames)
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_protocol = htons(ETH_P_ALL);
  sll.sll_ifindex = static_cast<int>(ifindex);
  if (setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) != 0 ||
      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &zero, sizeof zero) != 0 ||
      ::bind(fd, reinterpret_cast<const sockaddr*>(&sll), sizeof sll) != 0) {
    why_not_ = std::string("set-up: ") + std::strerror(errno);
    ::close(fd);
    return;
  }
  fd_ = fd;
}

RxWaker::~RxWaker() {
  if (fd_ >= 0) ::close(fd_);
}

uint32_t RxWaker::arm() noexcept {
  if (fd_ < 0) return 0;
  uint32_t n = 0;
  uint8_t byte = 0;
  // MSG_TRUNC: the frame is dropped whole, one byte copied. The queue is a
  // few frames at most; the bound only guards a flood racing the loop.
  for (int i = 0; i < 64; ++i) {
    if (::recv(fd_, &byte, sizeof byte, MSG_DONTWAIT | MSG_TRUNC) < 0) break;
    ++n;
  }
  return n;
}

}  // namespace rowan::gw
