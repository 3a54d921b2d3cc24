// rowand in split mode through the two-site testbed (docs/split-mode.md):
// scapy plays an RC requester on site A and an RC responder on site B
// (tests/integration/split_flows.py). The first SEND is acknowledged end to
// end (passthrough, one WAN RTT) and pairs the flow; from then on the
// requester's ACKs come from gateway A, well before a WAN round trip, with
// the MSNs the responder would have used, the data arrives complete and in
// order at the responder, and gateway B consumes the responder's ACKs.
// With RDMA CM (--cm: REQ/REP/RTU, DREQ/DREP on QP1) the gateways pair the
// flow before any data, so even the first SEND is acknowledged locally, and
// the teardown releases it. Every test tears the testbed down.
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
  /// `rsp_args` / `req_args`: extra options of split_flows.py (e.g. " --cm").
  /// `expect`: packets the responder must accept (default: what the requester sends).
  std::pair<json, json> run_flow(int messages, int per_message, const std::string& rsp_args = "",
                                 const std::string& req_args = "", int expect = 0) {
    if (expect == 0) expect = 1 + messages * per_message;
    const std::string out = "/run/rowan/two-site/split-responder.json";
    const std::string ready = "/run/rowan/two-site/split-responder.ready";
    shell("rm -f " + out + " " + ready);
    exec('b', "sh -c '" + py_ + " responder --iface eth0 --me 198.18.2.10 --peer 198.18.1.10" +
                  " --gw-mac " + gw_mac('b') + " --qp " + std::to_string(kResponderQp) +
                  " --peer-qp " + std::to_string(kRequesterQp) + " --expect " +
                  std::to_string(expect) + " --timeout 60 --out " + out + " --ready " + ready +
                  rsp_args + " >/dev/null 2>&1 &'");
    for (int i = 0; i < 300 && shell("test -e " + ready).status != 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // scapy starts its sniffer
    }
    const ShellResult r =
        exec('a', py_ + " requester --iface eth0 --me 198.18.1.10 --peer 198.18.2.10 --gw-mac " +
                      gw_mac('a') + " --qp " + std::to_string(kRequesterQp) + " --peer-qp " +
                      std::to_string(kResponderQp) + " --messages " + std::to_string(messages) +
                      " --packets-per-message " + std::to_string(per_message) +
                      " --window 32 --timeout 40" + req_args);
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
    settle();
    return {req, rsp};
  }

  /// Waits (at most 3 s) until neither gateway has an egress flow with
  /// packets in flight. `rowanctl status` reads a snapshot the data path
  /// publishes every 100 ms, and the responder's last ACKs may reach gateway
  /// B just before the summary is read: without this wait a check of B's
  /// counters could see the state before them.
  void settle() {
    for (int i = 0; i < 30; ++i) {
      bool busy = false;
      for (const char site : {'a', 'b'}) {
        const json s = status(site);
        if (!s.is_object() || !s.contains("split")) continue;
        for (const json& f : s["split"].value("flows", json::array())) {
          busy = busy || (f.value("in_window", 0) > 0 && !f.value("failed", false));
        }
      }
      if (!busy) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  /// Restarts gateway B with `line` added to its [local] table (as faults_test
  /// restarts a gateway) and waits for its WAN session.
  void restart_b_with(const std::string& line) {
    const std::string st = "/run/rowan/two-site";
    ASSERT_EQ(shell("sed -i '/^\\[local\\]/a " + line + "' " + st + "/rowand-b.toml").status, 0);
    ASSERT_EQ(shell("kill $(cat " + st + "/rowand-b.pid); for i in $(seq 50); do kill -0 $(cat " +
                    st + "/rowand-b.pid) 2>/dev/null || break; sleep 0.1; done")
                  .status,
              0);
    const std::string rowand = binary_dir() + "/daemon/rowand/rowand";
    ASSERT_EQ(shell("rm -f /run/rowan/b/control.sock; ip netns exec rowan-b-gw setsid " + rowand +
                    " -c " + st + "/rowand-b.toml </dev/null >>" + st + "/rowand-b.log 2>&1 & " +
                    "echo $! >" + st + "/rowand-b.pid")
                  .status,
              0);
    bool up = false;
    for (int i = 0; i < 200 && !up; ++i) {
      const ShellResult r = shell(ctl_ + " -s /run/rowan/b/control.sock peers --json 2>/dev/null");
      up = r.status == 0 && r.out.find("\"session\": \"up\"") != std::string::npos;
      if (!up) up = r.status == 0 && r.out.find("\"session\":\"up\"") != std::string::npos;
      if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ASSERT_TRUE(up) << "gateway B did not come back with " << line;
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
  up("--rate 100mbit --rtt 20ms --loss 1%");
  const int messages = 40;
  const int per_message = 4;
  const auto [req, rsp] = run_flow(messages, per_message);
  // The first SEND may have crossed the lossy WAN more than once.
  ASSERT_TRUE(req.is_object());
  check_flow(req, rsp, 1 + messages * per_message, 20.0);
  EXPECT_EQ(req["naks"].get<int>(), 0) << "WAN loss reached the requester: " << req.dump();
}

// Every request completes at gateway A at once, so the requester sends its
// DREQ while gateway B still re-originates the data: gateway B must hold the
// DREQ until the responder has acknowledged everything before it (before
// that fix the DREQ released B's egress flow, B consumed none of the
// responder's ACKs, and the data after the first 64 packets was lost).
TEST_F(SplitTest, RdmaCmPairsBeforeAnyDataAndTeardownReleases) {
  up("--rate 100mbit --rtt 20ms");
  const int messages = 20;
  const int per_message = 4;
  const int packets = 1 + messages * per_message;
  const auto [req, rsp] = run_flow(messages, per_message, " --cm --mtu", " --cm");
  ASSERT_TRUE(req.is_object()) << "no requester summary";
  ASSERT_TRUE(rsp.is_object()) << "no responder summary";
  EXPECT_EQ(req["acked"].get<int>(), packets) << req.dump();
  EXPECT_TRUE(req["msn_errors"].empty()) << req.dump();
  EXPECT_EQ(req["other_naks"].get<int>(), 0) << req.dump();
  // Paired from REQ/REP: the very first SEND is acknowledged by gateway A.
  ASSERT_TRUE(req["first_ack_ms"].is_number()) << req.dump();
  EXPECT_LT(req["first_ack_ms"].get<double>(), 10.0) << req.dump();
  EXPECT_LT(req["message_ack_ms_median"].get<double>(), 10.0) << req.dump();
  EXPECT_TRUE(req["cm_drep"].get<bool>()) << req.dump();
  EXPECT_EQ(rsp["cm_reqs"].get<int>(), 1) << rsp.dump();
  EXPECT_EQ(rsp["cm_dreqs"].get<int>(), 1) << rsp.dump();
  EXPECT_EQ(rsp["req_mtu"].get<int>(), 1024) << rsp.dump();
  EXPECT_EQ(rsp["accepted"].get<int>(), packets) << rsp.dump();
  EXPECT_EQ(rsp["payloads"].get<int>(), packets) << rsp.dump();
  EXPECT_EQ(rsp["bad_payload"].get<int>(), 0) << rsp.dump();
  EXPECT_EQ(rsp["mtu_errors"].get<int>(), 0) << rsp.dump();
  EXPECT_TRUE(rsp["indices_in_order"].get<bool>()) << rsp.dump();
  const json a = status('a')["split"];
  const json b = status('b')["split"];
  EXPECT_EQ(a["cm_paired"].get<int>(), 1) << a.dump();  // A's requester direction
  EXPECT_EQ(b["cm_paired"].get<int>(), 1) << b.dump();  // B's (unused) direction
  EXPECT_EQ(a["flows_paired"].get<int>(), 1) << a.dump();
  EXPECT_EQ(b["flows_egress"].get<int>(), 1) << b.dump();
  EXPECT_GE(b["acks_consumed"].get<int>(), messages) << b.dump();
  // DREQ/DREP released both directions at both gateways.
  EXPECT_GE(a["cm_released"].get<int>(), 1) << a.dump();
  EXPECT_GE(b["cm_released"].get<int>(), 2) << b.dump();
  EXPECT_TRUE(a["flows"].empty()) << a.dump();
  EXPECT_TRUE(b["flows"].empty()) << b.dump();
}

// Site B's hosts run path MTU 512 ([local] roce_mtu), site A's 1024: gateway
// B gives the CM REQ its site's MTU, and re-cuts A's 1024-byte packets into
// 512-byte ones with B's own PSNs; the responder accepts only 512-byte
// packets and checks every byte per message.
TEST_F(SplitTest, MtuTranslationRecutsRequestsForTheRemoteSite) {
  up("--rate 100mbit --rtt 20ms");
  restart_b_with("roce_mtu = 512");
  const int messages = 10;
  const int per_message = 4;
  const int packets = 1 + messages * per_message;
  const auto [req, rsp] =
      run_flow(messages, per_message, " --cm --mtu", " --cm --mtu-code 3", packets * 2);
  ASSERT_TRUE(req.is_object()) << "no requester summary";
  ASSERT_TRUE(rsp.is_object()) << "no responder summary";
  EXPECT_EQ(req["acked"].get<int>(), packets) << req.dump();
  EXPECT_TRUE(req["msn_errors"].empty()) << req.dump();
  EXPECT_EQ(req["other_naks"].get<int>(), 0) << req.dump();
  EXPECT_TRUE(req["cm_drep"].get<bool>()) << req.dump();
  EXPECT_EQ(rsp["cm_dreqs"].get<int>(), 1) << rsp.dump();  // after all the re-cut data
  EXPECT_EQ(rsp["req_mtu"].get<int>(), 512) << rsp.dump();
  EXPECT_EQ(rsp["accepted"].get<int>(), packets * 2) << rsp.dump();  // each 1024 → 2 × 512
  EXPECT_EQ(rsp["mtu_errors"].get<int>(), 0) << rsp.dump();
  EXPECT_EQ(rsp["payloads"].get<int>(), packets) << rsp.dump();
  EXPECT_EQ(rsp["bad_payload"].get<int>(), 0) << rsp.dump();
  EXPECT_TRUE(rsp["indices_in_order"].get<bool>()) << rsp.dump();
  const json b = status('b')["split"];
  EXPECT_EQ(b["cm_mtu_rewritten"].get<int>(), 1) << b.dump();
  EXPECT_EQ(b["translated_flows"].get<int>(), 1) << b.dump();
  EXPECT_GE(b["resegmented"].get<int>(), packets * 2) << b.dump();
}

}  // namespace
}  // namespace rowan::test
