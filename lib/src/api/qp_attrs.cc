// The rules (docs/librowan.md has the reasoning):
//  - path MTU: the largest IB MTU that fits the host's link with RoCEv2/IPv6
//    headers (IPv6 40 + UDP 8 + BTH 12 + RETH 16 + ICRC 4 = 80 bytes);
//  - ACK timeout: longer than the worst ACK delay the mode allows, so the
//    RNIC's timer never fires while the gateway is still recovering:
//      direct:       2 x RTT + 1 ms (losses are the host's to recover)
//      passthrough:  4 x RTT + 10 ms (gateway queue of up to ~2 BDP plus one
//                    WAN retransmission round and its probe timeout)
//      split:        max(8 x local RTT, 4 ms), or the passthrough value when
//                    the QP issues READs or atomics (those travel end to end);
//  - retry_cnt 7 and rnr_retry 7 (a retry costs an RTT; giving up costs the
//    QP);
//  - min_rnr_timer: a quarter of the path's RTT, at least 0.64 ms;
//  - max_rd_atomic / max_dest_rd_atomic: READs to fill the BDP, at most 16
//    (what RNICs offer; READ throughput is depth x size / RTT);
//  - SQ/RQ depth: 2 x the messages in one BDP (a WR completes only when its
//    ACK is back) plus 16, at least 16, at most 32768.
#include "api/qp_attrs.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace rowan::api {
namespace {

constexpr double kTimeoutUnit = 4.096e-6;  // seconds, IB spec 9.7.6.1.3
constexpr uint32_t kRoceOverhead = 80;     // IPv6 + UDP + BTH + RETH + ICRC
constexpr uint32_t kDefaultLinkMtu = 1500;
constexpr uint32_t kDefaultMessage = 65536;
constexpr double kDefaultLocalRtt = 100e-6;
constexpr uint32_t kMaxRdAtomic = 16;
constexpr uint32_t kMinQueue = 16;
constexpr uint32_t kMaxQueue = 32768;

// RNR NAK timer codes 0..31 in milliseconds (IB spec table 45).
constexpr double kRnrMs[32] = {655.36, 0.01,  0.02,  0.03,   0.04,   0.06,   0.08,   0.12,
                               0.16,   0.24,  0.32,  0.48,   0.64,   0.96,   1.28,   1.92,
                               2.56,   3.84,  5.12,  7.68,   10.24,  15.36,  20.48,  30.72,
                               40.96,  61.44, 81.92, 122.88, 163.84, 245.76, 327.68, 491.52};

}  // namespace

uint32_t roce_path_mtu(uint32_t link_mtu) {
  uint32_t best = 256;
  for (uint32_t m = 256; m <= 4096; m *= 2) {
    if (m + kRoceOverhead <= link_mtu) best = m;
  }
  return best;
}

uint8_t ack_timeout_exponent(double seconds) {
  for (uint8_t t = 1; t < 30; ++t) {
    if (kTimeoutUnit * std::ldexp(1.0, t) >= seconds) return t;
  }
  return 30;
}

double ack_timeout_seconds(uint8_t t) { return t == 0 ? 0.0 : kTimeoutUnit * std::ldexp(1.0, t); }

uint8_t rnr_timer_code(double seconds) {
  for (uint8_t c = 1; c < 32; ++c) {
    if (kRnrMs[c] * 1e-3 >= seconds) return c;
  }
  return 0;  // 655.36 ms, the longest
}

double rnr_timer_seconds(uint8_t code) { return kRnrMs[code & 31] * 1e-3; }

int compute_qp_attrs(const rowan_qp_path& path, rowan_qp_attrs& out) {
  if (!(path.rtt_s > 0) || !(path.rate_bps > 0) || !std::isfinite(path.rtt_s) ||
      !std::isfinite(path.rate_bps) || path.loss_rate < 0 || path.loss_rate > 1) {
    return ROWAN_ERR_INVALID;
  }
  std::memset(&out, 0, sizeof out);
  const uint32_t link_mtu = path.link_mtu != 0 ? path.link_mtu : kDefaultLinkMtu;
  const double message = path.message_bytes != 0 ? path.message_bytes : kDefaultMessage;
  const double local_rtt = path.local_rtt_s > 0 ? path.local_rtt_s : kDefaultLocalRtt;
  const double rtt = path.rtt_s;

  out.path_mtu_bytes = roce_path_mtu(link_mtu);
  out.path_mtu = static_cast<uint8_t>(std::log2(out.path_mtu_bytes / 128.0));  // 256 -> 1

  double ack_delay = 0;
  switch (path.mode) {
    case ROWAN_MODE_PASSTHROUGH:
      ack_delay = 4 * rtt + 10e-3;
      break;
    case ROWAN_MODE_SPLIT:
      ack_delay = path.uses_read_or_atomic != 0 ? 4 * rtt + 10e-3 : std::max(8 * local_rtt, 4e-3);
      break;
    case ROWAN_MODE_DIRECT:
    case ROWAN_MODE_UNKNOWN:
    default:
      ack_delay = 2 * rtt + 1e-3;
      break;
  }
  out.timeout = ack_timeout_exponent(ack_delay);
  out.ack_timeout_s = ack_timeout_seconds(out.timeout);
  out.retry_cnt = 7;
  out.rnr_retry = 7;
  out.min_rnr_timer = rnr_timer_code(std::max(rtt / 4, 0.64e-3));

  const double bdp = path.rate_bps / 8.0 * rtt;
  out.bdp_bytes = static_cast<uint64_t>(std::llround(bdp));
  const double in_bdp = std::ceil(bdp / message);
  const auto rd = static_cast<uint32_t>(std::clamp(in_bdp, 1.0, double{kMaxRdAtomic}));
  out.max_rd_atomic = static_cast<uint8_t>(rd);
  out.max_dest_rd_atomic = static_cast<uint8_t>(rd);
  const double depth = std::clamp(2 * in_bdp + 16, double{kMinQueue}, double{kMaxQueue});
  out.max_send_wr = static_cast<uint32_t>(depth);
  out.max_recv_wr = static_cast<uint32_t>(depth);
  return ROWAN_OK;
}

rowan_route_mode parse_mode(const char* text) {
  if (text == nullptr) return ROWAN_MODE_UNKNOWN;
  if (std::strcmp(text, "direct") == 0) return ROWAN_MODE_DIRECT;
  if (std::strcmp(text, "passthrough") == 0) return ROWAN_MODE_PASSTHROUGH;
  if (std::strcmp(text, "split") == 0) return ROWAN_MODE_SPLIT;
  return ROWAN_MODE_UNKNOWN;
}

const char* mode_name(rowan_route_mode mode) {
  switch (mode) {
    case ROWAN_MODE_DIRECT:
      return "direct";
    case ROWAN_MODE_PASSTHROUGH:
      return "passthrough";
    case ROWAN_MODE_SPLIT:
      return "split";
    case ROWAN_MODE_UNKNOWN:
    default:
      return "unknown";
  }
}

}  // namespace rowan::api
