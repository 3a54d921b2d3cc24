// Which packet worker owns a frame from the site port (ARCHITECTURE.md
// "Packet workers"). The software distributor (distributor.h) calls it for
// every frame when the port has one RX queue, and with a queue per worker
// each worker calls it for every frame its queue gives it (handoff.h); pure
// and DPDK-free, so the spreading and the ownership rule are unit-tested
// without a port.
//
// The rule:
// - ARP, and ICMPv6 neighbour solicitations/advertisements (next header 58,
//   types 135/136), go to every worker (kAllWorkers): each keeps its own
//   neighbour table, and worker 0 alone answers for the gateway's address.
// - IPv4/IPv6 TCP and UDP (not fragments) hash over both addresses and both
//   ports; a RoCEv2 QP's UDP source port is its entropy, so one QP always
//   maps to one worker and is never reordered. The hash is symmetric (A→B
//   and B→A give the same value), so with the same worker count on both
//   gateways a worker's peer is the peer's worker of the same index.
// - RoCEv2 toward a route in split mode hashes over the addresses only: the
//   split engine must see a QP's requests and the responder's ACKs (which
//   carry the responder's own source port) in one worker on both gateways.
// - Fragments and other protocols: the addresses and the protocol, as the
//   flow table keys them (flow_table.h).
// - A frame with one 802.1Q tag goes where the same frame untagged goes
//   (a QP's frames stay on one worker whatever their tag).
// - Anything else (runts, two tags or a cut tag, unknown ethertypes, bad
//   IP): worker 0, which drops it under its reason.
//
// Threading: any thread; no state.
#pragma once

#include <cstdint>
#include <vector>

#include "config/config.h"

namespace rowan::gw {

inline constexpr uint32_t kAllWorkers = UINT32_MAX;

/// A route as the distributor sees it: longest prefix first.
struct ShardRoute {
  Prefix prefix;
  bool split = false;
};

/// The 64-bit flow hash of the IP packet at `ip` (`len` bytes) under the rule
/// above, or false when it is not a sane IPv4/IPv6 header.
bool flow_hash(const uint8_t* ip, uint32_t len, const std::vector<ShardRoute>& routes,
               uint64_t* hash) noexcept;

/// The worker (0..workers-1) of the Ethernet frame at `frame`, or kAllWorkers.
uint32_t shard_of(const uint8_t* frame, uint32_t len, uint32_t workers,
                  const std::vector<ShardRoute>& routes) noexcept;

/// Jain's fairness index of `x` (1: equal; 1/n: one takes all).
double jain_index(const std::vector<double>& x);

}  // namespace rowan::gw
