// Client side of the control socket: `rowan-wanem ctl SOCKET COMMAND ...`.
// Sends one newline-delimited JSON request and prints the reply.
//
//   get | stats | reset | quit
//   set KEY=VALUE...                   e.g. rate=100mbit a2b.loss=1% b2a.delay=10ms
//   flap [a2b|b2a|both] FOR [IN]       link down for FOR, starting IN from now
//   link up|down [a2b|b2a|both]
//   raw JSON                           a request as it is
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

namespace rowan::wanem {

/// A parsed `ctl` command line: where to send what.
struct CtlRequest {
  std::string socket;
  nlohmann::json request;
};

/// Parses argv after "ctl" (CLI11 subcommands). nullopt after printing the
/// usage or the error to `err`; `*exit_status` is then 0 (--help) or 64.
std::optional<CtlRequest> parse_ctl(int argc, char** argv, std::ostream& out, std::ostream& err,
                                    int* exit_status);

/// Runs the client with argv after "ctl". Returns the process exit status:
/// 0 ok, 1 the emulator rejected the request, 64 usage, 69 unreachable.
int run_ctl(int argc, char** argv);

}  // namespace rowan::wanem
