#include "api/telemetry.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <memory>
#include <stdexcept>

#include "api/qp_attrs.h"
#include "api/status.h"

namespace rowan::api {
namespace {

using Json = nlohmann::ordered_json;

void copy_text(char* dst, size_t cap, const std::string& s) {
  const size_t n = std::min(cap - 1, s.size());
  std::memcpy(dst, s.data(), n);
  dst[n] = '\0';
}

double num(const Json& o, const char* key) {
  const auto it = o.find(key);
  if (it == o.end() || !it->is_number()) return 0;
  return it->get<double>();
}

uint64_t u64(const Json& o, const char* key) {
  const auto it = o.find(key);
  if (it == o.end() || !it->is_number()) return 0;
  if (it->is_number_unsigned()) return it->get<uint64_t>();
  const double d = it->get<double>();
  return d > 0 ? static_cast<uint64_t>(d) : 0;
}

std::string text(const Json& o, const char* key) {
  const auto it = o.find(key);
  if (it == o.end() || !it->is_string()) return {};
  return it->get<std::string>();
}

const Json& rows(const Json& reply, const char* key) {
  if (reply.is_array()) return reply;
  if (reply.is_object()) {
    const auto it = reply.find(key);
    if (it != reply.end() && it->is_array()) return *it;
  }
  throw std::runtime_error(std::string("the daemon's ") + key + " reply is not an array");
}

rowan_peer_state parse_state(const std::string& s) {
  if (s == "up") return ROWAN_PEER_UP;
  if (s == "waiting") return ROWAN_PEER_WAITING;
  if (s == "down") return ROWAN_PEER_DOWN;
  return ROWAN_PEER_UNKNOWN;
}

bool parse_address(const std::string& text, int* family, uint8_t bytes[16]) {
  if (inet_pton(AF_INET, text.c_str(), bytes) == 1) {
    *family = AF_INET;
    return true;
  }
  if (inet_pton(AF_INET6, text.c_str(), bytes) == 1) {
    *family = AF_INET6;
    return true;
  }
  return false;
}

}  // namespace

double monotonic_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

bool prefix_contains(const std::string& prefix, const std::string& address, int* prefix_len) {
  const auto slash = prefix.find('/');
  const std::string net = prefix.substr(0, slash);
  int f1 = 0;
  int f2 = 0;
  uint8_t a[16] = {};
  uint8_t b[16] = {};
  if (!parse_address(net, &f1, a) || !parse_address(address, &f2, b) || f1 != f2) return false;
  const int max_len = f1 == AF_INET ? 32 : 128;
  int len = max_len;
  if (slash != std::string::npos) {
    char* end = nullptr;
    const long l = std::strtol(prefix.c_str() + slash + 1, &end, 10);
    if (*end != '\0' || l < 0 || l > max_len) return false;
    len = static_cast<int>(l);
  }
  for (int bit = 0; bit < len; ++bit) {
    const int byte = bit / 8;
    const int mask = 0x80 >> (bit % 8);
    if ((a[byte] & mask) != (b[byte] & mask)) return false;
  }
  if (prefix_len != nullptr) *prefix_len = len;
  return true;
}

Snapshot build_snapshot(const Json& peers, const Json& links, const Json& status,
                        const Snapshot* previous, double now_s) {
  Snapshot s;
  s.time_s = now_s;
  if (status.is_object()) {
    const auto it = status.find("routes");
    if (it != status.end() && it->is_array()) {
      for (const Json& r : *it) {
        if (!r.is_object()) continue;
        rowan_route_info ri{};
        copy_text(ri.prefix, sizeof ri.prefix, text(r, "prefix"));
        copy_text(ri.peer, sizeof ri.peer, text(r, "peer"));
        ri.mode = parse_mode(text(r, "mode").c_str());
        s.routes.push_back(ri);
      }
    }
  }
  const Json& link_rows = rows(links, "links");
  for (const Json& p : rows(peers, "peers")) {
    if (!p.is_object()) continue;
    rowan_path_info pi{};
    const std::string name = text(p, "name");
    copy_text(pi.peer, sizeof pi.peer, name);
    copy_text(pi.endpoint, sizeof pi.endpoint, text(p, "endpoint"));
    copy_text(pi.cc, sizeof pi.cc, text(p, "cc"));
    pi.state = parse_state(text(p, "state"));
    pi.min_rtt_s = num(p, "min_rtt_s");
    pi.srtt_s = num(p, "srtt_s");
    pi.rttvar_s = num(p, "rttvar_s");
    pi.pacing_rate_bps = num(p, "pacing_rate_bps");
    pi.cwnd_bytes = u64(p, "cwnd_bytes");
    pi.bytes_in_flight = u64(p, "bytes_in_flight");
    pi.packets_sent = u64(p, "packets_sent");
    pi.lost_packets = u64(p, "lost_packets");
    pi.retransmitted_packets = u64(p, "retransmitted_packets");
    pi.delivered_bytes = u64(p, "delivered_bytes");
    const std::string link = text(p, "link");
    double link_rtt = 0;
    for (const Json& l : link_rows) {
      if (l.is_object() && (text(l, "name") == link || (link.empty() && text(l, "peer") == name))) {
        pi.link_rate_bps = num(l, "rate_bps");
        link_rtt = num(l, "rtt_s");
        pi.link_rtt_s = link_rtt;
        break;
      }
    }
    for (const rowan_route_info& r : s.routes) {
      if (name == r.peer) {
        pi.mode = r.mode;
        break;
      }
    }

    // Interval rates and the delivery-rate window against the previous snapshot.
    std::vector<double> samples;
    const rowan_path_info* old = nullptr;
    if (previous != nullptr) {
      for (size_t i = 0; i < previous->peers.size(); ++i) {
        if (name == previous->peers[i].peer) {
          old = &previous->peers[i];
          samples = previous->rate_samples[i];
          break;
        }
      }
    }
    uint64_t sent = pi.packets_sent;
    uint64_t lost = pi.lost_packets;
    uint64_t retx = pi.retransmitted_packets;
    if (old != nullptr && pi.packets_sent >= old->packets_sent) {
      sent -= old->packets_sent;
      lost -= std::min(lost, old->lost_packets);
      retx -= std::min(retx, old->retransmitted_packets);
      const double dt = now_s - previous->time_s;
      if (dt > 0 && pi.delivered_bytes >= old->delivered_bytes) {
        samples.push_back(static_cast<double>(pi.delivered_bytes - old->delivered_bytes) * 8 / dt);
        if (samples.size() > kBtlbwWindow) samples.erase(samples.begin());
      }
    }
    pi.loss_rate = sent > 0 ? static_cast<double>(lost) / static_cast<double>(sent) : 0;
    pi.retransmit_rate = sent > 0 ? static_cast<double>(retx) / static_cast<double>(sent) : 0;
    const double measured = samples.empty() ? 0 : *std::max_element(samples.begin(), samples.end());
    pi.btlbw_bps = measured > 0 ? measured : pi.link_rate_bps;
    if (pi.link_rate_bps > 0) pi.btlbw_bps = std::min(pi.btlbw_bps, pi.link_rate_bps);
    const double rtt = pi.min_rtt_s > 0 ? pi.min_rtt_s : link_rtt;
    pi.bdp_bytes = pi.btlbw_bps > 0 && rtt > 0 ? static_cast<uint64_t>(pi.btlbw_bps / 8 * rtt)
                                               : u64(p, "bdp_bytes");
    s.peers.push_back(pi);
    s.rate_samples.push_back(std::move(samples));
  }
  return s;
}

const rowan_path_info* find_path(const Snapshot& s, const std::string& peer_or_address) {
  for (const rowan_path_info& p : s.peers) {
    if (peer_or_address == p.peer) return &p;
  }
  int best = -1;
  const char* best_peer = nullptr;
  for (const rowan_route_info& r : s.routes) {
    int len = 0;
    if (prefix_contains(r.prefix, peer_or_address, &len) && len > best) {
      best = len;
      best_peer = r.peer;
    }
  }
  if (best_peer == nullptr) return nullptr;
  for (const rowan_path_info& p : s.peers) {
    if (std::strcmp(p.peer, best_peer) == 0) return &p;
  }
  return nullptr;
}

int qp_path_for(const Snapshot& s, const std::string& peer_or_address, uint32_t message_bytes,
                int uses_read_or_atomic, rowan_qp_path* out, std::string* error) {
  const rowan_path_info* p = find_path(s, peer_or_address);
  if (p == nullptr) {
    *error = "no peer or route for " + peer_or_address;
    return ROWAN_ERR_NOT_FOUND;
  }
  *out = rowan_qp_path{};
  // Measured RTT when there is one, else the link's configured RTT.
  out->rtt_s = p->min_rtt_s > 0 ? p->min_rtt_s : (p->srtt_s > 0 ? p->srtt_s : p->link_rtt_s);
  out->rate_bps = p->btlbw_bps > 0 ? p->btlbw_bps : p->link_rate_bps;
  out->mode = p->mode;
  out->loss_rate = p->mode == ROWAN_MODE_PASSTHROUGH ? 0.0 : p->loss_rate;
  out->message_bytes = message_bytes;
  out->uses_read_or_atomic = uses_read_or_atomic;
  if (!(out->rtt_s > 0) || !(out->rate_bps > 0)) {
    *error = std::string("no RTT or rate known for peer ") + p->peer;
    return ROWAN_ERR_NOT_FOUND;
  }
  return ROWAN_OK;
}

int control_query(const std::string& socket_path, const std::string& cmd, int timeout_ms,
                  Json* result, std::string* error) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 1));
  auto remaining = [&] {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    return left > 0 ? static_cast<int>(left) : 0;
  };
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof addr.sun_path) {
    *error = "control socket path too long: " + socket_path;
    return ROWAN_ERR_INVALID;
  }
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return ROWAN_ERR_SYSTEM;
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    *error = "cannot connect to " + socket_path + ": " + std::strerror(errno);
    return ROWAN_ERR_UNREACHABLE;
  }
  const std::string req = Json{{"cmd", cmd}}.dump() + "\n";
  size_t sent = 0;
  while (sent < req.size()) {
    const ssize_t n = ::send(fd, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = "cannot send to " + socket_path + ": " + std::strerror(errno);
      return ROWAN_ERR_UNREACHABLE;
    }
    sent += static_cast<size_t>(n);
  }
  std::string in;
  char buf[65536];
  while (in.find('\n') == std::string::npos) {
    pollfd p{fd, POLLIN, 0};
    const int rc = ::poll(&p, 1, remaining());
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) {
      *error = "no reply from " + socket_path + " within " + std::to_string(timeout_ms) + " ms";
      return rc == 0 ? ROWAN_ERR_UNREACHABLE : ROWAN_ERR_SYSTEM;
    }
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *error = socket_path + " closed the connection without a reply";
      return ROWAN_ERR_UNREACHABLE;
    }
    in.append(buf, static_cast<size_t>(n));
  }
  in.resize(in.find('\n'));
  Json reply = Json::parse(in, nullptr, false);
  if (reply.is_discarded() || !reply.is_object()) {
    *error = "malformed reply from " + socket_path;
    return ROWAN_ERR_PROTOCOL;
  }
  if (!reply.value("ok", false)) {
    *error = "rowand: " + reply.value("error", std::string("error"));
    return ROWAN_ERR_DAEMON;
  }
  *result = reply.value("result", Json::object());
  return ROWAN_OK;
}

