// librowan for C++: header-only RAII wrappers over the C API in rowan.h.
// Errors become rowan::Error exceptions here, in the caller's code; nothing
// C++ crosses the library boundary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "rowan.h"

namespace rowan {

/// A failed librowan call: status() is the rowan_status, what() its detail.
class Error : public std::runtime_error {
 public:
  Error(int status, const std::string& what) : std::runtime_error(what), status_(status) {}
  int status() const noexcept { return status_; }

 private:
  int status_;
};

/// Throws Error for a negative status; returns non-negative ones.
inline int check(int status, const char* what) {
  if (status < 0) {
    std::string msg = std::string(what) + ": " + rowan_strerror(status);
    const char* detail = rowan_last_error();
    if (detail != nullptr && *detail != '\0') msg += std::string(" (") + detail + ")";
    throw Error(status, msg);
  }
  return status;
}

/// Path telemetry of the local rowand (rowan_telemetry_*).
class Telemetry {
 public:
  /// `socket_path` empty: $ROWAN_CONTROL_SOCKET or /run/rowan/control.sock.
  explicit Telemetry(const std::string& socket_path = {}) {
    rowan_telemetry* t = nullptr;
    check(rowan_telemetry_open(socket_path.empty() ? nullptr : socket_path.c_str(), &t),
          "rowan_telemetry_open");
    t_.reset(t);
  }
  static Telemetry for_site(const std::string& site) {
    rowan_telemetry* t = nullptr;
    check(rowan_telemetry_open_site(site.c_str(), &t), "rowan_telemetry_open_site");
    return Telemetry(t);
  }

  void refresh(int timeout_ms = 5000) {
    check(rowan_telemetry_refresh(t_.get(), timeout_ms), "rowan_telemetry_refresh");
  }
  std::vector<rowan_path_info> peers() const {
    std::vector<rowan_path_info> out(rowan_telemetry_peer_count(t_.get()));
    for (size_t i = 0; i < out.size(); ++i)
      check(rowan_telemetry_peer(t_.get(), i, &out[i]), "rowan_telemetry_peer");
    return out;
  }
  std::vector<rowan_route_info> routes() const {
    std::vector<rowan_route_info> out(rowan_telemetry_route_count(t_.get()));
    for (size_t i = 0; i < out.size(); ++i)
      check(rowan_telemetry_route(t_.get(), i, &out[i]), "rowan_telemetry_route");
    return out;
  }
  /// The path toward a remote host address (route lookup) or a peer name.
  rowan_path_info path_to(const std::string& peer_or_address) const {
    rowan_path_info p{};
    if (rowan_telemetry_find_peer(t_.get(), peer_or_address.c_str(), &p) == ROWAN_OK) return p;
    check(rowan_telemetry_path_to(t_.get(), peer_or_address.c_str(), &p),
          "rowan_telemetry_path_to");
    return p;
  }
  rowan_qp_attrs qp_attrs(const std::string& peer_or_address, uint32_t message_bytes = 0,
                          bool uses_read_or_atomic = false) const {
    rowan_qp_attrs a{};
    check(rowan_qp_attrs_for(t_.get(), peer_or_address.c_str(), message_bytes,
                             uses_read_or_atomic ? 1 : 0, &a),
          "rowan_qp_attrs_for");
    return a;
  }

  /// Calls `fn(status)` on a background thread after each change.
  void subscribe(uint32_t interval_ms, std::function<void(int)> fn = {}) {
    fn_ = std::make_unique<std::function<void(int)>>(std::move(fn));
    check(rowan_telemetry_subscribe(t_.get(), interval_ms, &Telemetry::trampoline, fn_.get()),
          "rowan_telemetry_subscribe");
  }
  void unsubscribe() { rowan_telemetry_unsubscribe(t_.get()); }
  int fd() const { return rowan_telemetry_fd(t_.get()); }
  uint64_t consume() { return rowan_telemetry_consume(t_.get()); }
  rowan_telemetry* get() const { return t_.get(); }

 private:
  explicit Telemetry(rowan_telemetry* t) : t_(t) {}
  static void trampoline(rowan_telemetry*, int status, void* user) {
    auto* fn = static_cast<std::function<void(int)>*>(user);
    if (*fn) (*fn)(status);
  }
  struct Closer {
    void operator()(rowan_telemetry* t) const { rowan_telemetry_close(t); }
  };
  // fn_ outlives the subscription thread: t_ (declared after) closes first.
  std::unique_ptr<std::function<void(int)>> fn_;
  std::unique_ptr<rowan_telemetry, Closer> t_;
};

/// Pure computation of WAN-sized RC QP attributes.
inline rowan_qp_attrs compute_qp_attrs(const rowan_qp_path& path) {
  rowan_qp_attrs a{};
  check(rowan_qp_attrs_compute(&path, &a), "rowan_qp_attrs_compute");
  return a;
}

/// Options with defaults; see rowan_channel_options.
inline rowan_channel_options channel_options() {
  rowan_channel_options o;
  rowan_channel_options_init(&o);
  return o;
}

/// A message channel (rowan_channel_*). Callbacks run on the thread that
/// calls poll()/flush(); buffers stay the caller's until their callback.
class Channel {
 public:
  using SendDone = std::function<void(const void* buf, size_t len, int status)>;
  using RecvDone = std::function<void(void* buf, size_t len, int status)>;

