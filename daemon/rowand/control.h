// The control socket: newline-delimited JSON over a unix stream socket
// (mode 0660, group from [control], peers checked with SO_PEERCRED), served
// by its own thread so packet cores never block on it.
//
// Request:  {"cmd":"status"} | {"cmd":"peers"} | {"cmd":"links"} | {"cmd":"flows"} | {"cmd":"reload"}
//           (optional "args":{...})
// Reply:    {"ok":true,"result":{...}}  or  {"ok":false,"error":"..."}
#pragma once

#include <atomic>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "config.h"

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
  std::string path_;
  ControlHandler& handler_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  ///< eventfd to stop the thread
  std::atomic<bool> running_{false};
  std::thread thread_;
};

/// Client side (rowanctl, librowan): one request, one reply. Throws
/// std::system_error when the daemon is unreachable (exit 69 in rowanctl) and
/// std::runtime_error on a malformed reply.
nlohmann::ordered_json control_request(const std::string& socket_path, const std::string& cmd,
                                       const nlohmann::ordered_json& args = nlohmann::ordered_json::object(),
                                       int timeout_ms = 5000);

}  // namespace rowan::gw