// ---- The telemetry client ---------------------------------------------------

namespace {

// Field by field (the structs have padding, memcmp would compare it too).
bool same_path(const rowan_path_info& a, const rowan_path_info& b) {
  return std::strcmp(a.peer, b.peer) == 0 && std::strcmp(a.endpoint, b.endpoint) == 0 &&
         std::strcmp(a.cc, b.cc) == 0 && a.state == b.state && a.mode == b.mode &&
         a.min_rtt_s == b.min_rtt_s && a.srtt_s == b.srtt_s && a.rttvar_s == b.rttvar_s &&
         a.btlbw_bps == b.btlbw_bps && a.link_rate_bps == b.link_rate_bps &&
         a.link_rtt_s == b.link_rtt_s && a.pacing_rate_bps == b.pacing_rate_bps &&
         a.bdp_bytes == b.bdp_bytes && a.cwnd_bytes == b.cwnd_bytes &&
         a.bytes_in_flight == b.bytes_in_flight && a.loss_rate == b.loss_rate &&
         a.retransmit_rate == b.retransmit_rate && a.packets_sent == b.packets_sent &&
         a.lost_packets == b.lost_packets && a.retransmitted_packets == b.retransmitted_packets &&
         a.delivered_bytes == b.delivered_bytes;
}

}  // namespace

