#include "api/channel.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <stdexcept>
#include <system_error>

#include "codec/bytes.h"
#include "registry.h"

namespace rowan::api {

ChannelParams channel_params(const rowan_channel_options* o) {
  ChannelParams p;
  if (o == nullptr) return p;
  if (o->cc != nullptr) p.cc = o->cc;
  if (o->rate_bps > 0) p.rate_bps = o->rate_bps;
  if (o->rtt_s > 0) p.rtt_s = o->rtt_s;
  if (o->max_datagram != 0) p.max_datagram = o->max_datagram;
  if (o->max_queued_sends != 0) p.max_queued_sends = o->max_queued_sends;
  if (o->handshake_timeout_ms > 0) p.handshake_timeout_ms = o->handshake_timeout_ms;
  if (o->idle_timeout_ms > 0) p.idle_timeout_ms = o->idle_timeout_ms;
  if (o->idle_timeout_ms < 0) p.idle_timeout_ms = 0;  // disabled
  return p;
}

}  // namespace rowan::api

using rowan::Duration;
using rowan::TimePoint;
namespace api = rowan::api;

// ---- Channel -------------------------------------------------------------

namespace rowan::api {

std::unique_ptr<io::UdpUringIo> open_path_socket(const io::UdpEndpoint& bind,
                                                 const io::UdpEndpoint& peer,
                                                 uint32_t max_datagram) {
  io::UdpUringOptions io;
  io.bind = bind;
  io.peer = peer;
  io.max_datagram = max_datagram;
  return std::make_unique<io::UdpUringIo>(io);
}

}  // namespace rowan::api

namespace {

std::vector<std::unique_ptr<rowan::io::UdpUringIo>> one_socket(const api::ChannelParams& p,
                                                               const rowan::io::UdpEndpoint& bind,
                                                               const rowan::io::UdpEndpoint& peer) {
  std::vector<std::unique_ptr<rowan::io::UdpUringIo>> v;
  v.push_back(api::open_path_socket(bind, peer, p.max_datagram));
  return v;
}

rowan::io::UdpEndpoint local_of(int fd) {
  rowan::io::UdpEndpoint e;
  e.len = sizeof e.addr;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&e.addr), &e.len) != 0) e.len = 0;
  return e;
}

}  // namespace

rowan_channel::rowan_channel(const api::ChannelParams& p, const rowan::io::UdpEndpoint& bind,
                             const rowan::io::UdpEndpoint& peer, uint64_t connection_id)
    : rowan_channel(p, one_socket(p, bind, peer), {}, connection_id) {}

rowan_channel::rowan_channel(const api::ChannelParams& p,
                             std::vector<std::unique_ptr<rowan::io::UdpUringIo>> sockets,
                             const std::vector<rowan::transport::PathConfig>& paths,
                             uint64_t connection_id)
    : clock_(own_clock_), params_(p), id_(connection_id), udp_(std::move(sockets)) {
  if (udp_.empty() || (udp_.size() > 1 && paths.size() != udp_.size()))
    throw std::invalid_argument("a channel needs one socket per path");
  for (const auto& u : udp_) peers_.push_back(u->peer());
  peer_ = peers_[0];
  if (p.secure) {
    // Handshake timestamps are wall-clock time (they must keep increasing
    // across restarts), the transport's time is monotonic.
    timespec wall{};
    clock_gettime(CLOCK_REALTIME, &wall);
    const TimePoint now = clock_.now();
    rowan::crypto::SecureIoOptions so;
    so.private_key = p.private_key;
    so.peer_public = p.peer_public;
    so.wall_offset =
        Duration::from_ns(static_cast<int64_t>(wall.tv_sec) * 1000000000 + wall.tv_nsec - now.ns());
    // One session per path, as rowand runs one per link.
    for (const auto& u : udp_) {
      secure_.push_back(std::make_unique<rowan::crypto::SecureIo>(*u, so, now));
      ios_.push_back(secure_.back().get());
    }
  } else {
    for (const auto& u : udp_) ios_.push_back(u.get());
  }
  init_transport(connection_id, paths);
}

bool rowan_channel::secure_ready() const {
  const TimePoint now = clock_.now();
  for (const auto& s : secure_)
    if (!s->has_session(now)) return false;
  return true;
}

rowan_channel::rowan_channel(const api::ChannelParams& p, rowan::io::PacketIo& io,
                             const rowan::Clock& clock, const rowan::io::UdpEndpoint& peer,
                             uint64_t connection_id)
    : rowan_channel(p, std::vector<rowan::io::PacketIo*>{&io}, {}, clock, peer, connection_id) {}

rowan_channel::rowan_channel(const api::ChannelParams& p, std::vector<rowan::io::PacketIo*> ios,
                             const std::vector<rowan::transport::PathConfig>& paths,
                             const rowan::Clock& clock, const rowan::io::UdpEndpoint& peer,
                             uint64_t connection_id)
    : clock_(clock), params_(p), peer_(peer), id_(connection_id), ios_(std::move(ios)) {
  if (ios_.empty() || (ios_.size() > 1 && paths.size() != ios_.size()))
    throw std::invalid_argument("a channel needs one PacketIo per path");
  init_transport(connection_id, paths);
}

