// Telemetry snapshots from replies shaped like rowand's peers/links/status.
#include "api/telemetry.h"

#include <gtest/gtest.h>

#include <cstring>

namespace rowan::api {
namespace {

using Json = nlohmann::ordered_json;

Json peers(uint64_t sent, uint64_t lost, uint64_t retx, uint64_t delivered) {
  return Json::array({Json{{"name", "b"},
                           {"endpoint", "198.19.0.2:47910"},
                           {"link", "wan0"},
                           {"state", "up"},
                           {"cc", "rowan"},
                           {"srtt_s", 0.021},
                           {"min_rtt_s", 0.020},
                           {"rttvar_s", 0.001},
                           {"cwnd_bytes", 5000000},
                           {"pacing_rate_bps", 9.5e8},
                           {"bdp_bytes", 2500000},
                           {"bytes_in_flight", 1000},
                           {"delivered_bytes", delivered},
                           {"packets_sent", sent},
                           {"retransmitted_packets", retx},
                           {"lost_packets", lost}},
                      Json{{"name", "c"}, {"state", "waiting"}, {"link", "wan1"}}});
}

Json links() {
  return Json::array({Json{{"name", "wan0"}, {"peer", "b"}, {"rate_bps", 1e9}, {"rtt_s", 0.02}},
                      Json{{"name", "wan1"}, {"peer", "c"}, {"rate_bps", 1e8}, {"rtt_s", 0.05}}});
}

Json status() {
  return Json{
      {"routes",
       Json::array({Json{{"prefix", "198.18.2.0/24"}, {"peer", "b"}, {"mode", "passthrough"}},
                    Json{{"prefix", "198.18.0.0/15"}, {"peer", "c"}, {"mode", "direct"}},
                    Json{{"prefix", "2001:2::/48"}, {"peer", "c"}, {"mode", "split"}}})}};
}

TEST(Telemetry, SnapshotReadsPeersLinksAndRoutes) {
  const Snapshot s = build_snapshot(peers(1000, 10, 20, 0), links(), status(), nullptr, 5.0);
  ASSERT_EQ(s.peers.size(), 2u);
  ASSERT_EQ(s.routes.size(), 3u);
  const rowan_path_info& b = s.peers[0];
  EXPECT_STREQ(b.peer, "b");
  EXPECT_STREQ(b.cc, "rowan");
  EXPECT_EQ(b.state, ROWAN_PEER_UP);
  EXPECT_EQ(b.mode, ROWAN_MODE_PASSTHROUGH);
  EXPECT_DOUBLE_EQ(b.min_rtt_s, 0.020);
  EXPECT_DOUBLE_EQ(b.link_rate_bps, 1e9);
  // No delivery measured yet: btlbw is the configured rate, BDP rate x min RTT.
  EXPECT_DOUBLE_EQ(b.btlbw_bps, 1e9);
  EXPECT_EQ(b.bdp_bytes, 2500000u);
  // First snapshot: cumulative ratios.
  EXPECT_DOUBLE_EQ(b.loss_rate, 0.01);
  EXPECT_DOUBLE_EQ(b.retransmit_rate, 0.02);
  EXPECT_EQ(s.peers[1].state, ROWAN_PEER_WAITING);
  EXPECT_EQ(s.peers[1].mode, ROWAN_MODE_DIRECT);
  // Unknown RTT: BDP from the link's configured RTT.
  EXPECT_EQ(s.peers[1].bdp_bytes, 625000u);  // 100 Mbit/s x 50 ms
  EXPECT_EQ(s.routes[2].mode, ROWAN_MODE_SPLIT);
}

TEST(Telemetry, IntervalRatesAndWindowedBandwidth) {
  const Snapshot s0 = build_snapshot(peers(1000, 10, 20, 0), links(), status(), nullptr, 1.0);
  // One second later: 1000 more packets, 1 lost, 3 retransmitted, 50 MB delivered.
  const Snapshot s1 = build_snapshot(peers(2000, 11, 23, 50000000), links(), status(), &s0, 2.0);
  EXPECT_DOUBLE_EQ(s1.peers[0].loss_rate, 0.001);
  EXPECT_DOUBLE_EQ(s1.peers[0].retransmit_rate, 0.003);
  EXPECT_DOUBLE_EQ(s1.peers[0].btlbw_bps, 4e8);  // 50 MB/s measured
  EXPECT_EQ(s1.peers[0].bdp_bytes, 1000000u);    // 400 Mbit/s x 20 ms
  // A slower interval does not lower the windowed max.
  const Snapshot s2 = build_snapshot(peers(2500, 11, 23, 60000000), links(), status(), &s1, 3.0);
  EXPECT_DOUBLE_EQ(s2.peers[0].btlbw_bps, 4e8);
  // After the window passes, the old maximum ages out.
  Snapshot s = s2;
  for (int i = 0; i < static_cast<int>(kBtlbwWindow); ++i) {
    s = build_snapshot(peers(3000 + i, 11, 23, 60000000 + (i + 1) * 1000000), links(), status(), &s,
                       4.0 + i);
  }
  EXPECT_DOUBLE_EQ(s.peers[0].btlbw_bps, 8e6);  // 1 MB/s
  // Never above the configured link rate.
  const Snapshot fast = build_snapshot(peers(9000, 11, 23, 60000000 + 10 * 1000000 + 500000000),
                                       links(), status(), &s, 14.0);
  EXPECT_DOUBLE_EQ(fast.peers[0].btlbw_bps, 1e9);
}

TEST(Telemetry, FindPathByNameOrLongestPrefix) {
  const Snapshot s = build_snapshot(peers(1, 0, 0, 0), links(), status(), nullptr, 1.0);
  ASSERT_NE(find_path(s, "b"), nullptr);
  EXPECT_STREQ(find_path(s, "b")->peer, "b");
  EXPECT_STREQ(find_path(s, "198.18.2.10")->peer, "b");  // /24 beats /15
  EXPECT_STREQ(find_path(s, "198.19.7.1")->peer, "c");
  EXPECT_STREQ(find_path(s, "2001:2::10")->peer, "c");
  EXPECT_EQ(find_path(s, "10.0.0.1"), nullptr);
  EXPECT_EQ(find_path(s, "nope"), nullptr);
  int len = 0;
  EXPECT_TRUE(prefix_contains("198.18.0.0/15", "198.19.255.255", &len));
  EXPECT_EQ(len, 15);
  EXPECT_FALSE(prefix_contains("198.18.0.0/15", "198.20.0.0", nullptr));
  EXPECT_FALSE(prefix_contains("198.18.0.0/15", "2001:2::1", nullptr));
  EXPECT_FALSE(prefix_contains("198.18.0.0/99", "198.18.0.1", nullptr));
}

TEST(Telemetry, WrongShapeThrows) {
  EXPECT_THROW(build_snapshot(Json::object(), links(), status(), nullptr, 1.0), std::runtime_error);
  // {"peers":[...]} is accepted like a bare array.
  const Snapshot s = build_snapshot(Json{{"peers", peers(1, 0, 0, 0)}}, Json{{"links", links()}},
                                    status(), nullptr, 1.0);
  EXPECT_EQ(s.peers.size(), 2u);
}

TEST(Telemetry, NoDaemonIsUnreachable) {
  Json result;
  std::string err;
  EXPECT_EQ(control_query("/nonexistent/rowan/control.sock", "peers", 100, &result, &err),
            ROWAN_ERR_UNREACHABLE);
  EXPECT_NE(err.find("/nonexistent/rowan/control.sock"), std::string::npos);
}

}  // namespace
}  // namespace rowan::api