int telemetry_refresh(rowan_telemetry* t, int timeout_ms, bool* changed) {
  using Json = nlohmann::ordered_json;
  Json peers;
  Json links;
  Json status;
  std::string err;
  const int timeout = timeout_ms > 0 ? timeout_ms : 5000;
  for (auto [cmd, dst] :
       {std::pair<const char*, Json*>{"peers", &peers}, {"links", &links}, {"status", &status}}) {
    const int rc = control_query(t->path, cmd, timeout, dst, &err);
    if (rc != ROWAN_OK) return fail(rc, err);
  }
  std::lock_guard lock(t->mu);
  Snapshot next;
  try {
    next = build_snapshot(peers, links, status, t->have_snapshot ? &t->snap : nullptr,
                          monotonic_seconds());
  } catch (const std::runtime_error& e) {
    return fail(ROWAN_ERR_PROTOCOL, e.what());
  }
  bool diff = !t->have_snapshot || next.peers.size() != t->snap.peers.size() ||
              next.routes.size() != t->snap.routes.size();
  for (size_t i = 0; !diff && i < next.peers.size(); ++i)
    diff = !same_path(next.peers[i], t->snap.peers[i]);
  for (size_t i = 0; !diff && i < next.routes.size(); ++i) {
    const rowan_route_info& a = next.routes[i];
    const rowan_route_info& b = t->snap.routes[i];
    diff = std::strcmp(a.prefix, b.prefix) != 0 || std::strcmp(a.peer, b.peer) != 0 ||
           a.mode != b.mode;
  }
  t->snap = std::move(next);
  t->have_snapshot = true;
  *changed = diff;
  return ok();
}