void rowan_channel::init_transport(uint64_t connection_id,
                                   const std::vector<rowan::transport::PathConfig>& paths) {
  rowan::transport::TransportConfig cfg;
  cfg.connection_id = connection_id;
  cfg.link_rate = rowan::BitsPerSec::from_bps(static_cast<uint64_t>(params_.rate_bps));
  cfg.base_rtt = Duration::from_seconds(params_.rtt_s);
  uint32_t dgram = params_.max_datagram;
  for (const rowan::io::PacketIo* io : ios_) dgram = std::min(dgram, io->max_datagram());
  cfg.max_datagram = dgram;
  if (!params_.cc.empty()) cfg.cc = params_.cc;
  if (ios_.size() > 1) cfg.paths = paths;
  const TimePoint now = clock_.now();
  conn_ = std::make_unique<rowan::transport::Connection>(cfg, clock_, now);
  driver_ = std::make_unique<rowan::transport::Driver>(
      *conn_, std::span<rowan::io::PacketIo* const>(ios_), 32, &clock_);
  last_rx_time_ = now;
  last_ping_ = now;
}

rowan_channel::~rowan_channel() = default;

int rowan_channel::local_port() const {
  if (udp_.empty()) return -1;
  const rowan::io::UdpEndpoint a = local_of(udp_[0]->fd());
  if (a.len == 0) return -1;
  if (a.addr.ss_family == AF_INET)
    return ntohs(reinterpret_cast<const sockaddr_in*>(&a.addr)->sin_port);
  return ntohs(reinterpret_cast<const sockaddr_in6*>(&a.addr)->sin6_port);
}

void rowan_channel::wait(Duration d) {
  if (udp_.size() == 1) {
    udp_[0]->wait(d);
    return;
  }
  std::array<rowan::io::UdpUringIo*, api::kMaxChannelPaths> all{};
  size_t n = 0;
  for (const auto& u : udp_) all[n++] = u.get();
  rowan::io::UdpUringIo::wait_any(std::span(all.data(), n), d);
}

int rowan_channel::send(const void* buf, size_t len, rowan_send_cb cb, void* user) {
  if (failed_) return fail_status_;
  if (conn_->closed()) return ROWAN_ERR_CLOSED;
  if (len > UINT32_MAX || (buf == nullptr && len > 0)) return ROWAN_ERR_INVALID;
  if (sends_.size() >= params_.max_queued_sends) return ROWAN_ERR_AGAIN;
  PendingSend m{};
  m.buf = static_cast<const uint8_t*>(buf);
  m.len = len;
  m.cb = cb;
  m.user = user;
  rowan::wire::store_le32(m.header, static_cast<uint32_t>(len));
  sends_.push_back(m);
  push_sends(clock_.now());
  return ROWAN_OK;
}

int rowan_channel::post_recv(void* buf, size_t cap, rowan_recv_cb cb, void* user) {
  if (buf == nullptr && cap > 0) return ROWAN_ERR_INVALID;
  if (failed_) return fail_status_;
  recvs_.push_back(PostedRecv{static_cast<uint8_t*>(buf), cap, cb, user});
  return ROWAN_OK;
}

void rowan_channel::push_sends(TimePoint now) {
  while (unwritten_ < sends_.size()) {
    PendingSend& m = sends_[unwritten_];
    const uint64_t total = api::kMessageHeader + m.len;
    while (m.written < total) {
      size_t n = 0;
      if (m.written < api::kMessageHeader) {
        n = conn_->write(0, m.header + m.written, api::kMessageHeader - m.written, false, now);
      } else {
        const uint64_t off = m.written - api::kMessageHeader;
        n = conn_->write(0, m.buf + off, m.len - off, false, now);
      }
      if (n == 0) return;  // send buffer full
      m.written += n;
      written_total_ += n;
    }
    m.end = written_total_;
    ++unwritten_;
  }
}

int rowan_channel::complete_sends() {
  const uint64_t acked = written_total_ - std::min(written_total_, conn_->unacked_bytes());
  int n = 0;
  while (unwritten_ > 0 && sends_.front().end <= acked) {
    const PendingSend m = sends_.front();
    sends_.pop_front();
    --unwritten_;
    ++messages_sent_;
    bytes_sent_ += m.len;
    ++n;
    if (m.cb != nullptr) m.cb(this, m.user, m.buf, m.len, ROWAN_OK);
  }
  return n;
}

int rowan_channel::pull_recvs(TimePoint now) {
  int n = 0;
  for (;;) {
    bool fin = false;
    if (rx_header_got_ < api::kMessageHeader) {
      const size_t got = conn_->read(0, rx_header_ + rx_header_got_,
                                     api::kMessageHeader - rx_header_got_, &fin, now);
      if (got == 0) break;
      rx_header_got_ += got;
      if (rx_header_got_ < api::kMessageHeader) break;
      rx_len_ = rowan::wire::load_le32(rx_header_);
      rx_got_ = 0;
    }
    if (recvs_.empty()) break;
    const PostedRecv& r = recvs_.front();
    if (rx_got_ < rx_len_) {
      uint8_t* dst = rx_len_ <= r.cap ? r.buf + rx_got_ : nullptr;  // too big: discard
      const size_t got = conn_->read(0, dst, rx_len_ - rx_got_, &fin, now);
      rx_got_ += got;
      if (rx_got_ < rx_len_) break;
    }
    const PostedRecv done = r;
    recvs_.pop_front();
    rx_header_got_ = 0;
    const bool fits = rx_len_ <= done.cap;
    if (fits) {
      ++messages_received_;
      bytes_received_ += rx_len_;
    }
    ++n;
    if (done.cb != nullptr)
      done.cb(this, done.user, done.buf, rx_len_, fits ? ROWAN_OK : ROWAN_ERR_MSGSIZE);
  }
  return n;
}

