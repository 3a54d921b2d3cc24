// 802.1Q tags and DSCP through the two-site testbed (docs/gateway.md "VLAN
// tags and priorities"): scapy-built RoCEv2 frames, tagged with a PFC
// priority in the PCP and marked with a DSCP, sent from site A's host through
// passthrough and through split, captured in site B's host namespace with
// dumpcap: every frame arrives once, intact, with its VID, PCP and DSCP
// (vlan_frames.py verify); untagged frames stay untagged; frames with two
// tags are dropped at gateway A under their reason; both gateways count the
// tagged frames. (A cut tag cannot cross a veth: the kernel drops it; the
// unit tests cover it.)
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
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

constexpr int kTagged = 40;
constexpr int kUntagged = 10;

class VlanTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    const std::string why =
        testbed_missing({"dumpcap"}, {"/tools/rowan-wanem/rowan-wanem", "/daemon/rowand/rowand"});
    if (!why.empty()) GTEST_SKIP() << why;
    if (shell("/usr/bin/python3 -c 'import scapy.contrib.roce' 2>/dev/null").status != 0) {
      GTEST_SKIP() << "python3-scapy is not installed (scripts/setup-deps)";
    }
    tb_ = std::make_unique<Testbed>();
    ASSERT_TRUE(tb_->held()) << "the testbed lock stayed taken";
  }
  void TearDown() override {
    if (tb_ && tb_->held()) {
      EXPECT_TRUE(tb_->down()) << "two-site down left something behind";
    }
    tb_.reset();
  }
  std::string gw_mac(char site, const std::string& gw) {
    tb_->exec(site, "ping -c 1 -W 2 " + gw);  // ARP for the gateway (and it learns the host)
    return tb_->exec(site, "sh -c \"ip neigh show " + gw + " | awk '{print \\$5}'\"")
        .out.substr(0, 17);
  }
  uint64_t counter(char site, const char* key) {
    const json s = tb_->ctl(site, "status");
    return s.is_object() && s.contains(key) ? s[key].get<uint64_t>() : 0;
  }
  uint64_t drops(char site, const char* reason) {
    const json s = tb_->ctl(site, "status");
    return s.is_object() ? s["drops"].value(reason, uint64_t{0}) : 0;
  }

  std::unique_ptr<Testbed> tb_;
};