  static Channel connect(const std::string& server,
                         const rowan_channel_options& o = channel_options()) {
    rowan_channel* ch = nullptr;
    check(rowan_connect(server.c_str(), &o, &ch), "rowan_connect");
    return Channel(ch);
  }
  /// One path: this end's address ("" for any) and the server's listening address there.
  struct Path {
    std::string local;
    std::string remote;
    double rate_bps = 0;  ///< 0: the options'
    double rtt_s = 0;     ///< 0: the options'
  };
  /// A channel over several paths (rowan_connect_paths).
  static Channel connect(const std::vector<Path>& paths,
                         const rowan_channel_options& o = channel_options()) {
    std::vector<rowan_channel_path> c;
    for (const Path& p : paths)
      c.push_back(rowan_channel_path{p.local.c_str(), p.remote.c_str(), p.rate_bps, p.rtt_s});
    rowan_channel* ch = nullptr;
    check(rowan_connect_paths(c.data(), c.size(), &o, &ch), "rowan_connect_paths");
    return Channel(ch);
  }
  explicit Channel(rowan_channel* ch) : ch_(ch) {}

  /// Queues a message; false when the queue is full (poll, then retry).
  bool send(const void* buf, size_t len, SendDone done = {}) {
    auto* ctx = new SendDone(std::move(done));
    const int rc = rowan_channel_send(ch_.get(), buf, len, &Channel::send_done, ctx);
    if (rc == ROWAN_ERR_AGAIN) {
      delete ctx;
      return false;
    }
    if (rc < 0) delete ctx;
    check(rc, "rowan_channel_send");
    return true;
  }
  void post_recv(void* buf, size_t capacity, RecvDone done) {
    auto* ctx = new RecvDone(std::move(done));
    const int rc = rowan_channel_post_recv(ch_.get(), buf, capacity, &Channel::recv_done, ctx);
    if (rc < 0) delete ctx;
    check(rc, "rowan_channel_post_recv");
  }
  /// Callbacks run (>= 0); throws on failure, returns -1 once the peer closed.
  int poll(int timeout_ms) {
    const int rc = rowan_channel_poll(ch_.get(), timeout_ms);
    if (rc == ROWAN_ERR_CLOSED) return -1;
    return check(rc, "rowan_channel_poll");
  }
  void flush(int timeout_ms = -1) {
    check(rowan_channel_flush(ch_.get(), timeout_ms), "rowan_channel_flush");
  }
  rowan_channel_stats stats() const {
    rowan_channel_stats s{};
    check(rowan_channel_stats_get(ch_.get(), &s), "rowan_channel_stats_get");
    return s;
  }
  uint64_t id() const { return rowan_channel_id(ch_.get()); }
  size_t path_count() const { return rowan_channel_path_count(ch_.get()); }
  rowan_channel_path_stats path_stats(size_t index) const {
    rowan_channel_path_stats s{};
    check(rowan_channel_path_stats_get(ch_.get(), index, &s), "rowan_channel_path_stats_get");
    return s;
  }
  std::string peer() const {
    char buf[80];
    check(rowan_channel_peer(ch_.get(), buf, sizeof buf), "rowan_channel_peer");
    return buf;
  }
  /// Sends a close and frees the channel (pending callbacks get ROWAN_ERR_CLOSED).
  void close() { ch_.reset(); }
  rowan_channel* get() const { return ch_.get(); }

 private:
  static void send_done(rowan_channel*, void* user, const void* buf, size_t len, int status) {
    std::unique_ptr<SendDone> fn(static_cast<SendDone*>(user));
    if (*fn) (*fn)(buf, len, status);
  }
  static void recv_done(rowan_channel*, void* user, void* buf, size_t len, int status) {
    std::unique_ptr<RecvDone> fn(static_cast<RecvDone*>(user));
    if (*fn) (*fn)(buf, len, status);
  }
  struct Closer {
    void operator()(rowan_channel* ch) const { rowan_channel_close(ch); }
  };
  std::unique_ptr<rowan_channel, Closer> ch_;
};

/// Server side: accepts channels (rowan_listen/rowan_accept).
class Listener {
 public:
  explicit Listener(const std::string& bind, const rowan_channel_options& o = channel_options()) {
    rowan_listener* l = nullptr;
    check(rowan_listen(bind.c_str(), &o, &l), "rowan_listen");
    l_.reset(l);
  }
  /// Waits up to timeout_ms (< 0: forever); false on timeout.
  bool accept(Channel* out, int timeout_ms = -1) {
    rowan_channel* ch = nullptr;
    const int rc = rowan_accept(l_.get(), timeout_ms, &ch);
    if (rc == ROWAN_ERR_TIMEOUT) return false;
    check(rc, "rowan_accept");
    *out = Channel(ch);
    return true;
  }
  int port() const { return rowan_listener_port(l_.get()); }
  int fd() const { return rowan_listener_fd(l_.get()); }

 private:
  struct Closer {
    void operator()(rowan_listener* l) const { rowan_listener_close(l); }
  };
  std::unique_ptr<rowan_listener, Closer> l_;
};

}  // namespace rowan
