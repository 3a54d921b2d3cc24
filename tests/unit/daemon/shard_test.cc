// The packet workers' ownership rule (daemon/rowand/datapath/shard.h): which worker a
// frame from the site port goes to.
#include "datapath/shard.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <vector>

#include "test_frames.h"

namespace rowan::gw {
namespace {

using frames::frame4;

constexpr uint32_t kHostA = 0xC612010A;  // 198.18.1.10
constexpr uint32_t kHostB = 0xC612020A;  // 198.18.2.10

uint32_t shard(const std::vector<uint8_t>& f, uint32_t n, const std::vector<ShardRoute>& r = {}) {
  return shard_of(f.data(), static_cast<uint32_t>(f.size()), n, r);
}

std::vector<ShardRoute> split_route_to(uint8_t site) {
  ShardRoute r;
  r.prefix.addr.version = 4;
  r.prefix.addr.bytes = {198, 18, site, 0};
  r.prefix.len = 24;
  r.split = true;
  return {r};
}

// 64 QPs between two hosts, each with its own UDP source port (as RNICs and
// rxe derive it from the QP): spread over 2 and 4 workers with Jain >= 0.9.
TEST(Shard, SixtyFourQpsSpreadEvenly) {
  for (uint32_t n : {2U, 4U}) {
    std::vector<double> per(n, 0);
    for (uint32_t q = 0; q < 64; ++q) {
      const uint16_t sport = static_cast<uint16_t>(0xC000 + ((q * 2654435761U) >> 18));
      const uint32_t w = shard(frame4(kHostA, kHostB, 17, sport, 4791, 0x11 + q), n);
      ASSERT_LT(w, n);
      per[w] += 1;
    }
    const double j = jain_index(per);
    EXPECT_GE(j, 0.9) << n << " workers";
  }
}

// Sequential source ports (a generator stepping its ports) spread too.
TEST(Shard, SequentialPortsSpreadEvenly) {
  std::vector<double> per(2, 0);
  for (uint16_t p = 0; p < 64; ++p) per[shard(frame4(kHostA, kHostB, 17, 49152 + p, 4791), 2)]++;
  EXPECT_GE(jain_index(per), 0.9);
  std::vector<double> tcp(2, 0);
  for (uint16_t p = 0; p < 64; ++p) tcp[shard(frame4(kHostA, kHostB, 6, 40000 + p, 5201), 2)]++;
  EXPECT_GE(jain_index(tcp), 0.9);
}

// Every packet of a QP goes to one worker, whatever its PSN or payload: the
// hash reads addresses and ports only.
TEST(Shard, AQpStaysOnOneWorker) {
  for (uint32_t q = 0; q < 64; ++q) {
    const uint16_t sport = static_cast<uint16_t>(50000 + q * 7);
    const uint32_t first = shard(frame4(kHostA, kHostB, 17, sport, 4791, q, 0), 4);
    for (uint32_t psn = 1; psn < 50; ++psn) {
      EXPECT_EQ(shard(frame4(kHostA, kHostB, 17, sport, 4791, q ^ psn, psn), 4), first);
    }
  }
}

// A→B and B→A of a 5-tuple meet in one worker (worker i pairs with the
// peer's worker i).
TEST(Shard, SymmetricAcrossDirections) {
  for (uint16_t p = 0; p < 200; ++p) {
    EXPECT_EQ(shard(frame4(kHostA, kHostB, 6, 40000 + p, 5201), 4),
              shard(frame4(kHostB, kHostA, 6, 5201, 40000 + p), 4));
  }
}

// Toward a split route, RoCEv2 hashes on the addresses only: the requester's
// packets (at gateway A, whose route to site B is split) and the
// responder's ACKs (at gateway B, its own source port) share a worker index.
TEST(Shard, SplitRoutesKeepBothDirectionsOfAQpTogether) {
  const auto routes = split_route_to(2);
  const auto routes_b = split_route_to(1);
  std::set<uint32_t> seen;
  for (uint16_t p = 0; p < 64; ++p) {
    seen.insert(shard(frame4(kHostA, kHostB, 17, 49152 + p, 4791), 4, routes));
    seen.insert(shard(frame4(kHostB, kHostA, 17, 60000 - p, 4791), 4, routes_b));
  }
  // Without the split route the same QPs spread.
  std::set<uint32_t> spread;
  for (uint16_t p = 0; p < 64; ++p)
    spread.insert(shard(frame4(kHostA, kHostB, 17, 49152 + p, 4791), 4));
  EXPECT_GT(spread.size(), 1U);
  EXPECT_EQ(seen.size(), 1U);
  // TCP toward the same route still spreads by its ports.
  std::set<uint32_t> tcp;
  for (uint16_t p = 0; p < 64; ++p)
    tcp.insert(shard(frame4(kHostA, kHostB, 6, 40000 + p, 80), 4, routes));
  EXPECT_GT(tcp.size(), 1U);
}

TEST(Shard, NeighbourDiscoveryGoesToEveryWorker) {
  std::vector<uint8_t> arp(60, 0);
  arp[12] = 0x08;
  arp[13] = 0x06;
  EXPECT_EQ(shard(arp, 2), kAllWorkers);
  std::vector<uint8_t> ns(14 + 40 + 32, 0);
  ns[12] = 0x86;
  ns[13] = 0xDD;
  ns[14] = 0x60;
  ns[14 + 5] = 32;
  ns[14 + 6] = 58;
  ns[14 + 40] = 135;
  EXPECT_EQ(shard(ns, 2), kAllWorkers);
  ns[14 + 40] = 128;  // echo request: one worker
  EXPECT_LT(shard(ns, 2), 2U);
}

TEST(Shard, BadFramesGoToWorkerZeroAndOneWorkerTakesAll) {
  EXPECT_EQ(shard(std::vector<uint8_t>(10, 0), 2), 0U);  // runt
  std::vector<uint8_t> vlan(64, 0);
  vlan[12] = 0x81;
  EXPECT_EQ(shard(vlan, 2), 0U);
  auto bad = frame4(kHostA, kHostB, 17, 1, 4791);
  bad[14] = 0x4F;  // IHL past the frame
  EXPECT_EQ(shard(std::vector<uint8_t>(bad.begin(), bad.begin() + 40), 2), 0U);
  EXPECT_EQ(shard(frame4(kHostA, kHostB, 17, 49152, 4791), 1), 0U);
}

// Fragments carry no ports: keyed like the flow table keys them (addresses
// and protocol), so all fragments of a flow stay together.
// A tagged frame goes where the same frame untagged goes, whatever its VID
// and PCP (a QP whose frames change priority stays on one worker), on a
// split route too; tagged ARP goes to every worker; two tags or a cut tag
// go to worker 0, which drops them.
TEST(Shard, TaggedFramesLikeUntagged) {
  for (const auto& routes : {std::vector<ShardRoute>{}, split_route_to(2)}) {
    std::set<uint32_t> seen;
    for (uint32_t q = 0; q < 32; ++q) {
      const auto f = frame4(kHostA, kHostB, 17, static_cast<uint16_t>(0xC000 + 7 * q), 4791, q);
      const uint32_t w = shard(f, 4, routes);
      seen.insert(w);
      EXPECT_EQ(shard(frames::tagged(f, 0xA064), 4, routes), w) << q;  // PCP 5, VID 100
      EXPECT_EQ(shard(frames::tagged(f, 0x0FFE), 4, routes), w) << q;  // PCP 0, VID 4094
    }
    if (routes.empty()) {
      EXPECT_GT(seen.size(), 1u) << "QPs spread, tagged as untagged";
    }
  }
  const auto arp = frames::arp(1, {2, 0, 0, 0, 1, 0x10}, kHostA, 0xC6120101, {});
  EXPECT_EQ(shard(frames::tagged(arp, 100), 4), kAllWorkers);
  const auto f = frame4(kHostA, kHostB, 17, 0xC123, 4791, 9);
  EXPECT_EQ(shard(frames::tagged(frames::tagged(f, 100), 200), 4), 0u);
  EXPECT_EQ(shard(frames::tagged(frames::tagged(f, 100), 200, 0x88A8), 4), 0u);
  std::vector<uint8_t> cut(f.begin(), f.begin() + 12);
  cut.insert(cut.end(), {0x81, 0x00, 0x00});
  EXPECT_EQ(shard(cut, 4), 0u);
}

TEST(Shard, FragmentsHashOnAddresses) {
  std::set<uint32_t> seen;
  for (uint16_t p = 0; p < 64; ++p) {
    auto f = frame4(kHostA, kHostB, 17, 49152 + p, 9999);
    f[14 + 6] = 0x20;  // more fragments
    seen.insert(shard(f, 4));
  }
  EXPECT_EQ(seen.size(), 1U);
}

TEST(Shard, JainIndex) {
  EXPECT_DOUBLE_EQ(jain_index({5, 5}), 1.0);
  EXPECT_DOUBLE_EQ(jain_index({10, 0}), 0.5);
}

}  // namespace
}  // namespace rowan::gw
