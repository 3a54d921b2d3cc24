// rowand's commands on the DPDK telemetry socket
// (/var/run/dpdk/<file-prefix>/dpdk_telemetry.v2, protocol v2: send a command,
// read one JSON reply). They answer from the same published snapshot the
// control socket uses (Worker::snapshot), so rowanctl, Prometheus and
// telemetry clients see the same state:
//
//   /rowan/status          gateway counters, local port stats, drops by reason
//   /rowan/peers           names of the configured peers
//   /rowan/peer,NAME       one peer: RTT, cwnd, pacing, buffers, retransmissions...
//   /rowan/links           names of the WAN links
//   /rowan/link,NAME       one link's counters
//   /rowan/routes          "PREFIX PEER MODE" per route
//   /rowan/flows           "KIND SRC -> DST PEER PACKETS BYTES" per flow (first 512)
//
// DPDK 22.11 values are strings, ints and u64 in dicts at most one level deep,
// so nested objects are flattened (drops.no_route -> drops_no_route) and
// fractional numbers are sent as strings.
//
// Threading: the callbacks run on DPDK's telemetry thread. register() and the
// destructor run on the main thread; the destructor waits for a running
// callback and makes later ones fail (DPDK cannot unregister a command).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace rowan::gw {

class SnapshotSource;

class Telemetry {
 public:
  /// Registers the /rowan/... commands (once per process) and points them at
  /// `gw`. Throws std::runtime_error if DPDK refuses a command.
  explicit Telemetry(const SnapshotSource& gw);
  ~Telemetry();
  Telemetry(const Telemetry&) = delete;
  Telemetry& operator=(const Telemetry&) = delete;
};

/// Flattens a JSON object into `prefix_key` entries whose names DPDK accepts
/// (alphanumerics, '_' and '/'); exposed for tests.
nlohmann::ordered_json flatten_for_telemetry(const nlohmann::ordered_json& obj);

}  // namespace rowan::gw