TEST_P(VlanTest, TaggedDscpMarkedRoceArrivesWithPcpAndDscpIntact) {
  const std::string mode = GetParam();
  const ShellResult up = tb_->up("--mode " + mode + " --rate 100mbit --rtt 10ms");
  ASSERT_EQ(up.status, 0) << "two-site up --mode " << mode << " failed";
  const std::string mac = gw_mac('a', "198.18.1.1");
  ASSERT_EQ(mac.size(), 17u) << "no ARP entry for gateway A";
  gw_mac('b', "198.18.2.1");  // gateway B learns host B's MAC (untagged ARP)
  const std::string pcap = "/run/rowan/two-site/vlan-" + mode + ".pcap";
  const int want = kTagged + kUntagged;
  tb_->exec('b',
            "sh -c 'dumpcap -q -P -i eth0 -f \"udp port 4791 or (vlan and udp port 4791)\" -c " +
                std::to_string(want) + " -a duration:30 -w " + pcap + " >/dev/null 2>&1 &'");
  for (int i = 0; i < 100 && access(pcap.c_str(), F_OK) != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const std::string py = "/usr/bin/python3 " + source_dir() + "/tests/integration/vlan_frames.py";
  const std::string what = " --count " + std::to_string(kTagged) + " --untagged " +
                           std::to_string(kUntagged) + " --vlan 100 --pcp 5 --dscp 26";
  const ShellResult sent =
      tb_->exec('a', py + " send --iface eth0 --src 198.18.1.10 --dst 198.18.2.10 --gw-mac " + mac +
                         what + " --bad");
  ASSERT_EQ(sent.status, 0) << sent.out;
  for (int i = 0;
       i < 150 && shell("pgrep -f '[d]umpcap.*vlan-" + mode + ".pcap' >/dev/null").status == 0;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const ShellResult v = shell(py + " verify " + pcap + what);
  EXPECT_EQ(v.status, 0) << v.out;
  // Gateway A took the tagged frames (and dropped the bad ones under their
  // reasons); gateway B sent them tagged to its host.
  EXPECT_GE(counter('a', "vlan_rx"), static_cast<uint64_t>(kTagged));
  EXPECT_GE(counter('b', "vlan_tx"), static_cast<uint64_t>(kTagged));
  EXPECT_EQ(drops('a', "vlan_stacked"), 2u);
  EXPECT_EQ(drops('a', "unsupported_l2"), 0u);
  EXPECT_EQ(drops('b', "bad_record"), 0u);
}

// Split mode with the flow paired: scapy's requester on A (VID 100, PCP 5,
// DSCP 26) and responder on B (VID 100, PCP 3, DSCP 26). Gateway A's own
// ACKs reach the requester in the requester's tag and DSCP; gateway B
// re-originates the requests in their sender's tag (B's policy: "sender")
// with the DSCP kept.
TEST_F(VlanTest, SplitAnswersAndReoriginatesInTheQpsClass) {
  const ShellResult up = tb_->up("--mode split --rate 100mbit --rtt 10ms");
  ASSERT_EQ(up.status, 0) << "two-site up --mode split failed";
  const std::string py = "/usr/bin/python3 " + source_dir() + "/tests/integration/split_flows.py";
  const std::string out = "/run/rowan/two-site/vlan-responder.json";
  const std::string ready = "/run/rowan/two-site/vlan-responder.ready";
  shell("rm -f " + out + " " + ready);
  constexpr int kMessages = 20, kPerMessage = 4;
  tb_->exec('b', "sh -c '" + py + " responder --iface eth0 --me 198.18.2.10 --peer 198.18.1.10" +
                     " --gw-mac " + gw_mac('b', "198.18.2.1") + " --qp 34 --peer-qp 17" +
                     " --expect " + std::to_string(1 + kMessages * kPerMessage) +
                     " --timeout 60 --out " + out + " --ready " + ready +
                     " --vlan 100 --pcp 3 --dscp 26 >/dev/null 2>&1 &'");
  for (int i = 0; i < 300 && shell("test -e " + ready).status != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const ShellResult r = tb_->exec(
      'a', py + " requester --iface eth0 --me 198.18.1.10 --peer 198.18.2.10 --gw-mac " +
               gw_mac('a', "198.18.1.1") + " --qp 17 --peer-qp 34 --messages " +
               std::to_string(kMessages) + " --packets-per-message " + std::to_string(kPerMessage) +
               " --window 32 --timeout 40" + " --vlan 100 --pcp 5 --dscp 26");
  EXPECT_EQ(r.status, 0) << "requester: " << r.out.substr(0, 600);
  const json req = r.out.empty() ? json() : json::parse(r.out, nullptr, false);
  json rsp;
  for (int i = 0; i < 600 && !rsp.is_object(); ++i) {
    const ShellResult f = shell("cat " + out + " 2>/dev/null");
    if (f.status == 0 && !f.out.empty()) rsp = json::parse(f.out, nullptr, false);
    if (!rsp.is_object()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(req.is_object()) << "no requester summary";
  ASSERT_TRUE(rsp.is_object()) << "no responder summary";
  EXPECT_EQ(req["acked"], req["packets"]) << req.dump();
  // The responder's own ACK that pairs the flow is relayed in its tag (PCP
  // 3); from then on gateway A answers, in the requester's (PCP 5).
  EXPECT_EQ(req["ack_tags"], json::parse("[[3, 100], [5, 100]]")) << req.dump();
  EXPECT_EQ(req["ack_dscps"], json::parse("[26]")) << req.dump();
  EXPECT_EQ(rsp["accepted"].get<int>(), 1 + kMessages * kPerMessage) << rsp.dump();
  EXPECT_TRUE(rsp["indices_in_order"].get<bool>()) << rsp.dump();
  EXPECT_EQ(rsp["bad_payload"].get<int>(), 0) << rsp.dump();
  EXPECT_EQ(rsp["tags"], json::parse("[[5, 100]]")) << rsp.dump();
  EXPECT_EQ(rsp["dscps"], json::parse("[26]")) << rsp.dump();
  const json a = tb_->ctl('a', "status");
  ASSERT_TRUE(a.is_object());
  EXPECT_GE(a["split"]["flows_paired"].get<int>(), 1) << a["split"].dump();
  EXPECT_GT(a["split"]["acks_sent"].get<int>(), 0) << a["split"].dump();
}

std::string mode_name(const ::testing::TestParamInfo<const char*>& p) { return p.param; }
INSTANTIATE_TEST_SUITE_P(Modes, VlanTest, ::testing::Values("passthrough", "split"), mode_name);

}  // namespace
}  // namespace rowan::test
