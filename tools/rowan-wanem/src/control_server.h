// The control socket: a unix stream socket carrying newline-delimited JSON
// requests, each answered by one JSON line (see emulator.h for the commands).
// Non-blocking; the forwarding loop calls poll_once() between bursts and adds
// fds() to its sleep set, so control never blocks packets and needs no lock.
//
// Thread: the forwarding loop only.
#pragma once

#include <poll.h>

#include <string>
#include <vector>

#include "base/units.h"
#include "emulator.h"

namespace rowan::wanem {

class ControlServer {
 public:
  /// Binds `path` (replacing a stale socket file), mode 0660. Throws on error.
  explicit ControlServer(std::string path);
  ~ControlServer();
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  /// Accepts clients and answers every complete request line. Returns true
  /// when a client asked the emulator to quit.
  bool poll_once(Emulator& emu, TimePoint now);
  /// Appends the fds to wait on (listening socket and clients) for POLLIN.
  void add_fds(std::vector<pollfd>& out) const;

 private:
  struct Client {
    int fd;
    std::string in;
  };
  std::string path_;
  int listen_fd_ = -1;
  std::vector<Client> clients_;
};

}  // namespace rowan::wanem
