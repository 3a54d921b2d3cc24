#include "io/udp_uring.h"

#include <arpa/inet.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <array>
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

// What a GSO send's completion says when the kernel, the socket or the route
// will not segment (udp_send_skb: EINVAL for a checksum-less socket or a
// gso_size above the route's MTU, EIO for UDP-Lite or IPsec; older kernels
// EIO without checksum offload): the run goes again one datagram each.
bool gso_refused(int err) {
  return err == EIO || err == EINVAL || err == EOPNOTSUPP || err == ENOPROTOOPT;
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
  // Segmentation offload, detected once: a kernel without it says
  // ENOPROTOOPT here, and the socket sends and receives one datagram each.
  if (opts_.gso) {
    int seg = 0;
    socklen_t seg_len = sizeof seg;
    gso_ = getsockopt(fd_, SOL_UDP, UDP_SEGMENT, &seg, &seg_len) == 0;
    if (!gso_) ++udp_stats_.gso_fallbacks;
  }
  if (opts_.gro) {
    gro_ = setsockopt(fd_, SOL_UDP, UDP_GRO, &one, sizeof one) == 0;
    if (!gro_) ++udp_stats_.gro_unsupported;
  }
  if (family == AF_INET6) gso_max_bytes_ = 65535 - 8;  // the payload length excludes IPv6's header
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
  rx_cap_ = gro_ ? std::max(kGroBufferBytes, opts_.max_datagram) : opts_.max_datagram;
  rx_mem_.resize(static_cast<size_t>(opts_.rx_slots) * rx_cap_);
  // As much send memory as tx_slots datagrams of the largest size: GSO runs
  // take it in one piece each, lone datagrams in pieces of their own size.
  tx_mem_.resize(static_cast<size_t>(opts_.tx_slots) * opts_.max_datagram);
  rx_.resize(opts_.rx_slots);
  tx_.resize(opts_.tx_slots);
  rx_ready_.reserve(opts_.rx_slots);
  rx_held_.reserve(opts_.rx_slots);
  tx_refused_.reserve(opts_.tx_slots);
  for (Slot& s : tx_) {
    s.msg.msg_iov = &s.iov;
    s.msg.msg_iovlen = 1;
    s.msg.msg_name = &s.addr;
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
  s.iov.iov_base = rx_mem_.data() + static_cast<size_t>(i) * rx_cap_;
  s.iov.iov_len = rx_cap_;
  s.msg = msghdr{};
  s.msg.msg_name = &s.addr;
  s.msg.msg_namelen = sizeof s.addr;
  s.msg.msg_iov = &s.iov;
  s.msg.msg_iovlen = 1;
  s.msg.msg_control = s.control;
  s.msg.msg_controllen = sizeof s.control;
  s.ready = false;
  s.parsed = false;
  s.off = 0;
  s.seg = 0;
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
      Slot& t = tx_[idx];
      if (cqe->res < 0 && t.count > 1 && gso_refused(-cqe->res)) {
        if (gso_) ++udp_stats_.gso_fallbacks;
        gso_ = false;
        tx_refused_.push_back(idx);  // its memory stays held until it went again
        continue;
      }
      if (cqe->res < 0) udp_stats_.tx_errors += t.count;
      t.done = true;
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
  release_sends();
}

void UdpUringIo::release_sends() noexcept {
  while (tx_count_ > 0 && tx_[tx_first_].done) {
    tx_used_ -= tx_[tx_first_].bytes;
    tx_first_ = (tx_first_ + 1) % opts_.tx_slots;
    --tx_count_;
  }
  if (tx_count_ == 0) tx_head_ = 0;  // empty: start over, the whole ring in one piece
}

void UdpUringIo::parse_rx(Slot& s, bool* have_offset, int64_t* mono_minus_real) noexcept {
  s.parsed = true;
  s.ecn = Ecn::kNotEct;
  s.rx_time = TimePoint();
  s.seg = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&s.msg); c != nullptr; c = CMSG_NXTHDR(&s.msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
      timespec ts{};
      std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
      if (!*have_offset) {
        *mono_minus_real = monotonic_minus_realtime_ns();
        *have_offset = true;
      }
      const int64_t real_ns = static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
      s.rx_time = TimePoint::from_ns(real_ns + *mono_minus_real);
      continue;
    }
    if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
      int seg = 0;
      std::memcpy(&seg, CMSG_DATA(c), sizeof seg);
      if (seg > 0 && static_cast<uint32_t>(seg) < s.len) s.seg = static_cast<uint32_t>(seg);
      continue;
    }
    if ((c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) ||
        (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS)) {
      int tos = 0;
      std::memcpy(&tos, CMSG_DATA(c), c->cmsg_type == IP_TOS ? 1 : sizeof(int));
      s.ecn = static_cast<Ecn>(tos & 0x3);
    }
  }
}

