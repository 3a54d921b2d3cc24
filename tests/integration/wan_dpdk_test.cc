// Passthrough over DPDK WAN links (`scripts/two-site up --wan-backend dpdk`):
// each rowand's WAN link is a net_af_packet vdev on its wan0 (dpdk_wan_io.h),
// so the gateways resolve each other by ARP and build their own
// Ethernet/IPv4/UDP frames. Through 1 % WAN loss: a TCP stream is verified
// byte for byte, UDP sees no loss end to end, and malformed frames sent at
// gateway B's WAN port are dropped under their reasons while traffic goes on.
// With two packet workers per gateway, each owns a queue pair of the WAN port
// and its own UDP port on it; verified streams spread over both.
// One testbed bring-up per test; each tears it down.
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "tools/paths.h"
#include "tools/shell.h"
#include "tools/testbed.h"

namespace rowan::test {
namespace {

using nlohmann::json;

class WanDpdkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = testbed_missing({"iperf3", "ethtool", "jq"});
    if (!why.empty()) GTEST_SKIP() << why;
    unsetenv("ROWAN_INSECURE");
    tb_ = std::make_unique<Testbed>();
    ASSERT_TRUE(tb_->held()) << "the testbed lock stayed taken";
  }
  void TearDown() override {
    if (tb_ && tb_->held()) {
      EXPECT_TRUE(tb_->down()) << "two-site down left something behind";
    }
    tb_.reset();
  }
  ShellResult exec(char site, const std::string& cmd) { return tb_->exec(site, cmd); }
  json ctl(char site, const std::string& cmd) {
    const json j = tb_->ctl(site, cmd);
    EXPECT_FALSE(j.is_discarded()) << "rowanctl " << cmd;
    return j.is_discarded() ? json() : j;
  }
  json link(char site) {
    const json l = ctl(site, "links");
    return l.is_array() && !l.empty() ? l[0] : json::object();
  }

  std::unique_ptr<Testbed> tb_;
};

