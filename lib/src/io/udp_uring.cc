#include "io/udp_uring.h"

#include <arpa/inet.h>
#include <netinet/ip.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <stdexcept>
#include <system_error>

#include "base/clock.h"

namespace rowan::io {
namespace {

constexpr uint64_t kRecvTag = 1ULL << 32;
constexpr uint64_t kSendTag = 2ULL << 32;
constexpr uint64_t kPollTag = 3ULL << 32;

[[noreturn]] void fail(const char* what) {
  throw std::system_error(errno, std::generic_category(), what);
}

}  // namespace

UdpEndpoint UdpEndpoint::parse(const std::string& text) {
  UdpEndpoint e;
  std::string host;
  std::string port;
  if (!text.empty() && text[0] == '[') {
    const auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      throw std::invalid_argument("bad endpoint '" + text + "' (want [ADDR]:PORT)");
    }
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string::npos)
      throw std::invalid_argument("bad endpoint '" + text + "' (want ADDR:PORT)");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  char* end = nullptr;
  const unsigned long p = std::strtoul(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || p > 65535)
    throw std::invalid_argument("bad port in '" + text + "'");
  auto* v4 = reinterpret_cast<sockaddr_in*>(&e.addr);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&e.addr);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(p));
    e.len = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(p));
    e.len = sizeof(sockaddr_in6);
  } else {
    throw std::invalid_argument("bad address in '" + text + "'");
  }
  return e;
}

std::string UdpEndpoint::to_string() const {
  // Appends piecewise: GCC 12 -O3 misreports string operator+ (-Wrestrict).
  char buf[INET6_ADDRSTRLEN] = {};
  std::string out;
  if (addr.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &v4->sin_addr, buf, sizeof buf);
    out.append(buf);
    out.push_back(':');
    out.append(std::to_string(ntohs(v4->sin_port)));
    return out;
  }
  const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&addr);
  inet_ntop(AF_INET6, &v6->sin6_addr, buf, sizeof buf);
  out.push_back('[');
  out.append(buf);
  out.append("]:");
  out.append(std::to_string(ntohs(v6->sin6_port)));
  return out;
}

bool UdpEndpoint::same(const sockaddr_storage& a) const {
  if (a.ss_family != addr.ss_family) return false;
  if (a.ss_family == AF_INET) {
    const auto* x = reinterpret_cast<const sockaddr_in*>(&a);
    const auto* y = reinterpret_cast<const sockaddr_in*>(&addr);
    return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
  }
  const auto* x = reinterpret_cast<const sockaddr_in6*>(&a);
  const auto* y = reinterpret_cast<const sockaddr_in6*>(&addr);
  return x->sin6_port == y->sin6_port &&
         std::memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) == 0;
}

UdpUringIo::UdpUringIo(const UdpUringOptions& opts) : opts_(opts) {
  const int family = opts_.bind.addr.ss_family;
  if (family != AF_INET && family != AF_INET6)
    throw std::invalid_argument("UdpUringIo: no bind address");
  fd_ = ::socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) fail("socket");
  const int one = 1;
  if (family == AF_INET) {
    setsockopt(fd_, IPPROTO_IP, IP_RECVTOS, &one, sizeof one);
    const int pmtu = IP_PMTUDISC_DO;  // never fragment: the transport sizes datagrams
    setsockopt(fd_, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu);
    const int tos = static_cast<int>(Ecn::kEct0);
    setsockopt(fd_, IPPROTO_IP, IP_TOS, &tos, sizeof tos);
  } else {
    setsockopt(fd_, IPPROTO_IPV6, IPV6_RECVTCLASS, &one, sizeof one);
    const int tclass = static_cast<int>(Ecn::kEct0);
    setsockopt(fd_, IPPROTO_IPV6, IPV6_TCLASS, &tclass, sizeof tclass);
  }
  // Per-datagram software receive timestamps (taken when the packet reaches
  // the stack): the event loop may reap a datagram long after it arrived,
  // or after a clock read that preceded its arrival, so its own clock is no
  // measure of when an ACK came back.
  setsockopt(fd_, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
  setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &opts_.socket_buffer, sizeof opts_.socket_buffer);
  setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &opts_.socket_buffer, sizeof opts_.socket_buffer);
  if (::bind(fd_, reinterpret_cast<const sockaddr*>(&opts_.bind.addr), opts_.bind.len) != 0) {
    const int e = errno;
    ::close(fd_);
    errno = e;
    fail(("bind " + opts_.bind.to_string()).c_str());
  }
  const unsigned entries = opts_.rx_slots + opts_.tx_slots;
  const int rc = io_uring_queue_init(entries, &ring_, 0);
  if (rc < 0) {
    ::close(fd_);
    errno = -rc;
    fail("io_uring_queue_init");
  }
  ring_ok_ = true;
  rx_mem_.resize(static_cast<size_t>(opts_.rx_slots) * opts_.max_datagram);
  tx_mem_.resize(static_cast<size_t>(opts_.tx_slots) * opts_.max_datagram);
  rx_.resize(opts_.rx_slots);
  tx_.resize(opts_.tx_slots);
  rx_ready_.reserve(opts_.rx_slots);
  tx_free_.reserve(opts_.tx_slots);
  for (uint32_t i = 0; i < opts_.tx_slots; ++i) {
    Slot& s = tx_[i];
    s.iov.iov_base = tx_mem_.data() + static_cast<size_t>(i) * opts_.max_datagram;
    s.msg.msg_iov = &s.iov;
    s.msg.msg_iovlen = 1;
    s.addr = opts_.peer.addr;
    s.msg.msg_name = &s.addr;
    s.msg.msg_namelen = opts_.peer.len;
    tx_free_.push_back(opts_.tx_slots - 1 - i);
  }
  for (uint32_t i = 0; i < opts_.rx_slots; ++i) post_recv(i);
  io_uring_submit(&ring_);
  pending_submit_ = 0;
}

