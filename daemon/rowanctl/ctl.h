// `rowanctl status|peers|links|flows|routes|peer NAME|reload [--json]`: one
// request over the daemon's control socket (daemon/rowand/control/control.h), printed
// as a table or as the JSON result.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace rowan::ctl {

inline constexpr const char* kDefaultControlSocket = "/run/rowan/control.sock";
inline constexpr int kExitError = 1;         ///< the daemon answered with an error
inline constexpr int kExitUnavailable = 69;  ///< EX_UNAVAILABLE: no daemon on the socket
inline constexpr int kExitProtocol = 76;  ///< EX_PROTOCOL: the reply is not what the protocol says

struct OutputOptions {
  bool json = false;    ///< the result object instead of a table
  bool pretty = false;  ///< JSON indented over several lines (implies json)
  bool wide = false;    ///< tables: every column, not just the usual ones
  int timeout_ms = 5000;
};

/// Sends `cmd` to the daemon on `socket` and prints the result. Errors go to
/// `err`. Returns 0, kExitError, kExitUnavailable or kExitProtocol. `reload`
/// prints whether the daemon accepted the file, and on a rejection every
/// error (FILE:LINE:COL: message, as `rowand --check-config`) to `err` and
/// returns kExitError.
int run_command(const std::string& socket, const std::string& cmd, const OutputOptions& opt,
                std::ostream& out, std::ostream& err);

/// `rowanctl routes`: the routes of `status` as a table or JSON array.
int run_routes(const std::string& socket, const OutputOptions& opt, std::ostream& out,
               std::ostream& err);

/// `rowanctl peer NAME`: that peer's row of `peers`, with its link and routes.
/// kExitError (and the known names) when there is no such peer.
int run_peer(const std::string& socket, const std::string& name, const OutputOptions& opt,
             std::ostream& out, std::ostream& err);

/// One request: the reply's result in `result`, or a message on `err` and the
/// exit status (kExitError, kExitUnavailable, kExitProtocol). 0 on success.
int fetch(const std::string& socket, const std::string& cmd, int timeout_ms,
          nlohmann::ordered_json& result, std::ostream& err);

/// The table form of a result: `status` and other single objects as aligned
/// `key  value` lines (nested objects flattened as a.b), lists (`peers`,
/// `links`, `flows`: an array, or {"peers":[...]}) as one row per element
/// under a header. Unless `wide`, peers/links/flows show their usual columns
/// (name, endpoint, state, RTT, cwnd, rate, retransmissions, ...) when the
/// rows have them. Numbers are formatted by the key's suffix: _bps (bit/s),
/// _bytes, _s/_seconds, _ratio.
void print_table(const std::string& cmd, const nlohmann::ordered_json& result, bool wide,
                 std::ostream& out);

/// Rows of cells as columns two spaces apart, each as wide as its widest cell.
void print_aligned(const std::vector<std::vector<std::string>>& rows, std::ostream& out);

/// One value as the table shows it ("1.25 Gbit/s", "20.1 ms", "1.5 MiB").
std::string format_value(const std::string& key, const nlohmann::ordered_json& v);

}  // namespace rowan::ctl
