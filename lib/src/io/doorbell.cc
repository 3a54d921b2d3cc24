#include "io/doorbell.h"

#include <arpa/inet.h>
#include <linux/filter.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <stdexcept>

namespace rowan::io {

Doorbell::Doorbell(const std::string& iface, const DoorbellOptions& opts) {
  const unsigned ifindex = if_nametoindex(iface.c_str());
  if (ifindex == 0) throw std::runtime_error("no interface " + iface);
  // Protocol 0 until bound: no frame is queued before the options are set.
  fd_ = ::socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw std::runtime_error(std::string("packet socket: ") + std::strerror(errno));
  sock_filter code[] = {{BPF_RET | BPF_K, 0, 0, 1}};  // keep one byte
  const sock_fprog prog{1, code};
  const int one = 1;
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_protocol = htons(ETH_P_ALL);
  sll.sll_ifindex = static_cast<int>(ifindex);
  const bool ok =
      setsockopt(fd_, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) == 0 &&
      setsockopt(fd_, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) == 0 &&
      setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &opts.rcvbuf, sizeof opts.rcvbuf) == 0 &&
      (!opts.timestamps || setsockopt(fd_, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one) == 0) &&
      ::bind(fd_, reinterpret_cast<const sockaddr*>(&sll), sizeof sll) == 0;
  if (!ok) {
    const std::string why = std::strerror(errno);
    ::close(fd_);
    fd_ = -1;
    throw std::runtime_error("packet socket on " + iface + ": " + why);
  }
}

Doorbell::~Doorbell() {
  if (fd_ >= 0) ::close(fd_);
}

uint32_t Doorbell::drain() const noexcept {
  // One recvmmsg takes what the queue holds (a few frames) in one syscall;
  // the bound only guards a flood racing the loop.
  constexpr unsigned kBatch = 8;
  uint8_t bytes[kBatch];
  iovec iov[kBatch];
  mmsghdr msgs[kBatch];
  for (unsigned i = 0; i < kBatch; ++i) {
    iov[i] = iovec{&bytes[i], 1};
    msgs[i] = mmsghdr{};
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
  }
  uint32_t n = 0;
  for (int round = 0; round < 32; ++round) {
    const int got = ::recvmmsg(fd_, msgs, kBatch, MSG_DONTWAIT | MSG_TRUNC, nullptr);
    if (got <= 0) break;
    n += static_cast<uint32_t>(got);
    if (static_cast<unsigned>(got) < kBatch) break;  // empty now
  }
  return n;
}

size_t Doorbell::read_stamps(int64_t* out, size_t max, int64_t mono_minus_real) const noexcept {
  size_t n = 0;
  while (n < max) {
    uint8_t byte = 0;
    alignas(cmsghdr) uint8_t ctrl[CMSG_SPACE(sizeof(timespec))];
    iovec iov{&byte, sizeof byte};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctrl;
    msg.msg_controllen = sizeof ctrl;
    if (::recvmsg(fd_, &msg, MSG_DONTWAIT) < 0) break;
    int64_t t = -1;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
        timespec ts{};
        std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
        t = static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec + mono_minus_real;
      }
    }
    if (t < 0) break;
    out[n++] = t;
  }
  return n;
}

}  // namespace rowan::io
