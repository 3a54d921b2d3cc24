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

std::string mode_name(const ::testing::TestParamInfo<const char*>& p) { return p.param; }
INSTANTIATE_TEST_SUITE_P(Modes, VlanTest, ::testing::Values("passthrough", "split"), mode_name);

}  // namespace
}  // namespace rowan::test
