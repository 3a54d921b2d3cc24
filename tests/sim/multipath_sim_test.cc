// rowan-sim with several paths per connection: striping over unequal paths
// and failover, on the default algorithm (label: sim).
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "registry.h"
#include "sim.h"
#include "tools/paths.h"

namespace rowan::sim {
namespace {

// 100 Mbit/s x 20 ms and 50 Mbit/s x 30 ms, the pair.
Scenario two_paths() {
  Scenario s;
  s.cc = std::string(cc::kDefaultAlgorithm);
  s.rate = BitsPerSec::from_mbps(100);
  s.rtt = Duration::from_ms(20);
  s.paths = {PathSpec{BitsPerSec::from_mbps(100), Duration::from_ms(20), 0.0},
             PathSpec{BitsPerSec::from_mbps(50), Duration::from_ms(30), 0.0}};
  s.duration = Duration::from_s(10);
  s.warmup = Duration::from_s(2);
  return s;
}

TEST(SimMultipath, TwoUnequalPathsCarryTheSumOfTheirRates) {
  Scenario one = two_paths();
  one.paths.clear();  // the 100 Mbit/s path alone, same run
  const Result r1 = run(one);
  const Result r2 = run(two_paths());
  EXPECT_EQ(r2.capacity_bps, 150e6);
  EXPECT_GE(r2.goodput_bps, 0.9 * 150e6) << "one path: " << r1.goodput_bps;
  // Against the one-path figure of the same run: the second path adds its rate.
  EXPECT_GE(r2.goodput_bps / r1.goodput_bps, 0.9 * 1.5)
      << r2.goodput_bps << " on two paths, " << r1.goodput_bps << " on one";
  ASSERT_EQ(r2.paths.size(), 2U);
  EXPECT_GE(r2.paths[0].utilization, 0.9);
  EXPECT_GE(r2.paths[1].utilization, 0.9);
  EXPECT_EQ(r2.paths[0].downs + r2.paths[1].downs, 0U);
  EXPECT_EQ(r2.flows[0].spurious, 0U);
}

TEST(SimMultipath, PathDownForTenSecondsLosesNothing) {
  // The faster path is cut for 10 s mid-transfer; real bytes are carried and
  // checked at the receiver, and the run drains so nothing can hide in flight.
  Scenario s = two_paths();
  s.duration = Duration::from_s(20);
  s.outages = {Outage{0, Duration::from_s(5), Duration::from_s(10)}};
  s.verify = true;
  const Result r = run(s);
  EXPECT_TRUE(r.drained);
  EXPECT_EQ(r.lost_bytes, 0U);
  EXPECT_EQ(r.corrupted_bytes, 0U);
  ASSERT_EQ(r.outages.size(), 1U);
  const OutageResult& o = r.outages[0];
  EXPECT_GE(o.detect_s, 0.0);
  EXPECT_LE(o.detect_s, 0.5);
  // Goodput at the survivor's (50 Mbit/s) rate within 1 s of the cut.
  EXPECT_GE(o.recovery_s, 0.0);
  EXPECT_LE(o.recovery_s, 1.0);
  // The returning path carries data again within 2 s.
  EXPECT_GE(o.rejoin_s, 0.0);
  EXPECT_LE(o.rejoin_s, 2.0);
  EXPECT_EQ(r.paths[0].downs, 1U);
  EXPECT_EQ(r.paths[0].ups, 1U);
  EXPECT_GT(r.paths[0].outage_drops, 0U);
}

TEST(SimMultipath, CliTakesPerPathListsAndOutages) {
  const std::string cmd = test::binary_dir() +
                          "/tools/rowan-sim/rowan-sim --rate 100mbit,50mbit --rtt 20ms,30ms "
                          "--loss 0,0.1% --duration 4s --path-down 1@1s+1s --json";
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  ASSERT_TRUE(p);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p.get())) out.append(buf, n);
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["capacity_bps"].get<double>(), 150e6);
  ASSERT_EQ(j["paths"].size(), 2U);
  EXPECT_DOUBLE_EQ(j["paths"][1]["rtt_s"].get<double>(), 0.030);
  EXPECT_DOUBLE_EQ(j["paths"][1]["loss"].get<double>(), 0.001);
  ASSERT_EQ(j["outages"].size(), 1U);
  EXPECT_EQ(j["outages"][0]["path"], 1);
  EXPECT_EQ(j["lost_bytes"], 0);
  EXPECT_TRUE(j["drained"].get<bool>());
  // A bad list is a clear error.
  const std::string bad = test::binary_dir() +
                          "/tools/rowan-sim/rowan-sim --rate 1gbit,2gbit --rtt 1ms,2ms,3ms "
                          "--duration 1s 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> q(popen(bad.c_str(), "r"), pclose);
  ASSERT_TRUE(q);
  std::string err;
  while (size_t n = fread(buf, 1, sizeof buf, q.get())) err.append(buf, n);
  EXPECT_NE(err.find("lists must have one value"), std::string::npos) << err;
}

}  // namespace
}  // namespace rowan::sim