namespace {

void notify(rowan_telemetry* t) {
  t->updates.fetch_add(1, std::memory_order_relaxed);
  const uint64_t one = 1;
  (void)!::write(t->event_fd, &one, sizeof one);
}

}  // namespace

int telemetry_open(std::string path, rowan_telemetry** out) {
  auto t = std::make_unique<rowan_telemetry>();
  t->path = std::move(path);
  t->event_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (t->event_fd < 0) return fail(ROWAN_ERR_SYSTEM, std::string("eventfd: ") + strerror(errno));
  *out = t.release();
  return ok();
}

void telemetry_close(rowan_telemetry* t) {
  telemetry_unsubscribe(t);
  if (t->event_fd >= 0) ::close(t->event_fd);
  delete t;
}

int telemetry_subscribe(rowan_telemetry* t, uint32_t interval_ms, rowan_telemetry_cb cb,
                        void* user) {
  t->stop = false;
  t->subscribed = true;
  t->thread = std::thread([t, interval_ms, cb, user] {
    std::unique_lock lock(t->wait_mu);
    while (!t->stop) {
      lock.unlock();
      bool changed = false;
      const int rc = telemetry_refresh(t, static_cast<int>(std::max(interval_ms, 1000u)), &changed);
      if (rc != ROWAN_OK || changed) {
        notify(t);
        if (cb != nullptr) cb(t, rc, user);
      }
      lock.lock();
      t->wake.wait_for(lock, std::chrono::milliseconds(interval_ms), [t] { return t->stop; });
    }
  });
  return ok();
}

void telemetry_unsubscribe(rowan_telemetry* t) {
  if (!t->subscribed) return;
  {
    std::lock_guard lock(t->wait_mu);
    t->stop = true;
  }
  t->wake.notify_all();
  if (t->thread.joinable()) t->thread.join();
  t->subscribed = false;
}

uint64_t telemetry_consume(rowan_telemetry* t) {
  uint64_t v = 0;
  (void)!::read(t->event_fd, &v, sizeof v);
  return v;
}

}  // namespace rowan::api