size_t UdpUringIo::recv_burst(std::span<RxDatagram> bufs, TimePoint now) noexcept {
  return recv_burst_from(bufs, nullptr, now);
}

bool UdpUringIo::lend_rx(bool on) noexcept {
  if (!on) rx_done();
  lend_rx_ = on;
  return true;
}

void UdpUringIo::rx_done() noexcept {
  if (rx_held_.empty()) return;
  for (const uint32_t idx : rx_held_) post_recv(idx);
  rx_held_.clear();
  io_uring_submit(&ring_);
  pending_submit_ = 0;
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
    const uint32_t idx = rx_ready_[rx_ready_head_];
    Slot& s = rx_[idx];
    if (!s.parsed) parse_rx(s, &have_offset, &mono_minus_real);
    // One datagram of the train (all of it when the kernel did not coalesce).
    const uint32_t left = s.len - s.off;
    const uint32_t len = s.seg != 0 ? std::min(s.seg, left) : left;
    const uint8_t* src = static_cast<const uint8_t*>(s.iov.iov_base) + s.off;
    s.off += len;
    const bool last = s.off >= s.len;
    if (last) {
      ++rx_ready_head_;
      if (s.seg != 0) {
        ++udp_stats_.rx_gro_trains;
        udp_stats_.rx_gro_datagrams += (s.len + s.seg - 1) / s.seg;
      }
    }
    RxDatagram& d = bufs[n];
    // Lent datagrams stay in the slot (their train's earlier ones too): it
    // is posted again at rx_done.
    const bool lend = lend_rx_;
    if (last && lend) rx_held_.push_back(idx);
    if ((!lend && len > d.capacity) || len > opts_.max_datagram) {
      ++stats_.rx_truncated;
      if (last && !lend) post_recv(idx);
      continue;
    }
    if (lend) {
      d.data = static_cast<uint8_t*>(s.iov.iov_base) + (s.off - len);
    } else {
      std::memcpy(d.data, src, len);
    }
    d.len = len;
    if (from != nullptr) {
      from[n].addr = s.addr;
      from[n].len = s.msg.msg_namelen;
    }
    d.ecn = s.ecn;
    d.rx_time = s.rx_time;
    if (!s.rx_time.is_zero()) {
      ++udp_stats_.rx_timestamped;
      if (!now.is_zero() && d.rx_time > now) {
        ++udp_stats_.rx_after_now;
        udp_stats_.rx_after_now_max = std::max(udp_stats_.rx_after_now_max, d.rx_time - now);
      }
    }
    ++stats_.rx_packets;
    stats_.rx_bytes += len;
    if (last && !lend) post_recv(idx);
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

void UdpUringIo::submit() noexcept {
  if (pending_submit_ > 0) {
    io_uring_submit(&ring_);
    pending_submit_ = 0;
  }
}

uint32_t UdpUringIo::tx_room() const noexcept {
  if (tx_count_ == opts_.tx_slots) return 0;
  const auto cap = static_cast<uint32_t>(tx_mem_.size());
  const uint32_t free = cap - tx_used_;
  const uint32_t to_end = cap - tx_head_;
  if (free <= to_end) return free;         // the free bytes lie in one piece at the head
  return std::max(to_end, free - to_end);  // at the head up to the end, or from the start
}

uint8_t* UdpUringIo::queue_send(uint32_t len, uint32_t count, uint32_t seg,
                                const sockaddr_storage& to, socklen_t to_len) noexcept {
  const auto cap = static_cast<uint32_t>(tx_mem_.size());
  uint32_t waste = 0;
  if (len > cap - tx_head_) {  // does not fit before the end: skip the tail, start over
    waste = cap - tx_head_;
    tx_head_ = 0;
  }
  const uint32_t idx = (tx_first_ + tx_count_) % opts_.tx_slots;
  ++tx_count_;
  Slot& s = tx_[idx];
  uint8_t* dst = tx_mem_.data() + tx_head_;
  s.iov.iov_base = dst;
  s.iov.iov_len = len;
  s.len = len;
  s.count = count;
  s.seg = seg;
  s.bytes = len + waste;
  s.done = false;
  tx_head_ += len;
  tx_used_ += s.bytes;
  std::memcpy(&s.addr, &to, to_len);
  s.msg.msg_namelen = to_len;
  if (count > 1) {
    s.msg.msg_control = s.control;
    s.msg.msg_controllen = CMSG_SPACE(sizeof(uint16_t));
    cmsghdr* c = CMSG_FIRSTHDR(&s.msg);
    c->cmsg_level = SOL_UDP;
    c->cmsg_type = UDP_SEGMENT;
    c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
    const auto gso_size = static_cast<uint16_t>(seg);
    std::memcpy(CMSG_DATA(c), &gso_size, sizeof gso_size);
    ++udp_stats_.tx_gso_sends;
    udp_stats_.tx_gso_datagrams += count;
  } else {
    s.msg.msg_control = nullptr;
    s.msg.msg_controllen = 0;
  }
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) {  // the ring is sized for every slot; flush and retry once
    submit();
    sqe = io_uring_get_sqe(&ring_);
  }
  if (sqe == nullptr) {  // cannot happen; the bytes are lost, and counted
    udp_stats_.tx_errors += count;
    s.done = true;
    return dst;
  }
  io_uring_prep_sendmsg(sqe, fd_, &s.msg, 0);
  io_uring_sqe_set_data64(sqe, kSendTag | idx);
  ++pending_submit_;
  return dst;
}

