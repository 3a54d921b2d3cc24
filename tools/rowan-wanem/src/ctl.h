// Client side of the control socket: `rowan-wanem ctl SOCKET COMMAND ...`.
// Sends one newline-delimited JSON request and prints the reply.
#pragma once

namespace rowan::wanem {

/// Runs the client with argv after "ctl". Returns the process exit status:
/// 0 ok, 1 the emulator rejected the request, 64 usage, 69 unreachable.
int run_ctl(int argc, char** argv);

}  // namespace rowan::wanem