bool rowan_channel::peer_done() const {
  return conn_->peer_closed() && conn_->readable(0) == 0 &&
         (rx_header_got_ == 0 || rx_header_got_ == api::kMessageHeader) &&
         (rx_header_got_ == 0 || rx_got_ < rx_len_ || recvs_.empty());
}

TimePoint rowan_channel::keepalive(TimePoint now) {
  if (params_.idle_timeout_ms <= 0 || conn_->closed()) return TimePoint::infinite();
  const Duration every =
      Duration::from_ms(params_.idle_timeout_ms) / api::kKeepalivesPerIdleTimeout;
  if (now - std::max(last_rx_time_, last_ping_) >= every) {
    conn_->ping();
    last_ping_ = now;
    ++keepalives_sent_;
  }
  return std::max(last_rx_time_, last_ping_) + every;
}

int rowan_channel::step(TimePoint now, TimePoint* next) {
  // A keepalive queued here leaves in this pass.
  const TimePoint ping_due = keepalive(now);
  push_sends(now);
  *next = std::min(driver_->poll(now), ping_due);
  push_sends(now);
  int n = complete_sends();
  n += pull_recvs(now);
  const rowan::transport::ConnStats& s = conn_->stats();
  if (s.packets_received != last_rx_packets_) {
    last_rx_packets_ = s.packets_received;
    last_rx_time_ = now;
  }
  return n;
}

int rowan_channel::fail_all(int status) {
  failed_ = true;
  fail_status_ = status;
  int n = 0;
  while (!sends_.empty()) {
    const PendingSend m = sends_.front();
    sends_.pop_front();
    ++n;
    if (m.cb != nullptr) m.cb(this, m.user, m.buf, m.len, ROWAN_ERR_CLOSED);
  }
  unwritten_ = 0;
  while (!recvs_.empty()) {
    const PostedRecv r = recvs_.front();
    recvs_.pop_front();
    ++n;
    if (r.cb != nullptr) r.cb(this, r.user, r.buf, 0, ROWAN_ERR_CLOSED);
  }
  return n;
}

int rowan_channel::poll(int timeout_ms) {
  if (failed_) return fail_status_;
  const TimePoint start = clock_.now();
  const TimePoint deadline =
      timeout_ms < 0 ? TimePoint::infinite() : start + Duration::from_ms(timeout_ms);
  for (;;) {
    const TimePoint now = clock_.now();
    TimePoint next;
    const int n = step(now, &next);
    if (n > 0) return n;
    if (peer_done()) {
      fail_all(ROWAN_ERR_CLOSED);
      return ROWAN_ERR_CLOSED;
    }
    // Silence from the peer (keepalives unanswered): it is gone.
    if (params_.idle_timeout_ms > 0 &&
        now - last_rx_time_ > Duration::from_ms(params_.idle_timeout_ms)) {
      fail_all(ROWAN_ERR_TIMEOUT);
      return ROWAN_ERR_TIMEOUT;
    }
    if (now >= deadline) return 0;
    if (udp_.empty()) return 0;  // a test's PacketIo: the test advances time itself
    // Sleep until the transport's next timer, the deadline, or a datagram;
    // at most 100 ms so the idle check runs.
    TimePoint wake = std::min(next, deadline);
    wake = std::min(wake, now + Duration::from_ms(100));
    if (wake > now) wait(wake - now);
  }
}

int rowan_channel::flush(int timeout_ms) {
  const TimePoint deadline =
      timeout_ms < 0 ? TimePoint::infinite() : clock_.now() + Duration::from_ms(timeout_ms);
  while (!sends_.empty()) {
    const TimePoint now = clock_.now();
    if (now >= deadline) return ROWAN_ERR_TIMEOUT;
    const int rc =
        poll(static_cast<int>(std::min<int64_t>((deadline - now).ns() / 1000000 + 1, 100)));
    if (rc < 0) return rc;
  }
  return ROWAN_OK;
}

void rowan_channel::close() {
  if (!conn_->closed()) {
    const TimePoint now = clock_.now();
    conn_->close(0, now);
    driver_->poll(now);  // the CLOSE datagram leaves now
  }
  if (!failed_) fail_all(ROWAN_ERR_CLOSED);
}

void rowan_channel::fill_stats(rowan_channel_stats* out) const {
  const rowan::transport::ConnStats& s = conn_->stats();
  *out = rowan_channel_stats{};
  out->messages_sent = messages_sent_;
  out->messages_received = messages_received_;
  out->bytes_sent = bytes_sent_;
  out->bytes_received = bytes_received_;
  out->packets_sent = s.packets_sent;
  out->packets_received = s.packets_received;
  out->retransmitted_packets = s.retransmitted_packets;
  out->lost_packets = s.lost_packets;
  out->wire_bytes_sent = s.bytes_sent;
  out->retransmit_ratio = s.packets_sent > 0 ? static_cast<double>(s.retransmitted_packets) /
                                                   static_cast<double>(s.packets_sent)
                                             : 0.0;
  out->min_rtt_s = s.min_rtt.seconds();
  out->srtt_s = s.srtt.seconds();
  out->rttvar_s = s.rttvar.seconds();
  out->cwnd_bytes = s.cwnd;
  out->pacing_rate_bps = static_cast<double>(s.pacing_rate.bps());
  out->bytes_in_flight = s.bytes_in_flight;
  const std::string_view name = conn_->cc().name();
  const size_t n = std::min(name.size(), sizeof out->cc - 1);
  std::memcpy(out->cc, name.data(), n);
  out->cc[n] = '\0';
}

