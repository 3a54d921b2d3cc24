// The C API: every entry point catches everything (nothing crosses the .so
// boundary as an exception) and maps failures to rowan_status codes, with the
// detail in a thread-local string for rowan_last_error().
#include "../../include/rowan/rowan.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <system_error>
#include <vector>

#include "api/channel.h"
#include "api/qp_attrs.h"
#include "api/status.h"
#include "api/telemetry.h"
#include "crypto/keys.h"

namespace {

using rowan::api::fail;
using rowan::api::ok;

// Runs `f` and turns any escaping exception into a status.
template <typename F>
int guarded(F&& f) noexcept {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return fail(ROWAN_ERR_NOMEM, "out of memory");
  } catch (const std::system_error& e) {
    return fail(ROWAN_ERR_SYSTEM, e.what());
  } catch (const std::invalid_argument& e) {
    return fail(ROWAN_ERR_INVALID, e.what());
  } catch (const std::exception& e) {
    return fail(ROWAN_ERR_INTERNAL, e.what());
  } catch (...) {
    return fail(ROWAN_ERR_INTERNAL, "unknown exception");
  }
}

}  // namespace

namespace {

// The channel parameters of a secure listener/connection.
rowan::api::ChannelParams secure_params(const rowan_channel_options* o,
                                        const rowan_channel_keys* keys) {
  rowan::api::ChannelParams p = rowan::api::channel_params(o);
  p.secure = true;
  std::memcpy(p.private_key.data(), keys->private_key, ROWAN_KEY_BYTES);
  std::memcpy(p.peer_public.data(), keys->peer_public_key, ROWAN_KEY_BYTES);
  return p;
}

}  // namespace