UdpUringIo::~UdpUringIo() {
  if (ring_ok_) io_uring_queue_exit(&ring_);
  if (fd_ >= 0) ::close(fd_);
}

void UdpUringIo::post_recv(uint32_t i) noexcept {
  Slot& s = rx_[i];
  s.iov.iov_base = rx_mem_.data() + static_cast<size_t>(i) * opts_.max_datagram;
  s.iov.iov_len = opts_.max_datagram;
  s.msg = msghdr{};
  s.msg.msg_name = &s.addr;
  s.msg.msg_namelen = sizeof s.addr;
  s.msg.msg_iov = &s.iov;
  s.msg.msg_iovlen = 1;
  s.msg.msg_control = s.control;
  s.msg.msg_controllen = sizeof s.control;
  s.ready = false;
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) {  // cannot happen: the ring holds every slot
    ++udp_stats_.rx_errors;
    return;
  }
  io_uring_prep_recvmsg(sqe, fd_, &s.msg, 0);
  io_uring_sqe_set_data64(sqe, kRecvTag | i);
  ++pending_submit_;
}

void UdpUringIo::reap() noexcept {
  io_uring_cqe* cqe = nullptr;
  unsigned head = 0;
  unsigned seen = 0;
  io_uring_for_each_cqe(&ring_, head, cqe) {
    ++seen;
    const uint64_t tag = io_uring_cqe_get_data64(cqe);
    const auto idx = static_cast<uint32_t>(tag);
    const uint64_t kind = tag & ~0xFFFFFFFFULL;
    if (kind == kPollTag) {  // wait()'s poll fired (or was cancelled): re-armed on the next wait
      polled_fd_ = -1;
      continue;
    }
    // Anything but our own receives and sends (e.g. liburing's internal
    // timeout completions on kernels without EXT_ARG) is ignored.
    if ((kind != kSendTag && kind != kRecvTag) ||
        idx >= (kind == kSendTag ? tx_.size() : rx_.size())) {
      continue;
    }
    if (kind == kSendTag) {
      if (cqe->res < 0) ++udp_stats_.tx_errors;
      tx_free_.push_back(idx);
      continue;
    }
    Slot& s = rx_[idx];
    if (cqe->res < 0 || (s.msg.msg_flags & MSG_TRUNC) != 0) {
      if (cqe->res >= 0)
        ++stats_.rx_truncated;
      else
        ++udp_stats_.rx_errors;
      post_recv(idx);
      continue;
    }
    if (opts_.peer.len != 0 && !opts_.peer.same(s.addr)) {
      ++udp_stats_.rx_wrong_source;
      post_recv(idx);
      continue;
    }
    s.len = static_cast<uint32_t>(cqe->res);
    s.ready = true;
    rx_ready_.push_back(idx);
  }
  if (seen > 0) io_uring_cq_advance(&ring_, seen);
}

size_t UdpUringIo::recv_burst(std::span<RxDatagram> bufs, TimePoint now) noexcept {
  return recv_burst_from(bufs, nullptr, now);
}

