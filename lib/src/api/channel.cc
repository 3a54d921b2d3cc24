#include "api/channel.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <stdexcept>
#include <system_error>

#include "codec/bytes.h"

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

rowan_channel::rowan_channel(const api::ChannelParams& p, const rowan::io::UdpEndpoint& bind,
                             const rowan::io::UdpEndpoint& peer, uint64_t connection_id)
    : clock_(own_clock_), params_(p), peer_(peer), id_(connection_id) {
  rowan::io::UdpUringOptions io;
  io.bind = bind;
  io.peer = peer;
  io.max_datagram = p.max_datagram;
  udp_ = std::make_unique<rowan::io::UdpUringIo>(io);
  io_ = udp_.get();
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
    secure_ = std::make_unique<rowan::crypto::SecureIo>(*udp_, so, now);
    io_ = secure_.get();
  }
  init_transport(connection_id);
}

bool rowan_channel::secure_ready() const { return !secure_ || secure_->has_session(clock_.now()); }

rowan_channel::rowan_channel(const api::ChannelParams& p, rowan::io::PacketIo& io,
                             const rowan::Clock& clock, const rowan::io::UdpEndpoint& peer,
                             uint64_t connection_id)
    : clock_(clock), params_(p), peer_(peer), id_(connection_id), io_(&io) {
  init_transport(connection_id);
}

void rowan_channel::init_transport(uint64_t connection_id) {
  rowan::transport::TransportConfig cfg;
  cfg.connection_id = connection_id;
  cfg.link_rate = rowan::BitsPerSec::from_bps(static_cast<uint64_t>(params_.rate_bps));
  cfg.base_rtt = Duration::from_seconds(params_.rtt_s);
  cfg.max_datagram = std::min(params_.max_datagram, io_->max_datagram());
  if (!params_.cc.empty()) cfg.cc = params_.cc;
  const TimePoint now = clock_.now();
  conn_ = std::make_unique<rowan::transport::Connection>(cfg, clock_, now);
  driver_ = std::make_unique<rowan::transport::Driver>(*conn_, *io_, 32, &clock_);
  last_rx_time_ = now;
  last_ping_ = now;
}

rowan_channel::~rowan_channel() = default;

int rowan_channel::local_port() const {
  if (!udp_) return -1;
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (getsockname(udp_->fd(), reinterpret_cast<sockaddr*>(&a), &len) != 0) return -1;
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&a)->sin_port);
  return ntohs(reinterpret_cast<const sockaddr_in6*>(&a)->sin6_port);
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
    if (!udp_) return 0;  // a test's PacketIo: the test advances time itself
    // Sleep until the transport's next timer, the deadline, or a datagram;
    // at most 100 ms so the idle check runs.
    TimePoint wake = std::min(next, deadline);
    wake = std::min(wake, now + Duration::from_ms(100));
    if (wake > now) udp_->wait(wake - now);
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

// ---- Listener ------------------------------------------------------------

rowan_listener::rowan_listener(const std::string& bind, const api::ChannelParams& p)
    : params_(p), bind_(rowan::io::UdpEndpoint::parse(bind)) {
  fd_ = ::socket(bind_.addr.ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "socket");
  if (::bind(fd_, reinterpret_cast<const sockaddr*>(&bind_.addr), bind_.len) != 0) {
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

}  // namespace

int rowan_listener::accept(int timeout_ms, rowan_channel** out) {
  const rowan::MonotonicClock clock;
  const TimePoint deadline =
      timeout_ms < 0 ? TimePoint::infinite() : clock.now() + Duration::from_ms(timeout_ms);
  for (;;) {
    uint8_t buf[api::kHandshakeSize + 1];
    sockaddr_storage from{};
    socklen_t from_len = sizeof from;
    const ssize_t n =
        ::recvfrom(fd_, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &from_len);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return ROWAN_ERR_SYSTEM;
      const int64_t wait = ms_until(deadline, clock.now());
      if (wait == 0) return ROWAN_ERR_TIMEOUT;
      pollfd p{fd_, POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(std::min<int64_t>(wait, 1 << 30)));
      continue;
    }
    api::Handshake h;
    if (!api::decode_handshake(buf, static_cast<size_t>(n), &h) ||
        h.type != api::HandshakeType::kHello)
      continue;
    rowan::io::UdpEndpoint client;
    client.addr = from;
    client.len = from_len;
    const auto key = std::make_pair(client.to_string(), h.nonce);
    if (const auto it = answered_.find(key); it != answered_.end()) {
      send_to(fd_, it->second, from, from_len);  // our ACCEPT was lost
      continue;
    }
    api::ChannelParams p = params_;
    if (((h.flags & api::kHandshakeFlagSecure) != 0) != params_.secure) {
      api::Handshake reject;
      reject.type = api::HandshakeType::kReject;
      reject.nonce = h.nonce;
      reject.flags = params_.secure ? api::kHandshakeFlagSecure : 0;
      send_to(fd_, reject, from, from_len);
      continue;
    }
    if (p.cc.empty()) p.cc = h.cc;
    // The client's BDP basis, so both ends agree on windows and buffers.
    if (h.rate_bps > 0) p.rate_bps = static_cast<double>(h.rate_bps);
    if (h.rtt_ns > 0) p.rtt_s = static_cast<double>(h.rtt_ns) * 1e-9;
    api::Handshake reply;
    reply.nonce = h.nonce;
    reply.rate_bps = static_cast<uint64_t>(p.rate_bps);
    reply.rtt_ns = static_cast<uint64_t>(p.rtt_s * 1e9);
    reply.flags = params_.secure ? api::kHandshakeFlagSecure : 0;
    std::memcpy(reply.cc, h.cc, sizeof reply.cc);
    rowan_channel* ch = nullptr;
    try {
      reply.connection_id = random_u64();
      ch = new rowan_channel(p, with_port(bind_, 0), client, reply.connection_id);
    } catch (const std::system_error&) {
      return ROWAN_ERR_SYSTEM;
    } catch (const std::bad_alloc&) {
      return ROWAN_ERR_NOMEM;
    } catch (const std::exception&) {  // unknown congestion controller or bad parameters
      reply.type = api::HandshakeType::kReject;
      send_to(fd_, reply, from, from_len);
      continue;
    }
    reply.type = api::HandshakeType::kAccept;
    reply.data_port = static_cast<uint16_t>(ch->local_port());
    if (answered_.size() >= 4096) answered_.clear();
    answered_[key] = reply;
    send_to(fd_, reply, from, from_len);
    *out = ch;
    return ROWAN_OK;
  }
}

