#include "api/telemetry.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <stdexcept>

#include "api/qp_attrs.h"

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

}  // namespace rowan::api
