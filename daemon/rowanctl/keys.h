// `rowanctl genkey` and `rowanctl pubkey` (like `wg genkey` / `wg pubkey`):
//   umask 077; rowanctl genkey > site-a.key
//   rowanctl pubkey < site-a.key          # goes into the peer's [[peer]] public_key
#pragma once

#include <istream>
#include <ostream>

namespace rowan::ctl {

/// Writes a new X25519 private key (base64, one line) to `out`; warns on `err`
/// when stdout is a file that group or others can read. Returns 0 or 1.
int run_genkey(std::ostream& out, std::ostream& err);

/// Reads a private key (base64) from `in` and writes its public key to `out`.
/// Returns 0, or 1 when the input is not a key.
int run_pubkey(std::istream& in, std::ostream& out, std::ostream& err);

}  // namespace rowan::ctl