extern "C" {

const char* rowan_strerror(int status) {
  switch (status) {
    case ROWAN_OK:
      return "success";
    case ROWAN_ERR_INVALID:
      return "invalid argument";
    case ROWAN_ERR_NOMEM:
      return "out of memory";
    case ROWAN_ERR_UNREACHABLE:
      return "unreachable (no daemon or peer answered)";
    case ROWAN_ERR_TIMEOUT:
      return "timed out";
    case ROWAN_ERR_PROTOCOL:
      return "protocol error";
    case ROWAN_ERR_NOT_FOUND:
      return "not found";
    case ROWAN_ERR_AGAIN:
      return "try again (queue full)";
    case ROWAN_ERR_CLOSED:
      return "channel closed";
    case ROWAN_ERR_MSGSIZE:
      return "message too large";
    case ROWAN_ERR_SYSTEM:
      return "system error";
    case ROWAN_ERR_UNSUPPORTED:
      return "not supported";
    case ROWAN_ERR_DAEMON:
      return "rowand returned an error";
    case ROWAN_ERR_INTERNAL:
      return "internal error";
    default:
      return "unknown status";
  }
}

const char* rowan_last_error(void) { return rowan::api::t_last_error.c_str(); }

const char* rowan_version(void) { return ROWAN_VERSION_STRING; }

// ---- Telemetry --------------------------------------------------------------

int rowan_telemetry_open(const char* socket_path, rowan_telemetry** out) {
  if (out == nullptr) return fail(ROWAN_ERR_INVALID, "out is NULL");
  return guarded([&] {
    std::string path;
    if (socket_path != nullptr && *socket_path != '\0') {
      path = socket_path;
    } else if (const char* env = std::getenv("ROWAN_CONTROL_SOCKET"); env != nullptr && *env) {
      path = env;
    } else {
      path = "/run/rowan/control.sock";
    }
    return rowan::api::telemetry_open(std::move(path), out);
  });
}

int rowan_telemetry_open_site(const char* site, rowan_telemetry** out) {
  if (out == nullptr || site == nullptr || *site == '\0' || std::strchr(site, '/') != nullptr)
    return fail(ROWAN_ERR_INVALID, "bad site name");
  return guarded([&] {
    return rowan::api::telemetry_open(std::string("/run/rowan/") + site + "/control.sock", out);
  });
}

void rowan_telemetry_close(rowan_telemetry* t) {
  if (t == nullptr) return;
  rowan::api::telemetry_close(t);
}

int rowan_telemetry_refresh(rowan_telemetry* t, int timeout_ms) {
  if (t == nullptr) return fail(ROWAN_ERR_INVALID, "telemetry handle is NULL");
  return guarded([&] {
    bool changed = false;
    return rowan::api::telemetry_refresh(t, timeout_ms, &changed);
  });
}

size_t rowan_telemetry_peer_count(const rowan_telemetry* t) {
  if (t == nullptr) return 0;
  std::lock_guard lock(t->mu);
  return t->snap.peers.size();
}

int rowan_telemetry_peer(const rowan_telemetry* t, size_t index, rowan_path_info* out) {
  if (t == nullptr || out == nullptr) return fail(ROWAN_ERR_INVALID, "NULL argument");
  std::lock_guard lock(t->mu);
  if (index >= t->snap.peers.size()) return fail(ROWAN_ERR_NOT_FOUND, "no such peer index");
  *out = t->snap.peers[index];
  return ok();
}

int rowan_telemetry_find_peer(const rowan_telemetry* t, const char* peer, rowan_path_info* out) {
  if (t == nullptr || peer == nullptr || out == nullptr)
    return fail(ROWAN_ERR_INVALID, "NULL argument");
  std::lock_guard lock(t->mu);
  for (const rowan_path_info& p : t->snap.peers) {
    if (std::strcmp(p.peer, peer) == 0) {
      *out = p;
      return ok();
    }
  }
  return fail(ROWAN_ERR_NOT_FOUND, std::string("no peer named ") + peer);
}

int rowan_telemetry_path_to(const rowan_telemetry* t, const char* address, rowan_path_info* out) {
  if (t == nullptr || address == nullptr || out == nullptr)
    return fail(ROWAN_ERR_INVALID, "NULL argument");
  return guarded([&] {
    std::lock_guard lock(t->mu);
    const rowan_path_info* p = rowan::api::find_path(t->snap, address);
    if (p == nullptr) return fail(ROWAN_ERR_NOT_FOUND, std::string("no route to ") + address);
    *out = *p;
    return ok();
  });
}

size_t rowan_telemetry_route_count(const rowan_telemetry* t) {
  if (t == nullptr) return 0;
  std::lock_guard lock(t->mu);
  return t->snap.routes.size();
}

int rowan_telemetry_route(const rowan_telemetry* t, size_t index, rowan_route_info* out) {
  if (t == nullptr || out == nullptr) return fail(ROWAN_ERR_INVALID, "NULL argument");
  std::lock_guard lock(t->mu);
  if (index >= t->snap.routes.size()) return fail(ROWAN_ERR_NOT_FOUND, "no such route index");
  *out = t->snap.routes[index];
  return ok();
}

double rowan_telemetry_time(const rowan_telemetry* t) {
  if (t == nullptr) return 0;
  std::lock_guard lock(t->mu);
  return t->have_snapshot ? t->snap.time_s : 0;
}

int rowan_telemetry_subscribe(rowan_telemetry* t, uint32_t interval_ms, rowan_telemetry_cb cb,
                              void* user) {
  if (t == nullptr || interval_ms < 10) return fail(ROWAN_ERR_INVALID, "interval_ms < 10");
  if (t->subscribed) return fail(ROWAN_ERR_INVALID, "already subscribed");
  return guarded([&] { return rowan::api::telemetry_subscribe(t, interval_ms, cb, user); });
}

void rowan_telemetry_unsubscribe(rowan_telemetry* t) {
  if (t == nullptr) return;
  rowan::api::telemetry_unsubscribe(t);
}

int rowan_telemetry_fd(const rowan_telemetry* t) { return t == nullptr ? -1 : t->event_fd; }

uint64_t rowan_telemetry_consume(rowan_telemetry* t) {
  if (t == nullptr) return 0;
  return rowan::api::telemetry_consume(t);
}

// ---- QP attributes ----------------------------------------------------------

int rowan_qp_attrs_compute(const rowan_qp_path* path, rowan_qp_attrs* out) {
  if (path == nullptr || out == nullptr) return fail(ROWAN_ERR_INVALID, "NULL argument");
  const int rc = rowan::api::compute_qp_attrs(*path, *out);
  if (rc != ROWAN_OK) return fail(rc, "the path needs rtt_s > 0, rate_bps > 0, loss 0..1");
  return ok();
}

int rowan_qp_attrs_for(const rowan_telemetry* t, const char* peer_or_address,
                       uint32_t message_bytes, int uses_read_or_atomic, rowan_qp_attrs* out) {
  if (t == nullptr || peer_or_address == nullptr || out == nullptr)
    return fail(ROWAN_ERR_INVALID, "NULL argument");
  return guarded([&] {
    rowan_qp_path path{};
    std::string err;
    int rc = ROWAN_OK;
    {
      std::lock_guard lock(t->mu);
      rc = rowan::api::qp_path_for(t->snap, peer_or_address, message_bytes, uses_read_or_atomic,
                                   &path, &err);
    }
    if (rc != ROWAN_OK) return fail(rc, err);
    return rowan_qp_attrs_compute(&path, out);
  });
}

// ---- Channel ----------------------------------------------------------------

void rowan_channel_options_init(rowan_channel_options* o) {
  if (o != nullptr) *o = rowan_channel_options{};
}

int rowan_listen(const char* bind_address, const rowan_channel_options* o, rowan_listener** out) {
  if (bind_address == nullptr || out == nullptr) return fail(ROWAN_ERR_INVALID, "NULL argument");
  return guarded([&] {
    *out = new rowan_listener(bind_address, rowan::api::channel_params(o));
    return ok();
  });
}

int rowan_accept(rowan_listener* l, int timeout_ms, rowan_channel** out) {
  if (l == nullptr || out == nullptr) return fail(ROWAN_ERR_INVALID, "NULL argument");
  return guarded([&] {
    const int rc = l->accept(timeout_ms, out);
    if (rc == ROWAN_ERR_SYSTEM) return fail(rc, std::string("accept: ") + strerror(errno));
    if (rc != ROWAN_OK) return fail(rc, "no client within the timeout");
    return ok();
  });
}

int rowan_listener_fd(const rowan_listener* l) { return l == nullptr ? -1 : l->fd(); }
int rowan_listener_port(const rowan_listener* l) { return l == nullptr ? -1 : l->port(); }
void rowan_listener_close(rowan_listener* l) { delete l; }

int rowan_connect(const char* server_address, const rowan_channel_options* o, rowan_channel** out) {
  if (server_address == nullptr || out == nullptr) return fail(ROWAN_ERR_INVALID, "NULL argument");
  return guarded([&] {
    std::string err;
    const int rc = rowan::api::connect_channel(server_address, rowan::api::channel_params(o),
                                               o != nullptr && o->rtt_s > 0, out, &err);
    if (rc != ROWAN_OK) return fail(rc, err);
    return ok();
  });
}

int rowan_key_generate(uint8_t private_key[ROWAN_KEY_BYTES], uint8_t public_key[ROWAN_KEY_BYTES]) {
  if (private_key == nullptr || public_key == nullptr)
    return fail(ROWAN_ERR_INVALID, "NULL argument");
  return guarded([&] {
    const rowan::crypto::Key k = rowan::crypto::generate_private_key();
    const rowan::crypto::Key pub = rowan::crypto::public_key(k);
    std::memcpy(private_key, k.data(), ROWAN_KEY_BYTES);
    std::memcpy(public_key, pub.data(), ROWAN_KEY_BYTES);
    return ok();
  });
}

int rowan_key_public(const uint8_t private_key[ROWAN_KEY_BYTES],
                     uint8_t public_key[ROWAN_KEY_BYTES]) {
  if (private_key == nullptr || public_key == nullptr)
    return fail(ROWAN_ERR_INVALID, "NULL argument");
  return guarded([&] {
    rowan::crypto::Key k{};
    std::memcpy(k.data(), private_key, ROWAN_KEY_BYTES);
    const rowan::crypto::Key pub = rowan::crypto::public_key(k);
    rowan::crypto::wipe(k);
    std::memcpy(public_key, pub.data(), ROWAN_KEY_BYTES);
    return ok();
  });
}

int rowan_key_from_base64(const char* text, uint8_t key[ROWAN_KEY_BYTES]) {
  if (text == nullptr || key == nullptr) return fail(ROWAN_ERR_INVALID, "NULL argument");
  return guarded([&] {
    const auto k = rowan::crypto::key_from_base64(text);
    if (!k) return fail(ROWAN_ERR_INVALID, "not base64 of a 32-byte key");
    std::memcpy(key, k->data(), ROWAN_KEY_BYTES);
    return ok();
  });
}

int rowan_listen_secure(const char* bind_address, const rowan_channel_options* o,
                        const rowan_channel_keys* keys, rowan_listener** out) {
  if (bind_address == nullptr || keys == nullptr || out == nullptr)
    return fail(ROWAN_ERR_INVALID, "NULL argument");
  return guarded([&] {
    *out = new rowan_listener(bind_address, secure_params(o, keys));
    return ok();
  });
}

int rowan_connect_secure(const char* server_address, const rowan_channel_options* o,
                         const rowan_channel_keys* keys, rowan_channel** out) {
  if (server_address == nullptr || keys == nullptr || out == nullptr)
    return fail(ROWAN_ERR_INVALID, "NULL argument");
  return guarded([&] {
    std::string err;
    const int rc = rowan::api::connect_channel(server_address, secure_params(o, keys),
                                               o != nullptr && o->rtt_s > 0, out, &err);
    if (rc != ROWAN_OK) return fail(rc, err);
    return ok();
  });
}

}  // extern "C"

