// The WAN-sized QP attribute rules (lib/src/api/qp_attrs.cc, docs/librowan.md).
#include "api/qp_attrs.h"

#include <gtest/gtest.h>

#include <cmath>

namespace rowan::api {
namespace {

rowan_qp_path path(double rtt, double rate, rowan_route_mode mode) {
  rowan_qp_path p{};
  p.rtt_s = rtt;
  p.rate_bps = rate;
  p.mode = mode;
  return p;
}

TEST(QpAttrs, PathMtuFitsTheLinkWithRoceHeaders) {
  EXPECT_EQ(roce_path_mtu(1500), 1024u);
  EXPECT_EQ(roce_path_mtu(9000), 4096u);
  EXPECT_EQ(roce_path_mtu(4176), 4096u);  // 4096 + 80 exactly
  EXPECT_EQ(roce_path_mtu(4175), 2048u);
  EXPECT_EQ(roce_path_mtu(1100), 512u);
  EXPECT_EQ(roce_path_mtu(200), 256u);  // nothing fits: the smallest
  rowan_qp_attrs a{};
  rowan_qp_path p = path(0.02, 1e9, ROWAN_MODE_PASSTHROUGH);
  p.link_mtu = 9000;
  ASSERT_EQ(compute_qp_attrs(p, a), ROWAN_OK);
  EXPECT_EQ(a.path_mtu_bytes, 4096u);
  EXPECT_EQ(a.path_mtu, 5);  // IBV_MTU_4096
  p.link_mtu = 0;            // default 1500
  ASSERT_EQ(compute_qp_attrs(p, a), ROWAN_OK);
  EXPECT_EQ(a.path_mtu, 3);  // IBV_MTU_1024
}

TEST(QpAttrs, TimeoutEncoding) {
  EXPECT_EQ(ack_timeout_exponent(4.096e-6 * 2), 1);
  EXPECT_EQ(ack_timeout_exponent(0.0), 1);
  EXPECT_EQ(ack_timeout_exponent(0.134), 15);  // 4.096 us * 2^15 = 134.2 ms
  EXPECT_EQ(ack_timeout_exponent(0.135), 16);
  EXPECT_EQ(ack_timeout_exponent(1e6), 30);
  EXPECT_NEAR(ack_timeout_seconds(15), 0.134217728, 1e-9);
  for (uint8_t t = 1; t < 30; ++t) EXPECT_EQ(ack_timeout_exponent(ack_timeout_seconds(t)), t);
}

TEST(QpAttrs, RnrTimerTable) {
  EXPECT_EQ(rnr_timer_code(0.64e-3), 12);
  EXPECT_EQ(rnr_timer_code(5e-3), 18);  // 5.12 ms
  EXPECT_EQ(rnr_timer_code(1.0), 0);    // beyond 491.52 ms: the longest, 655.36 ms
  EXPECT_NEAR(rnr_timer_seconds(18), 5.12e-3, 1e-9);
  for (uint8_t c = 1; c < 32; ++c) EXPECT_EQ(rnr_timer_code(rnr_timer_seconds(c)), c);
}

TEST(QpAttrs, AckTimeoutCoversTheModesWorstAckDelay) {
  rowan_qp_attrs a{};
  // Passthrough, 20 ms: 4 x 20 + 10 = 90 ms -> 2^15 x 4.096 us = 134 ms.
  ASSERT_EQ(compute_qp_attrs(path(0.02, 1e9, ROWAN_MODE_PASSTHROUGH), a), ROWAN_OK);
  EXPECT_EQ(a.timeout, 15);
  EXPECT_GE(a.ack_timeout_s, 0.09);
  EXPECT_LT(a.ack_timeout_s, 2 * 0.09);
  // Direct, 20 ms: 2 x 20 + 1 = 41 ms -> 2^14 -> 67 ms.
  ASSERT_EQ(compute_qp_attrs(path(0.02, 1e9, ROWAN_MODE_DIRECT), a), ROWAN_OK);
  EXPECT_EQ(a.timeout, 14);
  // Unknown mode is treated as direct.
  rowan_qp_attrs u{};
  ASSERT_EQ(compute_qp_attrs(path(0.02, 1e9, ROWAN_MODE_UNKNOWN), u), ROWAN_OK);
  EXPECT_EQ(u.timeout, a.timeout);
  // Split without READs: local ACKs, max(8 x 100 us, 4 ms) = 4 ms -> 2^10 = 4.19 ms.
  ASSERT_EQ(compute_qp_attrs(path(0.08, 1e9, ROWAN_MODE_SPLIT), a), ROWAN_OK);
  EXPECT_EQ(a.timeout, 10);
  // Split with READs: those travel end to end, the passthrough rule applies.
  rowan_qp_path r = path(0.08, 1e9, ROWAN_MODE_SPLIT);
  r.uses_read_or_atomic = 1;
  rowan_qp_attrs pt{};
  ASSERT_EQ(compute_qp_attrs(r, a), ROWAN_OK);
  ASSERT_EQ(compute_qp_attrs(path(0.08, 1e9, ROWAN_MODE_PASSTHROUGH), pt), ROWAN_OK);
  EXPECT_EQ(a.timeout, pt.timeout);
  // Longer paths never get shorter timeouts.
  uint8_t last = 0;
  for (double rtt = 1e-4; rtt < 1.0; rtt *= 1.5) {
    ASSERT_EQ(compute_qp_attrs(path(rtt, 1e9, ROWAN_MODE_PASSTHROUGH), a), ROWAN_OK);
    EXPECT_GE(a.timeout, last);
    EXPECT_GE(a.ack_timeout_s, 4 * rtt);
    last = a.timeout;
  }
  EXPECT_EQ(a.retry_cnt, 7);
  EXPECT_EQ(a.rnr_retry, 7);
}

TEST(QpAttrs, QueueDepthAndReadDepthCoverTheBdp) {
  rowan_qp_attrs a{};
  rowan_qp_path p = path(0.02, 1e9, ROWAN_MODE_PASSTHROUGH);
  p.message_bytes = 65536;
  ASSERT_EQ(compute_qp_attrs(p, a), ROWAN_OK);
  EXPECT_EQ(a.bdp_bytes, 2500000u);          // 1 Gbit/s x 20 ms
  EXPECT_EQ(a.max_send_wr, 2u * 39u + 16u);  // ceil(2.5 MB / 64 KiB) = 39
  EXPECT_EQ(a.max_recv_wr, a.max_send_wr);
  EXPECT_EQ(a.max_rd_atomic, 16);  // capped at what RNICs offer
  EXPECT_EQ(a.max_dest_rd_atomic, 16);
  // A short, slow path needs few READs in flight.
  p = path(1e-3, 1e8, ROWAN_MODE_DIRECT);  // BDP 12.5 kB
  p.message_bytes = 4096;
  ASSERT_EQ(compute_qp_attrs(p, a), ROWAN_OK);
  EXPECT_EQ(a.max_rd_atomic, 4);  // ceil(12500 / 4096)
  EXPECT_EQ(a.max_send_wr, 24u);
  // Huge BDP: the depth saturates.
  p = path(0.2, 400e9, ROWAN_MODE_PASSTHROUGH);
  p.message_bytes = 4096;
  ASSERT_EQ(compute_qp_attrs(p, a), ROWAN_OK);
  EXPECT_EQ(a.max_send_wr, 32768u);
  // min_rnr_timer: a quarter RTT (20 ms -> 5 ms -> 5.12 ms), never below 0.64 ms.
  ASSERT_EQ(compute_qp_attrs(path(0.02, 1e9, ROWAN_MODE_PASSTHROUGH), a), ROWAN_OK);
  EXPECT_EQ(a.min_rnr_timer, 18);
  ASSERT_EQ(compute_qp_attrs(path(1e-4, 1e9, ROWAN_MODE_PASSTHROUGH), a), ROWAN_OK);
  EXPECT_EQ(a.min_rnr_timer, 12);
}

TEST(QpAttrs, RejectsMissingOrBadInputs) {
  rowan_qp_attrs a{};
  EXPECT_EQ(compute_qp_attrs(path(0, 1e9, ROWAN_MODE_DIRECT), a), ROWAN_ERR_INVALID);
  EXPECT_EQ(compute_qp_attrs(path(0.02, 0, ROWAN_MODE_DIRECT), a), ROWAN_ERR_INVALID);
  EXPECT_EQ(compute_qp_attrs(path(-1, 1e9, ROWAN_MODE_DIRECT), a), ROWAN_ERR_INVALID);
  EXPECT_EQ(compute_qp_attrs(path(NAN, 1e9, ROWAN_MODE_DIRECT), a), ROWAN_ERR_INVALID);
  EXPECT_EQ(compute_qp_attrs(path(INFINITY, 1e9, ROWAN_MODE_DIRECT), a), ROWAN_ERR_INVALID);
  rowan_qp_path p = path(0.02, 1e9, ROWAN_MODE_DIRECT);
  p.loss_rate = 1.5;
  EXPECT_EQ(compute_qp_attrs(p, a), ROWAN_ERR_INVALID);
}

TEST(QpAttrs, ModeNames) {
  EXPECT_EQ(parse_mode("passthrough"), ROWAN_MODE_PASSTHROUGH);
  EXPECT_EQ(parse_mode("split"), ROWAN_MODE_SPLIT);
  EXPECT_EQ(parse_mode("direct"), ROWAN_MODE_DIRECT);
  EXPECT_EQ(parse_mode("bogus"), ROWAN_MODE_UNKNOWN);
  EXPECT_EQ(parse_mode(nullptr), ROWAN_MODE_UNKNOWN);
  EXPECT_STREQ(mode_name(ROWAN_MODE_PASSTHROUGH), "passthrough");
}

}  // namespace
}  // namespace rowan::api