TEST_F(WanDpdkTest, VerifiedTcpAndUdpThroughLossAndMalformedFramesCounted) {
  const ShellResult up = tb_->up(
      "--mode passthrough --wan-backend dpdk --rate 100mbit "
      "--rtt 20ms --loss 1%");
  ASSERT_EQ(up.status, 0) << "two-site up --wan-backend dpdk failed";
  // Each side resolves the other, but a side that learns its peer's MAC from
  // the peer's own request never asks, so only one of them need have replied.
  uint64_t replies = 0;
  for (char site : {'a', 'b'}) {
    const json l = link(site);
    EXPECT_EQ(l.value("backend", std::string()), "dpdk") << site;
    EXPECT_TRUE(l.value("resolved", false)) << site << ": the peer's MAC is not resolved";
    replies += l["arp"].value("replies_sent", uint64_t{0});
  }
  EXPECT_GE(replies, 1U) << "neither gateway answered an ARP request on its DPDK WAN port";

  // TCP, every byte checked (checked_stream.py), through 1 % loss.
  const std::string stream =
      "/usr/bin/python3 " + source_dir() + "/tests/integration/checked_stream.py";
  exec('b', "sh -c '" + stream + " server 5201 > /tmp/rowan-wan-dpdk-rx.json 2>&1 &'");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const ShellResult tx = exec('a', stream + " client 198.18.2.10 5201 " + std::to_string(8 << 20));
  ASSERT_EQ(tx.status, 0) << tx.out;
  json rx;
  for (int i = 0; i < 50; ++i) {
    rx = json::parse(exec('b', "cat /tmp/rowan-wan-dpdk-rx.json").out, nullptr, false);
    if (!rx.is_discarded() && rx.contains("ok")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_TRUE(rx.contains("ok")) << rx.dump();
  EXPECT_TRUE(rx["ok"].get<bool>()) << rx.dump();

  // UDP: WAN loss is repaired by the gateways, the hosts see none.
  exec('b', "sh -c 'iperf3 -s -1 -D --logfile /dev/null'");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const ShellResult u = exec('a', "iperf3 -c 198.18.2.10 -J -u -b 10M -l 1000 -t 3");
  ASSERT_EQ(u.status, 0) << u.out.substr(0, 400);
  const json uj = json::parse(u.out);
  EXPECT_GT(uj["end"]["sum"]["packets"].get<uint64_t>(), 3000U);
  EXPECT_EQ(uj["end"]["sum"]["lost_packets"].get<uint64_t>(), 0U) << "the hosts saw WAN loss";
  const json peers = ctl('a', "peers");
  ASSERT_FALSE(peers.empty());
  EXPECT_GT(peers[0]["retransmitted_packets"].get<uint64_t>(), 0U)
      << "1% WAN loss but the gateway repaired nothing";
  // Under link security the transport writes each datagram into the mbuf
  // the DPDK WAN lends, where it is sealed and sent from (secure_io.h).
  const uint64_t sealed = peers[0]["records_sealed"].get<uint64_t>();
  const uint64_t in_place = peers[0]["records_sealed_in_place"].get<uint64_t>();
  EXPECT_GT(in_place, sealed / 2) << in_place << " of " << sealed << " records sealed in place";
  // B copies in-order stream data from the datagram straight into the site
  // mbuf; what follows a lost datagram waits in the stream's buffer.
  const json pb = ctl('b', "peers");
  ASSERT_FALSE(pb.empty());
  const uint64_t b_received = pb[0]["stream_bytes_received"].get<uint64_t>();
  const uint64_t direct = pb[0]["stream_bytes_read_in_place"].get<uint64_t>();
  EXPECT_GT(direct, 0U);
  EXPECT_LT(direct, b_received) << "1% WAN loss but nothing waited for a retransmission";
  std::printf("B: %llu of %llu stream bytes read in place\n",
              static_cast<unsigned long long>(direct), static_cast<unsigned long long>(b_received));

  // Malformed frames at B's WAN port: each dropped under its reason.
  const json before = link('b')["drops"];
  const std::string bmac =
      shell("ip netns exec rowan-b-gw cat /sys/class/net/wan0/address").out.substr(0, 17);
  const ShellResult inj = shell("ip netns exec rowan-a-gw /usr/bin/python3 " + source_dir() +
                                "/tests/integration/wan_frames.py " + bmac + " 20");
  ASSERT_EQ(inj.status, 0) << inj.out;
  const json sent = json::parse(inj.out);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const ShellResult ping = exec('a', "ping -c 3 -i 0.2 -W 2 -q 198.18.2.10");
  EXPECT_EQ(ping.status, 0) << "traffic stopped after malformed WAN frames: " << ping.out;
  const json after = link('b')["drops"];
  for (const auto& [kind, n] : sent.items()) {
    const uint64_t got = after.value(kind, uint64_t{0}) - before.value(kind, uint64_t{0});
    // The emulated WAN loses 1 %; at least 15 of 20 get there.
    EXPECT_GE(got, 15U) << kind << ": " << got << " of " << n << " counted";
    // Genuine traffic never fails a check (only multicast noise adds to unsupported_l2).
    if (kind != "unsupported_l2") {
      EXPECT_LE(got, n.get<uint64_t>()) << kind;
    }
  }
}

// Two workers per gateway (`--workers 2`): the WAN port has a queue pair per
// worker (net_af_packet qpairs=2), and what the kernel's fanout puts on the
// other worker's queue is steered to it (dpdk_wan_io.h). Both workers'
// connections come up, and six byte-checked TCP streams, spread over the
// workers by their ports, arrive whole through 1 % loss.
TEST_F(WanDpdkTest, TwoWorkersEachOwnAQueuePairAndStreamsArriveWhole) {
  const ShellResult up = tb_->up(
      "--mode passthrough --wan-backend dpdk --workers 2 --rate 100mbit "
      "--rtt 20ms --loss 1%");
  ASSERT_EQ(up.status, 0) << "two-site up --wan-backend dpdk --workers 2 failed";
  const std::string stream =
      "/usr/bin/python3 " + source_dir() + "/tests/integration/checked_stream.py";
  constexpr int kStreams = 6;
  std::string clients;
  for (int i = 0; i < kStreams; ++i) {
    const std::string port = std::to_string(5211 + i);
    exec('b', "sh -c '" + stream + " server " + port + " > /tmp/rowan-wan-dpdk-rx-" + port +
                  ".json 2>&1 &'");
    clients +=
        stream + " client 198.18.2.10 " + port + " " + std::to_string(2 << 20) + " > /dev/null & ";
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const ShellResult tx = exec('a', "sh -c '" + clients + "wait'");
  ASSERT_EQ(tx.status, 0) << tx.out;
  for (int i = 0; i < kStreams; ++i) {
    const std::string port = std::to_string(5211 + i);
    json rx;
    for (int k = 0; k < 50; ++k) {
      rx = json::parse(exec('b', "cat /tmp/rowan-wan-dpdk-rx-" + port + ".json").out, nullptr,
                       false);
      if (!rx.is_discarded() && rx.contains("ok")) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    ASSERT_TRUE(rx.contains("ok")) << port << ": " << rx.dump();
    EXPECT_TRUE(rx["ok"].get<bool>()) << port << ": " << rx.dump();
  }
  for (char site : {'a', 'b'}) {
    const json l = link(site);
    EXPECT_EQ(l.value("queues", 0), 2) << site;
    EXPECT_TRUE(l.value("resolved", false)) << site;
    // Steered datagrams are handed over, not lost: out and in are summed
    // over the workers (a handful may be in a ring at the moment of asking).
    const uint64_t out = l["steered"].value("out", uint64_t{0});
    const uint64_t in = l["steered"].value("in", uint64_t{0});
    EXPECT_LE(in, out) << site;
    EXPECT_LE(out - in, 64U) << site;
    EXPECT_EQ(l["drops"].value("steer_full", uint64_t{1}), 0U) << site;
    EXPECT_EQ(l["drops"].value("wrong_port", uint64_t{1}), 0U) << site;
    // The peer view is as up as the least-up worker's connection.
    const json peers = ctl(site, "peers");
    ASSERT_FALSE(peers.empty());
    EXPECT_EQ(peers[0].value("session", std::string()), "up") << site;
    const json st = ctl(site, "status");
    ASSERT_EQ(st["workers"].size(), 2U) << site;
    std::printf("%c: steered %llu of %llu datagrams received; flows per worker %s\n", site,
                static_cast<unsigned long long>(out),
                static_cast<unsigned long long>(l.value("packets_received", uint64_t{0})),
                st["workers"].dump().c_str());
  }
}

}  // namespace
}  // namespace rowan::test