namespace {

// The paths of rowan_connect_paths(_secure), checked.
int client_paths(const rowan_channel_path* paths, size_t count,
                 std::vector<rowan::api::ClientPath>* out) {
  if (paths == nullptr || count == 0 || count > rowan::api::kMaxChannelPaths)
    return fail(ROWAN_ERR_INVALID,
                "give 1 to " + std::to_string(rowan::api::kMaxChannelPaths) + " paths");
  for (size_t i = 0; i < count; ++i) {
    if (paths[i].remote_address == nullptr)
      return fail(ROWAN_ERR_INVALID, "path " + std::to_string(i) + " has no remote address");
    out->push_back(rowan::api::ClientPath{
        paths[i].local_address != nullptr ? paths[i].local_address : "", paths[i].remote_address,
        paths[i].rate_bps > 0 ? paths[i].rate_bps : 0, paths[i].rtt_s > 0 ? paths[i].rtt_s : 0});
  }
  return ROWAN_OK;
}

int connect_paths(const rowan_channel_path* paths, size_t count, const rowan_channel_options* o,
                  const rowan::api::ChannelParams& params, rowan_channel** out) {
  if (out == nullptr) return fail(ROWAN_ERR_INVALID, "NULL argument");
  return guarded([&] {
    std::vector<rowan::api::ClientPath> list;
    if (const int rc = client_paths(paths, count, &list); rc != ROWAN_OK) return rc;
    std::string err;
    const int rc =
        rowan::api::connect_channel_paths(list, params, o != nullptr && o->rtt_s > 0, out, &err);
    if (rc != ROWAN_OK) return fail(rc, err);
    return ok();
  });
}

}  // namespace