void UdpUringIo::resend_refused() noexcept {
  for (const uint32_t idx : tx_refused_) {
    Slot& r = tx_[idx];
    const auto* src = static_cast<const uint8_t*>(r.iov.iov_base);
    for (uint32_t off = 0; off < r.len;) {
      const uint32_t len = std::min(r.seg, r.len - off);
      if (tx_room() < len) {  // no memory for the copy: lost, and counted
        udp_stats_.tx_errors += (r.len - off + r.seg - 1) / r.seg;
        break;
      }
      std::memcpy(queue_send(len, 1, 0, r.addr, r.msg.msg_namelen), src + off, len);
      off += len;
    }
    r.done = true;
  }
  tx_refused_.clear();
  submit();
  release_sends();
}

size_t UdpUringIo::send_burst_to(std::span<const TxDatagram> pkts, const UdpEndpoint& to,
                                 TimePoint now) noexcept {
  (void)now;
  reap();  // releases completed sends' memory
  if (!tx_refused_.empty()) resend_refused();
  size_t n = 0;
  bool gso_sent = false;
  while (n < pkts.size()) {
    const uint32_t seg = pkts[n].len;
    if (seg > opts_.max_datagram) {
      ++udp_stats_.tx_errors;
      ++n;  // an oversized datagram can never go: count and skip it
      continue;
    }
    const uint32_t room = tx_room();
    // The run: datagrams of one size after the first, and at most one shorter
    // one to end it, within the kernel's limits and the memory free now.
    size_t count = 1;
    uint32_t len = seg;
    if (gso_ && seg > 0) {
      const uint32_t limit = std::min(room, gso_max_bytes_);
      while (n + count < pkts.size() && count < kGsoMaxSegments) {
        const uint32_t next = pkts[n + count].len;
        if (next > seg || next == 0 || len + next > limit) break;
        len += next;
        ++count;
        if (next < seg) break;
      }
    }
    if (tx_count_ == opts_.tx_slots || len > room) {
      ++stats_.tx_full;
      break;
    }
    gso_sent = gso_sent || count > 1;
    uint8_t* dst = queue_send(len, static_cast<uint32_t>(count), seg, to.addr, to.len);
    for (size_t i = 0; i < count; ++i) {
      const TxDatagram& d = pkts[n + i];
      std::memcpy(dst, d.data, d.len);
      dst += d.len;
      stats_.tx_bytes += d.len;
    }
    stats_.tx_packets += count;
    n += count;
  }
  submit();
  // Sends usually complete during the submit: a GSO refusal is re-sent
  // here rather than at the next burst.
  if (gso_sent) {
    reap();
    if (!tx_refused_.empty()) resend_refused();
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

void UdpUringIo::wait_any(std::span<UdpUringIo* const> ios, Duration timeout) noexcept {
  constexpr size_t kMaxWatched = 16;
  std::array<pollfd, kMaxWatched> fds{};
  size_t n = 0;
  for (UdpUringIo* io : ios) {
    if (io->rx_ready_head_ < io->rx_ready_.size()) return;
    // Receives re-posted by the last reap must be in the kernel before we sleep.
    if (io->pending_submit_ > 0) {
      io->pending_submit_ = 0;
      io_uring_submit(&io->ring_);
    }
    if (io_uring_cq_ready(&io->ring_) > 0) return;
    if (n < kMaxWatched) fds[n++] = pollfd{io->ring_.ring_fd, POLLIN, 0};
  }
  timespec ts{};
  ts.tv_sec = timeout.ns() / 1000000000;
  ts.tv_nsec = timeout.ns() % 1000000000;
  ::ppoll(fds.data(), n, &ts, nullptr);
}

}  // namespace rowan::io
