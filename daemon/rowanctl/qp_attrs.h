// `rowanctl qp-attrs PEER|ADDRESS [--message-bytes N] [--read] [--json]`:
// the RC QP attributes a host should use toward a remote site, computed by
// librowan's rules (lib/src/api/qp_attrs.h) from the daemon's telemetry.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace rowan::ctl {

struct QpAttrsOptions {
  std::string target;          ///< peer name or remote host address
  uint32_t message_bytes = 0;  ///< 0: 65536
  bool uses_read = false;      ///< the QP issues RDMA READ/atomics
  bool json = false;
  int timeout_ms = 5000;
};

/// Prints the attributes; returns 0, 1 (unknown peer / no RTT yet), 69 (no
/// daemon) or 76 (malformed reply).
int run_qp_attrs(const std::string& socket, const QpAttrsOptions& opt, std::ostream& out,
                 std::ostream& err);

}  // namespace rowan::ctl