size_t UdpUringIo::recv_burst_from(std::span<RxDatagram> bufs, UdpEndpoint* from,
                                   TimePoint now) noexcept {
  // CLOCK_MONOTONIC minus CLOCK_REALTIME, read once per burst when a
  // datagram carries a (CLOCK_REALTIME) kernel timestamp.
  bool have_offset = false;
  int64_t mono_minus_real = 0;
  if (rx_ready_head_ >= rx_ready_.size()) {
    rx_ready_.clear();
    rx_ready_head_ = 0;
    reap();
  }
  size_t n = 0;
  while (n < bufs.size() && rx_ready_head_ < rx_ready_.size()) {
    const uint32_t idx = rx_ready_[rx_ready_head_++];
    Slot& s = rx_[idx];
    RxDatagram& d = bufs[n];
    if (s.len > d.capacity) {
      ++stats_.rx_truncated;
      post_recv(idx);
      continue;
    }
    std::memcpy(d.data, s.iov.iov_base, s.len);
    d.len = s.len;
    if (from != nullptr) {
      from[n].addr = s.addr;
      from[n].len = s.msg.msg_namelen;
    }
    d.ecn = Ecn::kNotEct;
    d.rx_time = TimePoint();
    for (cmsghdr* c = CMSG_FIRSTHDR(&s.msg); c != nullptr; c = CMSG_NXTHDR(&s.msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
        timespec ts{};
        std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
        if (!have_offset) {
          mono_minus_real = monotonic_minus_realtime_ns();
          have_offset = true;
        }
        const int64_t real_ns = static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
        d.rx_time = TimePoint::from_ns(real_ns + mono_minus_real);
        ++udp_stats_.rx_timestamped;
        if (!now.is_zero() && d.rx_time > now) {
          ++udp_stats_.rx_after_now;
          udp_stats_.rx_after_now_max = std::max(udp_stats_.rx_after_now_max, d.rx_time - now);
        }
        continue;
      }
      if ((c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) ||
          (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS)) {
        int tos = 0;
        std::memcpy(&tos, CMSG_DATA(c), c->cmsg_type == IP_TOS ? 1 : sizeof(int));
        d.ecn = static_cast<Ecn>(tos & 0x3);
      }
    }
    ++stats_.rx_packets;
    stats_.rx_bytes += s.len;
    post_recv(idx);
    ++n;
  }
  if (pending_submit_ > 0) {
    io_uring_submit(&ring_);
    pending_submit_ = 0;
  }
  return n;
}

size_t UdpUringIo::send_burst(std::span<const TxDatagram> pkts, TimePoint now) noexcept {
  return send_burst_to(pkts, opts_.peer, now);
}

size_t UdpUringIo::send_burst_to(std::span<const TxDatagram> pkts, const UdpEndpoint& to,
                                 TimePoint now) noexcept {
  (void)now;
  reap();  // frees completed send slots
  size_t n = 0;
  for (const TxDatagram& d : pkts) {
    if (tx_free_.empty() || d.len > opts_.max_datagram) {
      if (d.len > opts_.max_datagram) {
        ++udp_stats_.tx_errors;
        ++n;  // an oversized datagram can never go: count and skip it
        continue;
      }
      ++stats_.tx_full;
      break;
    }
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) {
      io_uring_submit(&ring_);
      pending_submit_ = 0;
      sqe = io_uring_get_sqe(&ring_);
      if (sqe == nullptr) {
        ++stats_.tx_full;
        break;
      }
    }
    const uint32_t idx = tx_free_.back();
    tx_free_.pop_back();
    Slot& s = tx_[idx];
    std::memcpy(s.iov.iov_base, d.data, d.len);
    s.iov.iov_len = d.len;
    std::memcpy(&s.addr, &to.addr, to.len);
    s.msg.msg_namelen = to.len;
    io_uring_prep_sendmsg(sqe, fd_, &s.msg, 0);
    io_uring_sqe_set_data64(sqe, kSendTag | idx);
    ++pending_submit_;
    ++stats_.tx_packets;
    stats_.tx_bytes += d.len;
    ++n;
  }
  if (pending_submit_ > 0) {
    io_uring_submit(&ring_);
    pending_submit_ = 0;
  }
  return n;
}

void UdpUringIo::wait(Duration timeout, int also_fd) noexcept {
  if (rx_ready_head_ < rx_ready_.size()) return;
  // One poll stays posted until it fires: a wait cut short by the timer
  // leaves it in place for the next one.
  if (also_fd >= 0 && polled_fd_ != also_fd) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) {
      io_uring_submit(&ring_);
      sqe = io_uring_get_sqe(&ring_);
    }
    if (sqe != nullptr) {
      io_uring_prep_poll_add(sqe, also_fd, POLLIN);
      io_uring_sqe_set_data64(sqe, kPollTag);
      polled_fd_ = also_fd;
      ++pending_submit_;
    }
  }
  __kernel_timespec ts{};
  ts.tv_sec = timeout.ns() / 1000000000;
  ts.tv_nsec = timeout.ns() % 1000000000;
  io_uring_cqe* cqe = nullptr;
  if (pending_submit_ > 0) {
    pending_submit_ = 0;
    io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
  } else {
    io_uring_wait_cqe_timeout(&ring_, &cqe, &ts);
  }
}

}  // namespace rowan::io
