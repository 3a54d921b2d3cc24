// WAN-sized RC QP attributes: the pure computation behind
// rowan_qp_attrs_compute() and `rowanctl qp-attrs` (docs/librowan.md).
//
// Threading: pure functions, any thread.
#pragma once

#include <cstdint>

#include "../../include/rowan/rowan.h"

namespace rowan::api {

/// Largest IB path MTU (bytes) whose RoCEv2 packets fit `link_mtu` (IPv6
/// headers assumed); 256 when even that does not fit.
uint32_t roce_path_mtu(uint32_t link_mtu);

/// The IB spec's encoding of an ACK timeout: the smallest exponent t (1..30)
/// with 4.096 us * 2^t >= `seconds`.
uint8_t ack_timeout_exponent(double seconds);
/// Seconds that exponent `t` stands for.
double ack_timeout_seconds(uint8_t t);

/// The smallest RNR NAK timer code whose delay is >= `seconds` (IB spec
/// table 45; 0 is 655.36 ms, the longest).
uint8_t rnr_timer_code(double seconds);
double rnr_timer_seconds(uint8_t code);

/// Fills `out` from `path`; returns ROWAN_OK or ROWAN_ERR_INVALID.
int compute_qp_attrs(const rowan_qp_path& path, rowan_qp_attrs& out);

/// "direct" / "passthrough" / "split" → mode (UNKNOWN otherwise), and back.
rowan_route_mode parse_mode(const char* text);
const char* mode_name(rowan_route_mode mode);

}  // namespace rowan::api