namespace rowan::api {

int connect_channel(const std::string& server, const ChannelParams& params, bool rtt_given,
                    rowan_channel** out, std::string* error) {
  io::UdpEndpoint srv;
  try {
    srv = io::UdpEndpoint::parse(server);
  } catch (const std::exception& e) {
    *error = e.what();
    return ROWAN_ERR_INVALID;
  }
  const int family = srv.addr.ss_family;
  const int fd = ::socket(family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return ROWAN_ERR_SYSTEM;
  }
  const io::UdpEndpoint any = wildcard(family, 0);
  sockaddr_storage local{};
  socklen_t local_len = sizeof local;
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&any.addr), any.len) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) {
    *error = std::string("bind: ") + std::strerror(errno);
    ::close(fd);
    return ROWAN_ERR_SYSTEM;
  }
  const uint16_t port =
      ntohs(family == AF_INET ? reinterpret_cast<const sockaddr_in*>(&local)->sin_port
                              : reinterpret_cast<const sockaddr_in6*>(&local)->sin6_port);
  Handshake hello;
  hello.type = HandshakeType::kHello;
  hello.nonce = random_u64();
  hello.rate_bps = static_cast<uint64_t>(params.rate_bps);
  hello.rtt_ns = rtt_given ? static_cast<uint64_t>(params.rtt_s * 1e9) : 0;
  hello.flags = params.secure ? kHandshakeFlagSecure : 0;
  std::strncpy(hello.cc, params.cc.c_str(), sizeof hello.cc - 1);

  const MonotonicClock clock;
  const TimePoint deadline = clock.now() + Duration::from_ms(params.handshake_timeout_ms);
  Duration interval = Duration::from_ms(200);
  Handshake reply;
  bool answered = false;
  while (!answered) {
    const TimePoint sent_at = clock.now();
    if (sent_at >= deadline) break;
    send_to(fd, hello, srv.addr, srv.len);
    const TimePoint retry = std::min(sent_at + interval, deadline);
    interval = std::min(interval + interval, Duration::from_ms(1000));
    while (!answered) {
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
      if (!same_host(from, srv.addr) || !decode_handshake(buf, static_cast<size_t>(n), &reply) ||
          reply.nonce != hello.nonce || reply.type == HandshakeType::kHello)
        continue;
      answered = true;
    }
  }
  ::close(fd);
  if (!answered) {
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
  // The server's choice of rate and RTT (its default RTT unless we gave one).
  ChannelParams p = params;
  if (reply.rate_bps > 0) p.rate_bps = static_cast<double>(reply.rate_bps);
  if (reply.rtt_ns > 0) p.rtt_s = static_cast<double>(reply.rtt_ns) * 1e-9;
  try {
    *out = new rowan_channel(p, wildcard(family, port), with_port(srv, reply.data_port),
                             reply.connection_id);
  } catch (const std::system_error& e) {
    *error = e.what();
    return ROWAN_ERR_SYSTEM;
  } catch (const std::bad_alloc&) {
    return ROWAN_ERR_NOMEM;
  } catch (const std::exception& e) {
    *error = e.what();
    return ROWAN_ERR_INVALID;
  }
  // With link security, the channel is ready once the key handshake is done.
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