namespace {

void copy_text(const std::string& s, char* out, size_t cap) {
  const size_t n = std::min(s.size(), cap - 1);
  std::memcpy(out, s.data(), n);
  out[n] = '\0';
}

}  // namespace

void rowan_channel::fill_path_stats(size_t index, rowan_channel_path_stats* out) const {
  const rowan::transport::PathStats& s =
      conn_->path_stats(rowan::transport::PathId{static_cast<uint16_t>(index)});
  *out = rowan_channel_path_stats{};
  if (index < udp_.size()) {
    const rowan::io::UdpEndpoint local = local_of(udp_[index]->fd());
    if (local.len > 0) copy_text(local.to_string(), out->local, sizeof out->local);
    copy_text(peers_[index].to_string(), out->remote, sizeof out->remote);
  }
  out->up = s.state == rowan::transport::PathState::kUp ? 1 : 0;
  out->downs = static_cast<uint32_t>(s.downs);
  out->packets_sent = s.packets_sent;
  out->wire_bytes_sent = s.bytes_sent;
  out->wire_bytes_acked = s.bytes_acked;
  out->packets_received = s.packets_received;
  out->wire_bytes_received = s.bytes_received;
  out->lost_packets = s.lost_packets;
  out->retransmitted_packets = s.retransmitted_packets;
  out->min_rtt_s = s.min_rtt.seconds();
  out->srtt_s = s.srtt.seconds();
  out->cwnd_bytes = s.cwnd;
  out->pacing_rate_bps = static_cast<double>(s.pacing_rate.bps());
  out->bytes_in_flight = s.bytes_in_flight;
  out->rate_bps = static_cast<double>(s.link_rate.bps());
  out->rtt_s = s.base_rtt.seconds();
  out->fec_repair_packets = s.fec_repair_sent;
  out->fec_repair_bytes = s.fec_repair_bytes;
  out->fec_recovered = s.fec_recovered;
}

// ---- Listener ------------------------------------------------------------

rowan_listener::rowan_listener(const std::string& bind, const api::ChannelParams& p)
    : params_(p), bind_(rowan::io::UdpEndpoint::parse(bind)) {
  fd_ = ::socket(bind_.addr.ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "socket");
  // The address each hello or join arrived at: a path's socket is opened,
  // and its join answered, on that address.
  const int on = 1;
  const int rc = bind_.addr.ss_family == AF_INET
                     ? setsockopt(fd_, IPPROTO_IP, IP_PKTINFO, &on, sizeof on)
                     : setsockopt(fd_, IPPROTO_IPV6, IPV6_RECVPKTINFO, &on, sizeof on);
  if (rc != 0 || ::bind(fd_, reinterpret_cast<const sockaddr*>(&bind_.addr), bind_.len) != 0) {
    const int e = errno;
    ::close(fd_);
    fd_ = -1;
    throw std::system_error(e, std::generic_category(), "bind " + bind);
  }
}

rowan_listener::~rowan_listener() {
  if (fd_ >= 0) ::close(fd_);
}

int rowan_listener::port() const {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) return -1;
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&a)->sin_port);
  return ntohs(reinterpret_cast<const sockaddr_in6*>(&a)->sin6_port);
}

