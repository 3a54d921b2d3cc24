// rowand in split mode through the two-site testbed (docs/split-mode.md):
// scapy plays an RC requester on site A and an RC responder on site B
// (tests/integration/split_flows.py). The first SEND is acknowledged end to
// end (passthrough, one WAN RTT) and pairs the flow; from then on the
// requester's ACKs come from gateway A, well before a WAN round trip, with
// the MSNs the responder would have used, the data arrives complete and in
// order at the responder, and gateway B consumes the responder's ACKs.
// Every test tears the testbed down.
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "tools/paths.h"
#include "tools/shell.h"
#include "tools/testbed_lock.h"

namespace rowan::test {
namespace {

using nlohmann::json;

constexpr int kRequesterQp = 17;
constexpr int kResponderQp = 34;

class SplitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces)";
    for (const char* tool : {"ip", "ping", "jq"}) {
      if (!have_tool(tool)) GTEST_SKIP() << tool << " is not installed (scripts/setup-deps)";
    }
    if (access("/usr/bin/python3", X_OK) != 0 ||
        shell("/usr/bin/python3 -c 'import scapy.contrib.roce' 2>/dev/null").status != 0) {
      GTEST_SKIP() << "python3-scapy is not installed (scripts/setup-deps)";
    }
    for (const char* bin : {"/tools/rowan-wanem/rowan-wanem", "/daemon/rowand/rowand"}) {
      if (access((binary_dir() + bin).c_str(), X_OK) != 0) {
        GTEST_SKIP() << binary_dir() + bin << " is not built (ROWAN_BUILD_DPDK=OFF?)";
      }
    }
    setenv("ROWAN_BUILD_DIR", binary_dir().c_str(), 1);
    unsetenv("ROWAN_WANEM");
    script_ = source_dir() + "/scripts/two-site";
    ctl_ = binary_dir() + "/daemon/rowanctl/rowanctl";
    py_ = "/usr/bin/python3 " + source_dir() + "/tests/integration/split_flows.py";
    lock_ = std::make_unique<TestbedLock>();
    ASSERT_TRUE(lock_->held()) << "the testbed lock stayed taken";
    shell(script_ + " down 2>/dev/null");
    started_ = true;
  }
  void TearDown() override {
    if (!started_) return;
    EXPECT_EQ(shell(script_ + " down").status, 0) << "two-site down left something behind";
    lock_.reset();
  }

  void up(const std::string& args) {
    const ShellResult r = shell(script_ + " up --mode split " + args);
    ASSERT_EQ(r.status, 0) << "two-site up --mode split " << args << " failed";
  }
  ShellResult exec(char site, const std::string& cmd) {
    return shell(script_ + " exec " + site + " -- " + cmd);
  }
  json status(char site) {
    const ShellResult r =
        shell(ctl_ + " -s /run/rowan/" + std::string(1, site) + "/control.sock status --json");
    EXPECT_EQ(r.status, 0) << "rowanctl status";
    return r.status == 0 ? json::parse(r.out) : json();
  }
  std::string gw_mac(char site) {
    const std::string gw = site == 'a' ? "198.18.1.1" : "198.18.2.1";
    exec(site, "ping -c 1 -W 2 " + gw);  // rowand itself: fills the ARP cache
    return exec(site, "sh -c \"ip neigh show " + gw + " | awk '{print \\$5}'\"").out.substr(0, 17);
  }

  /// Runs the responder on B and the requester on A; returns {requester, responder}.
  std::pair<json, json> run_flow(int messages, int per_message) {
    const int expect = 1 + messages * per_message;
    const std::string out = "/run/rowan/two-site/split-responder.json";
    const std::string ready = "/run/rowan/two-site/split-responder.ready";
    shell("rm -f " + out + " " + ready);
    exec('b', "sh -c '" + py_ + " responder --iface eth0 --me 198.18.2.10 --peer 198.18.1.10" +
                  " --gw-mac " + gw_mac('b') + " --qp " + std::to_string(kResponderQp) +
                  " --peer-qp " + std::to_string(kRequesterQp) + " --expect " +
                  std::to_string(expect) + " --timeout 60 --out " + out + " --ready " + ready +
                  " >/dev/null 2>&1 &'");
    for (int i = 0; i < 300 && shell("test -e " + ready).status != 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // scapy starts its sniffer
    }
    const ShellResult r =
        exec('a', py_ + " requester --iface eth0 --me 198.18.1.10 --peer 198.18.2.10 --gw-mac " +
                      gw_mac('a') + " --qp " + std::to_string(kRequesterQp) + " --peer-qp " +
                      std::to_string(kResponderQp) + " --messages " + std::to_string(messages) +
                      " --packets-per-message " + std::to_string(per_message) +
                      " --window 32 --timeout 40");
    EXPECT_EQ(r.status, 0) << "requester: " << r.out.substr(0, 600);
    json req = r.out.empty() ? json() : json::parse(r.out, nullptr, false);
    json rsp;
    for (int i = 0; i < 600; ++i) {
      const ShellResult f = shell("cat " + out + " 2>/dev/null");
      if (f.status == 0 && !f.out.empty()) {
        rsp = json::parse(f.out, nullptr, false);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return {req, rsp};
  }

  std::string script_, ctl_, py_;
  std::unique_ptr<TestbedLock> lock_;
  bool started_ = false;
};

void check_flow(const json& req, const json& rsp, int packets, double rtt_ms) {
  ASSERT_TRUE(req.is_object()) << "no requester summary";
  ASSERT_TRUE(rsp.is_object()) << "no responder summary (it did not accept everything in time)";
  EXPECT_EQ(req["acked"].get<int>(), packets) << req.dump();
  EXPECT_TRUE(req["msn_errors"].empty()) << "ACKs with a wrong MSN: " << req.dump();
  EXPECT_EQ(req["other_naks"].get<int>(), 0) << req.dump();
  // The first SEND is acknowledged by the remote host: a WAN round trip.
  EXPECT_GE(req["first_ack_ms"].get<double>(), rtt_ms * 0.9) << req.dump();
  // After pairing the gateway acknowledges: well before a WAN round trip.
  ASSERT_GT(req["messages_timed"].get<int>(), 0) << req.dump();
  EXPECT_LT(req["message_ack_ms_median"].get<double>(), rtt_ms / 2) << req.dump();
  EXPECT_EQ(rsp["accepted"].get<int>(), packets) << rsp.dump();
  EXPECT_EQ(rsp["payloads"].get<int>(), packets) << rsp.dump();
  EXPECT_EQ(rsp["bad_payload"].get<int>(), 0) << rsp.dump();
  EXPECT_EQ(rsp["order_errors"].get<int>(), 0) << rsp.dump();
  EXPECT_TRUE(rsp["indices_in_order"].get<bool>()) << rsp.dump();
}

TEST_F(SplitTest, RequesterIsAckedLocallyAndDataArrivesComplete) {
  up("--rate 100mbit --rtt 20ms");
  const int messages = 40;
  const int per_message = 4;
  const auto [req, rsp] = run_flow(messages, per_message);
  check_flow(req, rsp, 1 + messages * per_message, 20.0);
  const json a = status('a')["split"];
  const json b = status('b')["split"];
  EXPECT_EQ(a["flows_paired"].get<int>(), 1) << a.dump();
  EXPECT_GE(a["acks_sent"].get<int>(), messages) << a.dump();
  EXPECT_EQ(b["flows_egress"].get<int>(), 1) << b.dump();
  // The responder's ACKs stop at gateway B (all but the one covering the
  // passthrough SEND and the first split ACK that confirms it).
  EXPECT_GE(b["acks_consumed"].get<int>(), messages - 2) << b.dump();
  EXPECT_GE(b["reoriginated"].get<int>(), messages * per_message) << b.dump();
}

TEST_F(SplitTest, WanLossStaysBetweenTheGateways) {
  up("--rate 100mbit --rtt 20ms --loss 1% --cc bbr");
  const int messages = 40;
  const int per_message = 4;
  const auto [req, rsp] = run_flow(messages, per_message);
  // The first SEND may have crossed the lossy WAN more than once.
  ASSERT_TRUE(req.is_object());
  check_flow(req, rsp, 1 + messages * per_message, 20.0);
  EXPECT_EQ(req["naks"].get<int>(), 0) << "WAN loss reached the requester: " << req.dump();
}

}  // namespace
}  // namespace rowan::test
