// The control socket: newline-delimited JSON over a unix stream socket
// (mode 0660, group from [control], peers checked with SO_PEERCRED), served
// by its own thread so packet cores never block on it.
//
// Request:  {"cmd":"status"} | {"cmd":"peers"} | {"cmd":"links"} | {"cmd":"flows"}
//           (status: version, uptime_s, config, local, routes, counters)
//           | {"cmd":"reload"}   (optional "args":{...})
// Reply:    {"ok":true,"result":{...}}  or  {"ok":false,"error":"..."}
//
// One request per line, one reply line per request, in order; a client may
// send several requests on one connection. Malformed requests (not JSON, not
// an object, no "cmd" string, longer than kMaxControlRequest) get an error
// reply and the connection stays usable. Whitespace-only lines are ignored.
//
// Results rowanctl renders (keys are free-form; rowanctl prints what it gets,
// and formats numbers by the key's unit suffix: _bps, _bytes, _s, _ratio):
//   status -> one object, nested objects allowed ({"local":{...},"routes":[...],...})
//   peers  -> an array of objects, one per peer ({"peers":[...]} is accepted too)
//   links  -> an array of objects, one per link
//   flows  -> an array of objects, one per flow
//   reload -> once the packet loop has tried the file (reload.h):
//             {"accepted":true,"applied":"...","restart_needed":["[metrics]"]} or
//             {"accepted":false,"errors":["FILE:LINE:COL: message",...]}
// rowanctl's narrow tables pick, when present: peers name, endpoint, state,
// cc, srtt_s, min_rtt_s, cwnd_bytes, pacing_rate_bps, bytes_in_flight,
// delivered_bytes, retransmitted_packets, lost_packets; links name, backend,
// bind, peer, rate_bps, rtt_s, mtu, tx/rx_packets, tx_full, tx_errors; flows
// kind, src, dst, sport, dport, dest_qp, proto, peer, stream, packets, bytes,
// ce_marked, dropped, idle_s (`--wide` shows every field).

#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "config/config.h"

namespace rowan::gw {

/// What the daemon answers with. Called on the control thread only.
class ControlHandler {
 public:
  virtual ~ControlHandler() = default;
  /// Returns the result object for `cmd`; throws std::invalid_argument for an
  /// unknown command or bad args (the message goes back to the client).
  virtual nlohmann::ordered_json handle(const std::string& cmd,
                                        const nlohmann::ordered_json& args) = 0;
};

class ControlServer {
 public:
  /// Creates, binds and listens (removing a stale socket file; refusing when
  /// another daemon answers on it). Throws std::runtime_error on failure.
  ControlServer(const ControlConfig& cfg, ControlHandler& handler);
  ~ControlServer();  ///< stops the thread, removes the socket file
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  /// Starts serving on a thread of its own.
  void start();
  void stop();
  const std::string& path() const { return path_; }

 private:
  void run();
  void close_fds();
  std::string path_;
  ControlHandler& handler_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;         ///< eventfd to stop the thread
  uint32_t socket_gid_ = 0;  ///< members of this group may connect (SO_PEERCRED)
  uint64_t socket_dev_ = 0;  ///< the socket file we made, so we only ever unlink ours
  uint64_t socket_ino_ = 0;
  std::atomic<bool> running_{false};
  std::thread thread_;
};

/// Longest request line the server accepts (bytes, newline excluded); longer
/// lines get an error reply and are skipped, the connection stays usable.
inline constexpr size_t kMaxControlRequest = size_t{64} * 1024;

/// Client side (rowanctl, librowan): one request, one reply. Returns the whole
/// reply object ({"ok":true,"result":...} or {"ok":false,"error":"..."}).
/// Throws std::system_error when the daemon is unreachable or does not answer
/// within `timeout_ms` (exit 69 in rowanctl) and std::runtime_error on a
/// malformed reply. Any thread.
nlohmann::ordered_json control_request(
    const std::string& socket_path, const std::string& cmd,
    const nlohmann::ordered_json& args = nlohmann::ordered_json::object(), int timeout_ms = 5000);

}  // namespace rowan::gw