namespace {

uint64_t random_u64() {
  uint64_t v = 0;
  while (v == 0) {
    if (getrandom(&v, sizeof v, 0) != sizeof v)
      v = 0x9e3779b97f4a7c15ULL ^ static_cast<uint64_t>(getpid());
  }
  return v;
}

rowan::io::UdpEndpoint with_port(const rowan::io::UdpEndpoint& e, uint16_t port) {
  rowan::io::UdpEndpoint r = e;
  if (r.addr.ss_family == AF_INET)
    reinterpret_cast<sockaddr_in*>(&r.addr)->sin_port = htons(port);
  else
    reinterpret_cast<sockaddr_in6*>(&r.addr)->sin6_port = htons(port);
  return r;
}

uint16_t port_of(const sockaddr_storage& a) {
  return ntohs(a.ss_family == AF_INET ? reinterpret_cast<const sockaddr_in*>(&a)->sin_port
                                      : reinterpret_cast<const sockaddr_in6*>(&a)->sin6_port);
}

rowan::io::UdpEndpoint wildcard(int family, uint16_t port) {
  return rowan::io::UdpEndpoint::parse(family == AF_INET ? "0.0.0.0:" + std::to_string(port)
                                                         : "[::]:" + std::to_string(port));
}

bool same_host(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(&a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(&b)->sin_addr.s_addr;
  return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(&a)->sin6_addr,
                     &reinterpret_cast<const sockaddr_in6*>(&b)->sin6_addr, 16) == 0;
}

int64_t ms_until(TimePoint deadline, TimePoint now) {
  if (deadline == TimePoint::infinite()) return -1;
  return deadline > now ? (deadline - now).ns() / 1000000 + 1 : 0;
}

void send_to(int fd, const api::Handshake& h, const sockaddr_storage& to, socklen_t len) {
  uint8_t buf[api::kHandshakeSize];
  api::encode_handshake(h, buf);
  (void)::sendto(fd, buf, sizeof buf, MSG_NOSIGNAL, reinterpret_cast<const sockaddr*>(&to), len);
}

// Makes `value` the one control message of `msg` (whose buffer fits it).
template <typename T>
void put_control(msghdr* msg, int level, int type, const T& value) {
  msg->msg_controllen = CMSG_SPACE(sizeof(T));
  cmsghdr* c = CMSG_FIRSTHDR(msg);
  c->cmsg_level = level;
  c->cmsg_type = type;
  c->cmsg_len = CMSG_LEN(sizeof(T));
  std::memcpy(CMSG_DATA(c), &value, sizeof value);
}

// Sends `h` to `to` from the local address `from` (a socket bound to the
// wildcard address otherwise answers from the route's preferred source).
void send_from(int fd, const api::Handshake& h, const rowan::io::UdpEndpoint& to,
               const sockaddr_storage& from) {
  uint8_t buf[api::kHandshakeSize];
  api::encode_handshake(h, buf);
  iovec iov{buf, sizeof buf};
  alignas(cmsghdr) uint8_t control[CMSG_SPACE(sizeof(in6_pktinfo))] = {};
  msghdr msg{};
  msg.msg_name = const_cast<sockaddr_storage*>(&to.addr);
  msg.msg_namelen = to.len;
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  if (from.ss_family == AF_INET) {
    in_pktinfo pi{};
    pi.ipi_spec_dst = reinterpret_cast<const sockaddr_in*>(&from)->sin_addr;
    put_control(&msg, IPPROTO_IP, IP_PKTINFO, pi);
  } else {
    in6_pktinfo pi{};
    pi.ipi6_addr = reinterpret_cast<const sockaddr_in6*>(&from)->sin6_addr;
    pi.ipi6_ifindex = reinterpret_cast<const sockaddr_in6*>(&from)->sin6_scope_id;
    put_control(&msg, IPPROTO_IPV6, IPV6_PKTINFO, pi);
  }
  (void)::sendmsg(fd, &msg, MSG_NOSIGNAL);
}

// One datagram from a listener: its sender, and the local address it
// arrived at (port 0) when the kernel said.
ssize_t recv_with_local(int fd, uint8_t* buf, size_t cap, rowan::io::UdpEndpoint* from,
                        sockaddr_storage* local, bool* has_local) {
  iovec iov{buf, cap};
  alignas(cmsghdr) uint8_t control[256];
  msghdr msg{};
  msg.msg_name = &from->addr;
  msg.msg_namelen = sizeof from->addr;
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  const ssize_t n = ::recvmsg(fd, &msg, 0);
  if (n < 0) return n;
  from->len = msg.msg_namelen;
  *has_local = false;
  *local = sockaddr_storage{};
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
      in_pktinfo pi{};
      std::memcpy(&pi, CMSG_DATA(c), sizeof pi);
      auto* a = reinterpret_cast<sockaddr_in*>(local);
      a->sin_family = AF_INET;
      a->sin_addr = pi.ipi_addr;
      *has_local = true;
    } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
      in6_pktinfo pi{};
      std::memcpy(&pi, CMSG_DATA(c), sizeof pi);
      auto* a = reinterpret_cast<sockaddr_in6*>(local);
      a->sin6_family = AF_INET6;
      a->sin6_addr = pi.ipi6_addr;
      // A link-local address binds only with its interface.
      if (IN6_IS_ADDR_LINKLOCAL(&pi.ipi6_addr)) a->sin6_scope_id = pi.ipi6_ifindex;
      *has_local = true;
    }
  }
  return n;
}

rowan::io::UdpEndpoint endpoint_of(const sockaddr_storage& a, uint16_t port) {
  rowan::io::UdpEndpoint e;
  e.addr = a;
  e.len = a.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  return with_port(e, port);
}

rowan::transport::PathConfig path_config(const api::Handshake& h, const api::ChannelParams& p) {
  rowan::transport::PathConfig c;
  c.link_rate =
      rowan::BitsPerSec::from_bps(h.rate_bps > 0 ? h.rate_bps : static_cast<uint64_t>(p.rate_bps));
  c.base_rtt = h.rtt_ns > 0 ? Duration::from_ns(static_cast<int64_t>(h.rtt_ns))
                            : Duration::from_seconds(p.rtt_s);
  return c;
}

}  // namespace

void rowan_listener::answer(const Answer& a, const rowan::io::UdpEndpoint& client) const {
  if (a.has_local)
    send_from(fd_, a.reply, client, a.local);
  else
    send_to(fd_, a.reply, client.addr, client.len);
}

void rowan_listener::expire(TimePoint now) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second.expires <= now) {
      ++dropped_;  // a client whose paths never all joined
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
}

