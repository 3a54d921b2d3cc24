// How the control plane merges the packet workers' snapshots (site.h):
// counters summed, per-site figures kept, a peer as up as its least-up
// worker connection, flows listed with their worker.
#include "datapath/site.h"

#include <gtest/gtest.h>

namespace rowan::gw {
namespace {

using J = nlohmann::ordered_json;

J status(uint32_t index, uint64_t rx, uint64_t flows, double busy) {
  return J{{"uptime_s", 12.5},
           {"local", J{{"rx_packets", rx}, {"port", J{{"ipackets", 1000}}}}},
           {"flows", flows},
           {"neighbors", 2 + index},
           {"neighbors_unresolved", 1 - index},
           {"streams_waiting_for_host", 2},
           {"drops", J{{"backlog", 3}, {"no_route", index}}},
           {"worker", J{{"index", index},
                        {"lcore", index + 1},
                        {"active_flows", flows},
                        {"rx_packets", rx},
                        {"tx_packets", 0},
                        {"busy", busy}}}};
}

TEST(SiteMerge, StatusSumsCountersAndListsWorkers) {
  const J m = merge_snapshots("status", {status(0, 100, 5, 0.25), status(1, 40, 3, 0.5)});
  EXPECT_EQ(m["local"]["rx_packets"], 140u);
  EXPECT_EQ(m["local"]["port"]["ipackets"], 1000u);  // one port, not two
  EXPECT_EQ(m["flows"], 8u);
  EXPECT_EQ(m["neighbors"], 3u);  // each worker learns the same hosts
  EXPECT_EQ(m["neighbors_unresolved"], 1u);
  EXPECT_EQ(m["streams_waiting_for_host"], 4u);  // each worker's own streams
  EXPECT_EQ(m["drops"]["backlog"], 6u);
  EXPECT_EQ(m["drops"]["no_route"], 1u);
  EXPECT_DOUBLE_EQ(m["uptime_s"].get<double>(), 12.5);
  ASSERT_EQ(m["workers"].size(), 2u);
  EXPECT_EQ(m["workers"][1]["lcore"], 2u);
  EXPECT_EQ(m["workers"][1]["rx_packets"], 40u);
  EXPECT_DOUBLE_EQ(m["workers"][1]["busy"].get<double>(), 0.5);
  EXPECT_FALSE(m.contains("worker"));
}

TEST(SiteMerge, OneWorkerIsItselfPlusTheWorkersList) {
  const J one = status(0, 7, 1, 0.1);
  const J m = merge_snapshots("status", {one});
  EXPECT_EQ(m["local"], one["local"]);
  ASSERT_EQ(m["workers"].size(), 1u);
  EXPECT_EQ(m["workers"][0]["rx_packets"], 7u);
}

TEST(SiteMerge, PeersSumTrafficAndTakeTheWorstState) {
  const J w0 = J::array({J{{"name", "site-b"},
                           {"state", "up"},
                           {"srtt_s", 0.02},
                           {"carried_packets", 10},
                           {"bdp_bytes", 5000}}});
  const J w1 = J::array({J{{"name", "site-b"},
                           {"state", "waiting"},
                           {"srtt_s", 0.03},
                           {"carried_packets", 5},
                           {"bdp_bytes", 6000}}});
  const J m = merge_snapshots("peers", {w0, w1});
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0]["carried_packets"], 15u);
  EXPECT_EQ(m[0]["bdp_bytes"], 5000u);
  EXPECT_DOUBLE_EQ(m[0]["srtt_s"].get<double>(), 0.02);
  EXPECT_EQ(m[0]["state"], "waiting");
}

// A dpdk WAN link with a queue pair per worker: each worker's path lists the
// port's queue count and its own steering counters; only queue 0's worker
// reports the port's own counters.
TEST(SiteMerge, DpdkLinkQueuesAreThePortsAndSteeringAddsUp) {
  const J w0 = J::array({J{{"name", "wan0"},
                           {"state", "up"},
                           {"queues", 2},
                           {"resolved", true},
                           {"steered", J{{"out", 7}, {"in", 3}}},
                           {"drops", J{{"steer_full", 0}, {"wrong_source", 1}}},
                           {"port", J{{"ipackets", 900}}}}});
  const J w1 = J::array({J{{"name", "wan0"},
                           {"state", "up"},
                           {"queues", 2},
                           {"resolved", true},
                           {"steered", J{{"out", 3}, {"in", 7}}},
                           {"drops", J{{"steer_full", 0}, {"wrong_source", 2}}}}});
  const J m = merge_snapshots("links", {w0, w1});
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0]["queues"], 2u);  // the port's, not a sum
  EXPECT_EQ(m[0]["steered"]["out"], 10u);
  EXPECT_EQ(m[0]["steered"]["in"], 10u);
  EXPECT_EQ(m[0]["drops"]["wrong_source"], 3u);
  EXPECT_EQ(m[0]["port"]["ipackets"], 900u);  // reported once
  EXPECT_EQ(m[0]["resolved"], true);
}

TEST(SiteMerge, FlowsCarryTheirWorker) {
  const J m = merge_snapshots("flows", {J::array({J{{"kind", "roce"}}}),
                                        J::array({J{{"kind", "tcp"}}, J{{"kind", "udp"}}})});
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0]["worker"], 0u);
  EXPECT_EQ(m[2]["worker"], 1u);
}

}  // namespace
}  // namespace rowan::gw
