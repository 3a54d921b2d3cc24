// Path telemetry: a snapshot of the local rowand's peers and routes, built
// from its control socket's `peers`, `links` and `status` replies (see
// daemon/rowand/control/control.h for the protocol). Shared by librowan and
// `rowanctl qp-attrs`. Below them, the telemetry client behind the C API's
// rowan_telemetry handle (rowan.cc is the shim over it).
//
// Threading: the snapshot functions are reentrant; a Snapshot is a plain
// value. The client's are described at rowan_telemetry.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "../../include/rowan/rowan.h"

namespace rowan::api {

/// Delivery-rate samples kept for the bottleneck-bandwidth estimate
/// (a windowed max, BBR-style).
inline constexpr size_t kBtlbwWindow = 10;

struct Snapshot {
  double time_s = 0;  ///< monotonic seconds when taken
  std::vector<rowan_path_info> peers;
  std::vector<rowan_route_info> routes;
  /// Per peer (same order): recent delivery-rate samples (bit/s), newest last.
  std::vector<std::vector<double>> rate_samples;
};

/// Builds a snapshot from the three replies' "result" values. `previous`
/// (may be null) supplies the interval rates and the delivery-rate window.
/// Throws std::runtime_error on a reply of the wrong shape.
Snapshot build_snapshot(const nlohmann::ordered_json& peers, const nlohmann::ordered_json& links,
                        const nlohmann::ordered_json& status, const Snapshot* previous,
                        double now_s);

/// The peer named `peer`, or the peer of the longest route prefix that
/// contains the address `peer` (when it parses as an address); null if none.
const rowan_path_info* find_path(const Snapshot& s, const std::string& peer_or_address);

/// The QP path toward a peer or address: the measured min RTT (else SRTT,
/// else the link's configured RTT), the bandwidth estimate (else the link
/// rate), the route's mode. ROWAN_ERR_NOT_FOUND with `error` when unknown.
int qp_path_for(const Snapshot& s, const std::string& peer_or_address, uint32_t message_bytes,
                int uses_read_or_atomic, rowan_qp_path* out, std::string* error);

/// True when `address` (v4 or v6 text) lies in `prefix` ("198.18.2.0/24").
bool prefix_contains(const std::string& prefix, const std::string& address, int* prefix_len);

/// One request on rowand's control socket; returns the reply's "result".
/// Errors as status codes: ROWAN_ERR_UNREACHABLE (no daemon / no answer in
/// timeout_ms), ROWAN_ERR_DAEMON (it answered ok:false; `error` has its
/// message), ROWAN_ERR_PROTOCOL (not JSON).
int control_query(const std::string& socket_path, const std::string& cmd, int timeout_ms,
                  nlohmann::ordered_json* result, std::string* error);

/// Monotonic seconds.
double monotonic_seconds();

}  // namespace rowan::api

/// The telemetry client (the C API's opaque handle): the newest snapshot of
/// one rowand's control socket, refreshed on demand or by a subscription
/// thread. `mu` guards `snap` and `have_snapshot` (the accessors may run on
/// any thread while the subscription refreshes); `wait_mu` and `wake` stop
/// the subscription thread; `event_fd` counts updates for poll()ing callers.
struct rowan_telemetry {
  std::string path;
  mutable std::mutex mu;
  rowan::api::Snapshot snap;
  bool have_snapshot = false;
  int event_fd = -1;
  std::atomic<uint64_t> updates{0};
  // Subscription.
  std::thread thread;
  std::mutex wait_mu;
  std::condition_variable wake;
  bool stop = false;
  bool subscribed = false;
};

namespace rowan::api {

// The client's operations. Each returns a rowan_status and records the
// detail of a failure for rowan_last_error() (api/status.h).

/// A client of the control socket at `path` (nothing is asked yet).
int telemetry_open(std::string path, rowan_telemetry** out);
/// Stops the subscription, closes the event fd and frees the client.
void telemetry_close(rowan_telemetry* t);
/// Asks rowand for peers, links and status and replaces the snapshot;
/// `changed` says whether any peer's or route's values differ.
int telemetry_refresh(rowan_telemetry* t, int timeout_ms, bool* changed);
/// Starts a thread that refreshes every `interval_ms` and, on a change or a
/// failure, counts an update on the event fd and calls `cb` (on that thread).
int telemetry_subscribe(rowan_telemetry* t, uint32_t interval_ms, rowan_telemetry_cb cb,
                        void* user);
/// Stops the subscription thread (no-op without one); joins it.
void telemetry_unsubscribe(rowan_telemetry* t);
/// Reads and resets the event fd's count of updates.
uint64_t telemetry_consume(rowan_telemetry* t);

}  // namespace rowan::api