int rowan_listener::on_hello(const api::Handshake& h, const rowan::io::UdpEndpoint& client,
                             const sockaddr_storage* local, TimePoint now, rowan_channel** out) {
  api::ChannelParams p = params_;
  if (((h.flags & api::kHandshakeFlagSecure) != 0) != params_.secure) {
    api::Handshake reject;
    reject.type = api::HandshakeType::kReject;
    reject.nonce = h.nonce;
    reject.flags = params_.secure ? api::kHandshakeFlagSecure : 0;
    send_to(fd_, reject, client.addr, client.len);
    return ROWAN_ERR_AGAIN;
  }
  if (p.cc.empty()) p.cc = h.cc;
  // The client's BDP basis, so both ends agree on windows and buffers.
  if (h.rate_bps > 0) p.rate_bps = static_cast<double>(h.rate_bps);
  if (h.rtt_ns > 0) p.rtt_s = static_cast<double>(h.rtt_ns) * 1e-9;
  const size_t paths = std::max<size_t>(h.path, 1);
  api::Handshake reply;
  reply.nonce = h.nonce;
  reply.rate_bps = static_cast<uint64_t>(p.rate_bps);
  reply.rtt_ns = static_cast<uint64_t>(p.rtt_s * 1e9);
  reply.flags = params_.secure ? api::kHandshakeFlagSecure : 0;
  reply.path = paths > 1 ? static_cast<uint8_t>(paths) : 0;
  std::memcpy(reply.cc, h.cc, sizeof reply.cc);
  if (paths > api::kMaxChannelPaths) {
    reply.type = api::HandshakeType::kReject;
    send_to(fd_, reply, client.addr, client.len);
    return ROWAN_ERR_AGAIN;
  }
  // Set-ups waiting for their paths each hold a socket: a bounded number.
  if (paths > 1 && pending_.size() >= kMaxPendingSetups) {
    ++dropped_;
    return ROWAN_ERR_AGAIN;
  }
  rowan_channel* ch = nullptr;
  Pending pend;
  reply.connection_id = random_u64();
  try {
    // The data socket on the address the hello came to (a host with an
    // address per link answers each on its own).
    const rowan::io::UdpEndpoint at =
        local != nullptr ? endpoint_of(*local, 0) : with_port(bind_, 0);
    if (paths == 1) {
      ch = new rowan_channel(p, at, client, reply.connection_id);
    } else {
      // Path 0's socket now (its port goes in ACCEPT); the channel once
      // every path joined.
      pend.sockets.resize(paths);
      pend.sockets[0] = api::open_path_socket(at, client, p.max_datagram);
      if (!p.cc.empty() && rowan::cc::Registry::find(p.cc) == nullptr)
        throw std::invalid_argument("unknown congestion controller " + p.cc);
    }
  } catch (const std::system_error&) {
    return ROWAN_ERR_SYSTEM;
  } catch (const std::bad_alloc&) {
    return ROWAN_ERR_NOMEM;
  } catch (const std::exception&) {  // unknown congestion controller or bad parameters
    reply.type = api::HandshakeType::kReject;
    send_to(fd_, reply, client.addr, client.len);
    return ROWAN_ERR_AGAIN;
  }
  reply.type = api::HandshakeType::kAccept;
  Answer a;
  a.reply = reply;
  a.reply.data_port = paths == 1 ? static_cast<uint16_t>(ch->local_port())
                                 : port_of(rowan::api::local_address(*pend.sockets[0]).addr);
  if (local != nullptr) {  // from the address the client sent to
    a.local = *local;
    a.has_local = true;
  }
  if (answered_.size() >= 4096) answered_.clear();
  answered_[{client.to_string(), h.nonce, static_cast<uint8_t>(h.type)}] = a;
  answer(a, client);
  if (paths == 1) {
    *out = ch;
    return ROWAN_OK;
  }
  pend.params = p;
  pend.nonce = h.nonce;
  pend.paths.resize(paths);
  pend.paths[0] = path_config(reply, p);
  pend.from.resize(paths);
  pend.from[0] = client.to_string();
  pend.joined = 1;
  pend.expires = now + Duration::from_ms(p.handshake_timeout_ms);
  pending_[reply.connection_id] = std::move(pend);
  return ROWAN_ERR_AGAIN;
}

int rowan_listener::on_join(const api::Handshake& h, const rowan::io::UdpEndpoint& client,
                            const sockaddr_storage* local, rowan_channel** out) {
  const auto it = pending_.find(h.connection_id);
  if (it == pending_.end() || it->second.nonce != h.nonce || h.path == 0 ||
      h.path >= it->second.sockets.size() || it->second.sockets[h.path] != nullptr) {
    ++dropped_;  // forged, stale, or a second address for a path
    return ROWAN_ERR_AGAIN;
  }
  Pending& pend = it->second;
  api::Handshake reply;
  reply.type = api::HandshakeType::kAccept;
  reply.nonce = h.nonce;
  reply.connection_id = h.connection_id;
  reply.path = h.path;
  reply.flags = h.flags;
  // The path's BDP basis: the client's, else the channel's.
  reply.rate_bps = h.rate_bps > 0 ? h.rate_bps : static_cast<uint64_t>(pend.params.rate_bps);
  reply.rtt_ns = h.rtt_ns > 0 ? h.rtt_ns : static_cast<uint64_t>(pend.params.rtt_s * 1e9);
  const rowan::io::UdpEndpoint at = local != nullptr ? endpoint_of(*local, 0) : with_port(bind_, 0);
  try {
    pend.sockets[h.path] = api::open_path_socket(at, client, pend.params.max_datagram);
  } catch (const std::system_error&) {
    return ROWAN_ERR_SYSTEM;
  }
  reply.data_port = port_of(api::local_address(*pend.sockets[h.path]).addr);
  pend.paths[h.path] = path_config(reply, pend.params);
  pend.from[h.path] = client.to_string();
  Answer a;
  a.reply = reply;
  if (local != nullptr) {
    a.local = *local;
    a.has_local = true;
  }
  if (answered_.size() >= 4096) answered_.clear();
  answered_[{client.to_string(), h.nonce, static_cast<uint8_t>(h.type)}] = a;
  answer(a, client);
  if (++pend.joined < pend.sockets.size()) return ROWAN_ERR_AGAIN;
  Pending done = std::move(pend);
  pending_.erase(it);
  try {
    *out = new rowan_channel(done.params, std::move(done.sockets), done.paths, h.connection_id);
  } catch (const std::system_error&) {
    return ROWAN_ERR_SYSTEM;
  } catch (const std::bad_alloc&) {
    return ROWAN_ERR_NOMEM;
  }
  return ROWAN_OK;
}