extern "C" {

int rowan_connect_paths(const rowan_channel_path* paths, size_t count,
                        const rowan_channel_options* o, rowan_channel** out) {
  return connect_paths(paths, count, o, rowan::api::channel_params(o), out);
}

int rowan_connect_paths_secure(const rowan_channel_path* paths, size_t count,
                               const rowan_channel_options* o, const rowan_channel_keys* keys,
                               rowan_channel** out) {
  if (keys == nullptr) return fail(ROWAN_ERR_INVALID, "NULL argument");
  return connect_paths(paths, count, o, secure_params(o, keys), out);
}

size_t rowan_channel_path_count(const rowan_channel* ch) {
  return ch == nullptr ? 0 : ch->path_count();
}

int rowan_channel_path_stats_get(const rowan_channel* ch, size_t index,
                                 rowan_channel_path_stats* out) {
  if (ch == nullptr || out == nullptr) return fail(ROWAN_ERR_INVALID, "NULL argument");
  if (index >= ch->path_count()) return fail(ROWAN_ERR_NOT_FOUND, "no such path");
  return guarded([&] {
    ch->fill_path_stats(index, out);
    return ok();
  });
}

int rowan_channel_send(rowan_channel* ch, const void* buf, size_t len, rowan_send_cb cb,
                       void* user) {
  if (ch == nullptr) return fail(ROWAN_ERR_INVALID, "NULL channel");
  return guarded([&] { return ch->send(buf, len, cb, user); });
}

int rowan_channel_post_recv(rowan_channel* ch, void* buf, size_t capacity, rowan_recv_cb cb,
                            void* user) {
  if (ch == nullptr) return fail(ROWAN_ERR_INVALID, "NULL channel");
  return guarded([&] { return ch->post_recv(buf, capacity, cb, user); });
}

int rowan_channel_poll(rowan_channel* ch, int timeout_ms) {
  if (ch == nullptr) return fail(ROWAN_ERR_INVALID, "NULL channel");
  return guarded([&] { return ch->poll(timeout_ms); });
}

int rowan_channel_flush(rowan_channel* ch, int timeout_ms) {
  if (ch == nullptr) return fail(ROWAN_ERR_INVALID, "NULL channel");
  return guarded([&] { return ch->flush(timeout_ms); });
}

void rowan_channel_close(rowan_channel* ch) {
  if (ch == nullptr) return;
  guarded([&] {
    ch->close();
    return 0;
  });
  delete ch;
}

int rowan_channel_stats_get(const rowan_channel* ch, rowan_channel_stats* out) {
  if (ch == nullptr || out == nullptr) return fail(ROWAN_ERR_INVALID, "NULL argument");
  return guarded([&] {
    ch->fill_stats(out);
    return ok();
  });
}

uint64_t rowan_channel_id(const rowan_channel* ch) { return ch == nullptr ? 0 : ch->id(); }

int rowan_channel_peer(const rowan_channel* ch, char* buf, size_t len) {
  if (ch == nullptr || buf == nullptr || len == 0) return fail(ROWAN_ERR_INVALID, "NULL argument");
  return guarded([&] {
    const std::string s = ch->peer().to_string();
    const size_t n = std::min(len - 1, s.size());
    std::memcpy(buf, s.data(), n);
    buf[n] = '\0';
    return ok();
  });
}

}  // extern "C"