int rowan_listener::accept(int timeout_ms, rowan_channel** out) {
  const rowan::MonotonicClock clock;
  const TimePoint deadline =
      timeout_ms < 0 ? TimePoint::infinite() : clock.now() + Duration::from_ms(timeout_ms);
  for (;;) {
    uint8_t buf[api::kHandshakeSize + 1];
    rowan::io::UdpEndpoint client;
    sockaddr_storage local{};
    bool has_local = false;
    const ssize_t n = recv_with_local(fd_, buf, sizeof buf, &client, &local, &has_local);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return ROWAN_ERR_SYSTEM;
      expire(clock.now());
      const int64_t wait = ms_until(deadline, clock.now());
      if (wait == 0) return ROWAN_ERR_TIMEOUT;
      pollfd p{fd_, POLLIN, 0};
      // Wake for pending set-ups' expiry too.
      ::poll(&p, 1, static_cast<int>(std::min<int64_t>(wait < 0 ? 1000 : wait, 1000)));
      continue;
    }
    api::Handshake h;
    if (!api::decode_handshake(buf, static_cast<size_t>(n), &h) ||
        (h.type != api::HandshakeType::kHello && h.type != api::HandshakeType::kJoin)) {
      ++dropped_;
      continue;
    }
    const auto key = std::make_tuple(client.to_string(), h.nonce, static_cast<uint8_t>(h.type));
    if (const auto it = answered_.find(key); it != answered_.end()) {
      answer(it->second, client);  // our ACCEPT was lost
      continue;
    }
    const sockaddr_storage* at = has_local ? &local : nullptr;
    const int rc = h.type == api::HandshakeType::kHello ? on_hello(h, client, at, clock.now(), out)
                                                        : on_join(h, client, at, out);
    if (rc != ROWAN_ERR_AGAIN) return rc;
  }
}

namespace rowan::api {

io::UdpEndpoint local_address(const io::UdpUringIo& socket) { return local_of(socket.fd()); }

namespace {

// "ADDR" or "ADDR:PORT" (IPv6 "[ADDR]:PORT" or a bare "ADDR"); empty: the
// wildcard address of `family`.
io::UdpEndpoint parse_local(const std::string& text, int family) {
  if (text.empty()) return wildcard(family, 0);
  try {
    return io::UdpEndpoint::parse(text);
  } catch (const std::invalid_argument&) {
    return io::UdpEndpoint::parse(text.find(':') != std::string::npos ? "[" + text + "]:0"
                                                                      : text + ":0");
  }
}

// A UDP socket for the handshake on one path, bound to `local`.
int handshake_socket(const io::UdpEndpoint& local, io::UdpEndpoint* bound, std::string* error) {
  const int fd = ::socket(local.addr.ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  bound->len = sizeof bound->addr;
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&local.addr), local.len) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&bound->addr), &bound->len) != 0) {
    *error = "bind " + local.to_string() + ": " + std::strerror(errno);
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends `request` to `to` (repeated 200 ms, doubling to 1 s) until an answer
// with its nonce comes from `to`'s host, or `deadline`. True and *reply then.
bool exchange(int fd, const Handshake& request, const io::UdpEndpoint& to, TimePoint deadline,
              Handshake* reply) {
  const MonotonicClock clock;
  Duration interval = Duration::from_ms(200);
  for (;;) {
    const TimePoint sent_at = clock.now();
    if (sent_at >= deadline) return false;
    send_to(fd, request, to.addr, to.len);
    const TimePoint retry = std::min(sent_at + interval, deadline);
    interval = std::min(interval + interval, Duration::from_ms(1000));
    for (;;) {
      uint8_t buf[kHandshakeSize + 1];
      sockaddr_storage from{};
      socklen_t from_len = sizeof from;
      const ssize_t n =
          ::recvfrom(fd, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &from_len);
      if (n < 0) {
        if (errno == EINTR) continue;
        const TimePoint now = clock.now();
        if (now >= retry) break;
        pollfd p{fd, POLLIN, 0};
        ::poll(&p, 1, static_cast<int>(ms_until(retry, now)));
        continue;
      }
      if (same_host(from, to.addr) && decode_handshake(buf, static_cast<size_t>(n), reply) &&
          reply->nonce == request.nonce && reply->type != HandshakeType::kHello &&
          reply->type != HandshakeType::kJoin)
        return true;
    }
  }
}

struct Fds {
  std::vector<int> fds;
  ~Fds() {
    for (const int fd : fds) ::close(fd);
  }
};

}  // namespace

int connect_channel(const std::string& server, const ChannelParams& params, bool rtt_given,
                    rowan_channel** out, std::string* error) {
  return connect_channel_paths({ClientPath{"", server, 0, 0}}, params, rtt_given, out, error);
}

int connect_channel_paths(const std::vector<ClientPath>& paths, const ChannelParams& params,
                          bool rtt_given, rowan_channel** out, std::string* error) {
  if (paths.empty() || paths.size() > kMaxChannelPaths) {
    *error = "a channel takes 1 to " + std::to_string(kMaxChannelPaths) + " paths";
    return ROWAN_ERR_INVALID;
  }
  const std::string& server = paths[0].remote;
  std::vector<io::UdpEndpoint> remote(paths.size()), local(paths.size());
  try {
    for (size_t i = 0; i < paths.size(); ++i) {
      remote[i] = io::UdpEndpoint::parse(paths[i].remote);
      local[i] = parse_local(paths[i].local, remote[0].addr.ss_family);
      if (remote[i].addr.ss_family != remote[0].addr.ss_family ||
          local[i].addr.ss_family != remote[0].addr.ss_family)
        throw std::invalid_argument("path " + std::to_string(i) +
                                    ": all paths' addresses must be of one family");
    }
  } catch (const std::exception& e) {
    *error = e.what();
    return ROWAN_ERR_INVALID;
  }
  // Each path's handshake socket stays open until the channel binds its
  // port again, so no two paths get the same one.
  Fds fds;
  std::vector<io::UdpEndpoint> bound(paths.size());
  Handshake hello;
  hello.type = HandshakeType::kHello;
  hello.nonce = random_u64();
  hello.rate_bps =
      static_cast<uint64_t>(paths[0].rate_bps > 0 ? paths[0].rate_bps : params.rate_bps);
  hello.rtt_ns = paths[0].rtt_s > 0 ? static_cast<uint64_t>(paths[0].rtt_s * 1e9)
                 : rtt_given        ? static_cast<uint64_t>(params.rtt_s * 1e9)
                                    : 0;
  hello.flags = params.secure ? kHandshakeFlagSecure : 0;
  hello.path = paths.size() > 1 ? static_cast<uint8_t>(paths.size()) : 0;
  std::strncpy(hello.cc, params.cc.c_str(), sizeof hello.cc - 1);

  const MonotonicClock clock;
  const TimePoint deadline = clock.now() + Duration::from_ms(params.handshake_timeout_ms);
  fds.fds.push_back(handshake_socket(local[0], &bound[0], error));
  if (fds.fds.back() < 0) return ROWAN_ERR_SYSTEM;
  Handshake reply;
  if (!exchange(fds.fds[0], hello, remote[0], deadline, &reply)) {
    *error = "no answer from " + server + " within " + std::to_string(params.handshake_timeout_ms) +
             " ms";
    return ROWAN_ERR_UNREACHABLE;
  }
  if (reply.type == HandshakeType::kReject) {
    if (((reply.flags & kHandshakeFlagSecure) != 0) != params.secure) {
      *error = server + (params.secure ? " runs without link security" : " requires link security");
    } else {
      *error = server + " rejected the channel (congestion controller '" + params.cc + "'?)";
    }
    return ROWAN_ERR_PROTOCOL;
  }
  if (paths.size() > 1 && reply.path != paths.size()) {
    *error = server + " takes channels over one path only";
    return ROWAN_ERR_UNSUPPORTED;
  }
  // The server's choice of rate and RTT (its default RTT unless we gave one).
  ChannelParams p = params;
  if (reply.rate_bps > 0) p.rate_bps = static_cast<double>(reply.rate_bps);
  if (reply.rtt_ns > 0) p.rtt_s = static_cast<double>(reply.rtt_ns) * 1e-9;
  std::vector<transport::PathConfig> configs{path_config(reply, p)};
  std::vector<uint16_t> data_port{reply.data_port};
  for (size_t i = 1; i < paths.size(); ++i) {
    fds.fds.push_back(handshake_socket(local[i], &bound[i], error));
    if (fds.fds.back() < 0) return ROWAN_ERR_SYSTEM;
    Handshake join;
    join.type = HandshakeType::kJoin;
    join.nonce = hello.nonce;
    join.connection_id = reply.connection_id;
    join.path = static_cast<uint8_t>(i);
    join.flags = hello.flags;
    join.rate_bps = static_cast<uint64_t>(paths[i].rate_bps > 0 ? paths[i].rate_bps : p.rate_bps);
    join.rtt_ns = static_cast<uint64_t>((paths[i].rtt_s > 0 ? paths[i].rtt_s : p.rtt_s) * 1e9);
    Handshake joined;
    if (!exchange(fds.fds[i], join, remote[i], deadline, &joined) ||
        joined.type != HandshakeType::kAccept || joined.connection_id != reply.connection_id ||
        joined.path != i) {
      *error = "path " + std::to_string(i) + " (" + local[i].to_string() + " to " +
               paths[i].remote + "): no answer within " +
               std::to_string(params.handshake_timeout_ms) + " ms";
      return ROWAN_ERR_UNREACHABLE;
    }
    configs.push_back(path_config(joined, p));
    data_port.push_back(joined.data_port);
  }
  for (const int fd : fds.fds) ::close(fd);
  fds.fds.clear();
  try {
    std::vector<std::unique_ptr<io::UdpUringIo>> sockets;
    for (size_t i = 0; i < paths.size(); ++i)
      sockets.push_back(
          open_path_socket(bound[i], with_port(remote[i], data_port[i]), p.max_datagram));
    *out = new rowan_channel(p, std::move(sockets), configs, reply.connection_id);
  } catch (const std::system_error& e) {
    *error = e.what();
    return ROWAN_ERR_SYSTEM;
  } catch (const std::bad_alloc&) {
    return ROWAN_ERR_NOMEM;
  } catch (const std::exception& e) {
    *error = e.what();
    return ROWAN_ERR_INVALID;
  }
  // With link security, the channel is ready once every path's key handshake is done.
  rowan_channel* ch = *out;
  const TimePoint key_deadline = clock.now() + Duration::from_ms(params.handshake_timeout_ms);
  while (!ch->secure_ready()) {
    const int rc = clock.now() >= key_deadline ? ROWAN_ERR_PROTOCOL : ch->poll(20);
    if (rc < 0) {
      delete ch;
      *out = nullptr;
      *error = "the key handshake with " + server + " did not complete (wrong keys?)";
      return ROWAN_ERR_PROTOCOL;
    }
  }
  return ROWAN_OK;
}

}  // namespace rowan::api
